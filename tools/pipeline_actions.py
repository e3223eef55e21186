#!/usr/bin/env python3
"""Where a pipelined step's bubble goes, stage by stage, from a point's trace (trace-<point>.json,
docs/results.md): per rank and measured step the pipelined window (its first transfer or compute
action to its last compute action), the fenced compute in it (F, B, W), the time blocked in the
pipeline's receives (waiting for the other stage's activation or gradient), in its sends, and the
rest (what the step does between actions: loading a micro-batch, posting and testing requests,
bookkeeping). Medians over the measured steps (step >= WARMUP), and the minimum, which on a busy
machine is the closest to a quiet step. Compare the bubble (window - compute) with the report's
predicted bubble, the schedule replayed with calibrated times (docs/report.md):

  tools/pipeline_actions.py RUN_DIR/trace-1.json [WARMUP]       (WARMUP: default 1)
"""
import json
import statistics
import sys


def per_step(events, warmup):
    """{(rank, step): {window, compute, recv_wait, send, other}} in microseconds. Transfers count
    only where they begin inside the window (the last sends' completion after it does not)."""
    by_step = {}
    for e in events:
        step = e.get("args", {}).get("step", -1) if e.get("ph") == "X" else -1
        if step >= warmup and (e["cat"] == "compute" and e["name"] != "optimizer" or
                               e["name"] in ("pp:irecv", "pp:isend")):
            by_step.setdefault((e["pid"], step), []).append(e)
    out = {}
    for k, evs in by_step.items():
        compute = [e for e in evs if e["cat"] == "compute"]
        begin = min(e["ts"] for e in evs)
        end = max(e["ts"] + e["dur"] for e in compute)
        a = {"window": end - begin, "compute": sum(e["dur"] for e in compute), "recv_wait": 0.0,
             "send": 0.0}
        for e in evs:
            if e["cat"] == "comm" and e["ts"] < end:
                a["recv_wait" if e["name"] == "pp:irecv" else "send"] += e["args"].get(
                    "exposed_us", e["dur"])
        a["other"] = a["window"] - a["compute"] - a["recv_wait"] - a["send"]
        out[k] = a
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    warmup = int(argv[2]) if len(argv) > 2 else 1
    with open(argv[1]) as f:
        events = json.load(f)["traceEvents"]
    steps = per_step(events, warmup)
    ranks = sorted({r for r, _ in steps})
    fields = ("window", "compute", "recv_wait", "send", "other")
    print("rank  " + "  ".join(f"{f:>18}" for f in fields) + "   (us: median / min over steps)")
    for r in ranks:
        rows = [v for (q, _), v in steps.items() if q == r]
        cells = [f"{statistics.median(x[f] for x in rows):9.1f}/{min(x[f] for x in rows):8.1f}"
                 for f in fields]
        print(f"{r:>4}  " + "  ".join(cells))
    bubbles = [statistics.median(v["window"] - v["compute"] for (q, _), v in steps.items()
                                 if q == r) for r in ranks]
    print(f"bubble (window - compute), mean over ranks: {statistics.mean(bubbles):.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
