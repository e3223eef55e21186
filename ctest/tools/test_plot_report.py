#!/usr/bin/env python3
"""tools/plot_report.py's layout (issue 20), checked on what it drew, not on pixels:
- the measured-against-predicted time plot holds time terms only (unit s), never a byte or
  memory term; those get measured_vs_predicted_bytes.png, traffic and memory in their own panels;
- the step breakdown of a 50-point report (the demo's size) has one row per point, sorted by
  measured step time, a height that grows with the point count, and its legend outside the bars.

    test_plot_report.py PLOT_SCRIPT [KEEP_DIR]

Exit 0 passed, 1 failed (each failure printed), 77 skipped (no matplotlib: CTest's skip code).
KEEP_DIR keeps the PNGs of the 50-point report there (to look at them).
"""
import importlib.util
import json
import os
import random
import sys
import tempfile

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("SKIP: this python3 has no matplotlib")
    sys.exit(77)

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def term(name, measured, predicted, unit):
    return {"name": name, "measured": measured, "predicted": predicted, "unit": unit}


def fake_report(n, seed=1):
    """n points shaped like the demo's: every tp x pp x dp of 4 ranks, each ZeRO stage, with and
    without overlap (48 distinct labels; more repeat them on a second machine)."""
    rnd = random.Random(seed)
    grids = [(1, 1, 4), (1, 2, 2), (1, 4, 1), (2, 1, 2), (2, 2, 1), (4, 1, 1)]
    points = []
    for i in range(n):
        tp, pp, dp = grids[i % 6]
        zero, ov = (i // 6) % 4, (i // 24) % 2
        label = f"tp{tp} pp{pp} dp{dp} z{zero}" + (" 1f1b m8" if pp > 1 else "") + \
            (" ov" if ov else "")
        compute = rnd.uniform(0.010, 0.050)
        terms = [term("compute", compute, compute * rnd.uniform(0.6, 1.1), "s")]
        step = compute
        for axis, deg in (("tp", tp), ("dp", dp)):
            if deg > 1:
                t = rnd.uniform(0.001, 0.006)
                terms.append(term(axis, t, t * rnd.uniform(0.2, 1.2), "s"))
                terms.append(term("bytes." + axis, 1e6 * deg, 1e6 * deg, "B"))
                step += t
        if pp > 1:
            b = rnd.uniform(0.002, 0.02)
            terms.append(term("bubble", b, b * 0.8, "s"))
            terms.append(term("bytes.pp", 1.3e5, 1.3e5, "B"))
            step += b
        step *= rnd.uniform(1.0, 1.08)  # a little "other"
        terms.insert(0, term("step_time", step, step * rnd.uniform(0.7, 1.2), "s"))
        for k, v in (("params", 1e6), ("grads", 1e6), ("optimizer", 2e6),
                     ("activations", 1.8e6), ("peak", 5.8e6)):
            terms.append(term("memory." + k, v / (1 + zero), v / (1 + zero), "B"))
        points.append({"label": label, "index": i % 48, "machine": "vm" if i < 48 else "vm2",
                       "terms": terms})
    return {"points": points}


def draw(plot, report, out):
    os.makedirs(out, exist_ok=True)
    return plot.plot_all(report, out)


def main():
    spec = importlib.util.spec_from_file_location("plot_report", sys.argv[1])
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    keep = sys.argv[2] if len(sys.argv) > 2 else None
    with tempfile.TemporaryDirectory() as tmp:
        out = keep or os.path.join(tmp, "plots50")
        made = draw(plot, fake_report(50), out)

        # The time plot: every time term, no byte or memory term.
        t = made.get("measured_vs_predicted")
        check(t is not None and t["file"] == "measured_vs_predicted.png", f"time plot: {t}")
        if t:
            bad = [n for n in t["terms"] if n.startswith(("bytes.", "memory."))]
            check(not bad, f"time plot drew byte/memory terms {bad}")
            check(set(t["terms"]) == {"step_time", "compute", "tp", "dp", "bubble"},
                  f"time plot terms {t['terms']}")
        # The byte plot: traffic and memory, each in its own panel, no time term.
        b = made.get("measured_vs_predicted_bytes")
        check(b is not None and b["file"] == "measured_vs_predicted_bytes.png", f"byte plot: {b}")
        if b:
            check(b["panels"].get("bytes") == ["bytes.dp", "bytes.pp", "bytes.tp"],
                  f"traffic panel {b['panels']}")
            check(b["panels"].get("memory") == ["memory.activations", "memory.grads",
                                                "memory.optimizer", "memory.params",
                                                "memory.peak"], f"memory panel {b['panels']}")
        for f in ("measured_vs_predicted.png", "measured_vs_predicted_bytes.png",
                  "step_breakdown.png"):
            check(os.path.getsize(os.path.join(out, f)) > 0, f"{f} not written")

        # The step breakdown: one row per point, fastest first, legend outside the bars.
        s = made.get("step_breakdown")
        check(s is not None, "no step breakdown")
        if s:
            check(len(s["rows"]) == 50 and len(set(s["rows"])) == 50,
                  f"{len(s['rows'])} rows, {len(set(s['rows']))} distinct labels, expected 50")
            check(s["steps"] == sorted(s["steps"]), "rows not sorted by measured step time")
            check(s["legend_outside"], "the legend overlaps the bars")
            # Two machines: the second machine's points carry its name.
            check(any(r.startswith("vm2: ") for r in s["rows"]), f"rows {s['rows'][:4]}")
            small = draw(plot, fake_report(6), os.path.join(tmp, "plots6"))["step_breakdown"]
            check(s["height_in"] >= small["height_in"] + 40 * 0.2,
                  f"height {s['height_in']} in at 50 points, {small['height_in']} at 6: "
                  "the figure must grow with the points")

        # The calls plot: one series per (axis, op), per-call seconds, unpredicted rows left out.
        row = {"axis": "dp", "op": "reduce_scatter", "bucket_bytes": 1024, "calls": 4,
               "bytes": 4096.0, "measured_s": 4e-4, "measured_median_s": 1e-4,
               "predicted_s": 2e-4, "wait_s": 0.0}
        calls_report = {"points": [{"label": "x", "terms": [], "calls": {"rows": [
            row, dict(row, axis="tp", op="all_reduce"), dict(row, op="barrier", predicted_s=None)]}}]}
        got = draw(plot, calls_report, os.path.join(tmp, "calls")).get("calls")
        check(got is not None and got["series"] == ["dp reduce_scatter", "tp all_reduce"]
              and got["rows"] == 2, f"calls plot: {got}")
        check(plot.call_rows(calls_report)[0][2:] == (5e-5, 1e-4), "calls plot: per-call seconds")

        # A report with only byte terms: no time plot at all, the byte plot still drawn.
        only_bytes = {"points": [{"label": "x", "terms": [term("bytes.dp", 1e6, 2e6, "B")]}]}
        m2 = draw(plot, only_bytes, os.path.join(tmp, "bytes_only"))
        check("measured_vs_predicted" not in m2, f"time plot drawn from byte terms: {m2}")
        check(m2.get("measured_vs_predicted_bytes", {}).get("terms") == ["bytes.dp"], f"{m2}")
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        return 1
    print("plot_report layout: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
