#!/usr/bin/env python3
"""Plots of a paraxis report (`paraxis report DIR ...` runs this on its report.json).

    plot_report.py REPORT_JSON OUT_DIR

Writes into OUT_DIR:
  step_breakdown.png     one horizontal bar per point, sorted by measured step time (fastest
                         first), stacked by term, the predicted step a black tick on the row,
                         the measured step and its residual at the bar's end; the figure's
                         height grows with the points (readable at 50 and more), the legend
                         above the bars;
  bubble_vs_microbatches.png
                         measured pipeline bubble against the micro-batch count m, with the
                         formula's curves (p-1)/(m+p-1), (p-1)/(v m+p-1) (interleaved) and
                         (p-1)/(3m+p-1) (zb-h1 at equal forward, B and W times);
  measured_vs_predicted.png
                         every time term (unit s: the step and its terms) of every point,
                         measured against predicted seconds, with y = x;
  measured_vs_predicted_bytes.png
                         every byte term (unit B), measured against predicted, with y = x, in
                         two panels: the traffic per step on each axis (bytes.tp, ...) and the
                         memory of the largest rank (memory.params, ..., memory.peak);
  busbw.png              bus bandwidth (nccl-tests definition) against message size for each
                         calibrated communicator and operation.
  calls.png              every (axis, operation, message-size bucket) row of every point's
                         "Calls" table (docs/report.md): measured against predicted seconds per
                         call (the row's totals over its call count), coloured by axis, one
                         marker per operation, with y = x;
  sensitivity.png        step time against the slowdown factor injected on one axis
                         (fault.slow_axis), one curve per axis and base configuration:
                         measured markers, the model's predicted curve as a line.
Each PNG is written to a temporary name in OUT_DIR, flushed, fsync'ed and renamed over the
old one, so a reader sees the previous complete plot or the new one. Any failure: a message
naming the file and the reason on stderr, exit status 1 (`paraxis report` then fails).
plot_all(report, out) returns what each plot drew (terms, rows), for the tests.
Only the standard library and matplotlib (Debian's python3-matplotlib).
"""
import json
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TERM_COLOURS = {
    "compute": "#4c72b0",
    "tp": "#dd8452",
    "pp": "#55a868",
    "dp": "#c44e52",
    "ep": "#8172b3",
    "bubble": "#937860",
    "optimizer": "#da8bc3",
    "other": "#bbbbbb",
}
STACKED = ["compute", "tp", "ep", "bubble", "pp", "dp", "optimizer"]
STEP_COLOUR = "black"  # the whole step among its terms on the measured-vs-predicted plot
MEMORY_MARKERS = {"memory.params": "o", "memory.grads": "s", "memory.optimizer": "D",
                  "memory.activations": "^", "memory.peak": "*"}
ROW_IN = 0.26  # inches per point on the step breakdown: 8-point labels stay apart at any count


UMASK = os.umask(0)
os.umask(UMASK)


class PlotError(Exception):
    """A file that could not be read or written, with the reason."""


def save(fig, out, name):
    """Writes fig to out/name atomically: temporary name in out, fsync, os.replace."""
    path = os.path.join(out, name)
    fd, tmp = -1, None
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + name + ".", suffix=".tmp", dir=out)
        os.fchmod(fd, 0o666 & ~UMASK)  # mkstemp's 0600 would hide the plot from the group
        with os.fdopen(fd, "wb") as f:
            fd = -1
            fig.savefig(f, format="png", dpi=120)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except (OSError, ValueError, RuntimeError) as e:
        raise PlotError(f"cannot write '{path}': {e}") from e
    finally:
        plt.close(fig)
        if fd >= 0:
            os.close(fd)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def term(point, name, field):
    for t in point["terms"]:
        if t["name"] == name:
            return t.get(field)
    return None


def short_label(p, multi_machine):
    """The point's label, with its machine when the report compares machines."""
    return (f"{p.get('machine', '')}: " if multi_machine else "") + p["label"]


def step_breakdown(report, out):
    """One horizontal bar per point, fastest at the top: readable at 50 points and more.

    Each bar is the measured step stacked by term, the predicted step a black tick on its row,
    the measured step and its residual written at the bar's end; the figure grows with the
    point count and the legend sits above the bars, outside them. Returns what was drawn."""
    points = [p for p in report["points"] if term(p, "step_time", "measured") is not None]
    if not points:
        return None
    points.sort(key=lambda p: term(p, "step_time", "measured"))
    multi = len({p.get("machine", "") for p in points}) > 1
    labels = [short_label(p, multi) for p in points]
    seen = {}
    for i, lab in enumerate(labels):  # the same label twice (two folders): tell them apart
        seen[lab] = seen.get(lab, 0) + 1
        if seen[lab] > 1 or labels.count(lab) > 1:
            labels[i] = f"{lab} #{points[i].get('index', i)}"
    n = len(points)
    height = ROW_IN * n + 1.8
    fig, ax = plt.subplots(figsize=(9, height))
    rows = list(range(n))
    lefts = [0.0] * n
    drawn = []
    for name in STACKED:
        vals = [max(0.0, term(p, name, "measured") or 0.0) for p in points]
        if not any(vals):
            continue
        ax.barh(rows, vals, left=lefts, height=0.75, color=TERM_COLOURS[name], label=name)
        lefts = [b + v for b, v in zip(lefts, vals)]
        drawn.append(name)
    steps = [term(p, "step_time", "measured") for p in points]
    other = [max(0.0, s - b) for s, b in zip(steps, lefts)]
    if any(o > 0 for o in other):
        ax.barh(rows, other, left=lefts, height=0.75, color=TERM_COLOURS["other"],
                label="other (measured step - terms)")
        drawn.append("other")
    pred = [term(p, "step_time", "predicted") for p in points]
    ys = [i for i, v in enumerate(pred) if v]
    if ys:
        ax.scatter([pred[i] for i in ys], ys, marker="|", s=140, linewidths=2, color="black",
                   zorder=3, label="predicted step")
    top = max(steps + [v for v in pred if v])
    for i, (s, q) in enumerate(zip(steps, pred)):
        text = f"{s * 1e3:.3g} ms"
        if q:
            r = round((s - q) / q * 100)
            text += f" ({r:+d} %)" if r else " (0 %)"
        ax.text(max(s, q or 0) + top * 0.01, i, text, va="center", fontsize=7)
    ax.set_yticks(rows)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(n - 0.5, -0.5)  # the fastest point on the first row
    ax.set_xlim(0, top * 1.22)  # room for the text at the end of the longest bar
    ax.set_xlabel("seconds per step (measured; residual against the prediction)")
    ax.grid(axis="x", lw=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    ax.set_title(f"Step time by term, {n} points, fastest first", pad=34)
    legend = ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=5, fontsize=8,
                       frameon=False, borderaxespad=0.2)
    fig.tight_layout()
    fig.canvas.draw()
    lb, axb = legend.get_window_extent(), ax.get_window_extent()
    info = {"file": "step_breakdown.png", "rows": labels, "steps": steps,
            "terms": drawn, "height_in": height,
            "legend_outside": lb.y0 >= axb.y1 - 0.5 or lb.x0 >= axb.x1 - 0.5}
    save(fig, out, "step_breakdown.png")
    return info


def bubble(report, out):
    pts = [p for p in report["points"] if p.get("pipeline")]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(6, 4.5))
    # The ideal bubble is (p-1)/(k m + p-1): k = v for gpipe, 1f1b and interleaved, k = 3 for
    # zb-h1 (Qi et al. 2023: each backward split into B and W, T_F = T_B = T_W).
    def k_of(p):
        return 3 if p["pipeline"]["schedule"] == "zb-h1" else p["pipeline"]["virtual_stages"]

    curves = sorted({(p["pipeline"]["stages"], p["pipeline"]["virtual_stages"], k_of(p))
                     for p in pts})
    m_max = max(p["pipeline"]["micro_batches"] for p in pts)
    ms = [x / 4 for x in range(4, 4 * m_max + 1)]
    for (stages, v, k) in curves:
        label = f"formula p={stages}" + (f" v={v}" if v > 1 else "")
        if k != v:
            label += " zb-h1"
        ax.plot(ms, [(stages - 1) / (k * m + stages - 1) for m in ms], "-", lw=1, label=label)
    markers = {"gpipe": "o", "1f1b": "s", "interleaved": "^", "zb-h1": "D"}
    for sched in sorted({p["pipeline"]["schedule"] for p in pts}):
        sel = [p for p in pts if p["pipeline"]["schedule"] == sched]
        ax.scatter([p["pipeline"]["micro_batches"] for p in sel],
                   [p["pipeline"]["bubble_measured"] for p in sel],
                   marker=markers.get(sched, "x"), label=f"measured {sched}", zorder=3)
        ax.scatter([p["pipeline"]["micro_batches"] for p in sel],
                   [p["pipeline"]["bubble_model"] for p in sel], marker="+", s=80,
                   label=f"measured stage times {sched}", zorder=3)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("micro-batches per step m")
    ax.set_ylabel("bubble fraction of the pipelined part")
    ax.set_title("Pipeline bubble")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, out, "bubble_vs_microbatches.png")
    return {"file": "bubble_vs_microbatches.png", "points": len(pts)}


def terms_of(report, unit, prefixes=None):
    """(term name, predicted, measured) for every positive pair in this unit, every point;
    prefixes, when given, keeps the names that start with one of them."""
    rows = []
    for p in report["points"]:
        for t in p["terms"]:
            m, q = t.get("measured"), t.get("predicted")
            if t.get("unit") != unit or m is None or q is None or m <= 0 or q <= 0:
                continue
            if prefixes and not t["name"].startswith(prefixes):
                continue
            rows.append((t["name"], q, m))
    return rows


def colour_of(name):
    """A time term's or an axis's colour (bytes.tp as tp); None: matplotlib's next colour."""
    if name == "step_time":
        return STEP_COLOUR
    return TERM_COLOURS.get(name.split(".")[-1]) if not name.startswith("memory.") else None


def diagonal(ax, rows, what):
    """Log-log axes with y = x over the rows' range and one legend entry per term name."""
    xs, ys = [r[1] for r in rows], [r[2] for r in rows]
    for name in sorted({r[0] for r in rows}, key=lambda n: (n != "step_time", n)):
        sel = [r for r in rows if r[0] == name]
        ax.scatter([r[1] for r in sel], [r[2] for r in sel], s=18, label=name,
                   color=colour_of(name), marker=MEMORY_MARKERS.get(name, "o"))
    lo, hi = min(xs + ys) / 1.5, max(xs + ys) * 1.5
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"predicted {what}")
    ax.set_ylabel(f"measured {what}")
    ax.legend(fontsize=7)


def scatter_time(report, out):
    """Time terms only (unit s): the step and each of its terms, every point."""
    rows = terms_of(report, "s")
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 5))
    diagonal(ax, rows, "seconds")
    ax.set_title("Measured against predicted time\n(each time term, each point)")
    fig.tight_layout()
    save(fig, out, "measured_vs_predicted.png")
    return {"file": "measured_vs_predicted.png", "unit": "s",
            "terms": sorted({r[0] for r in rows})}


def scatter_bytes(report, out):
    """Byte terms (unit B), two panels: the traffic per step on each axis (bytes.*), and the
    memory of the largest rank (memory.*), each on its own axes."""
    panels = [("bytes.", "bytes per step", "Communication (logical bytes S)"),
              ("memory.", "bytes", "Memory (largest rank)")]
    drawn = [(pre, what, title, terms_of(report, "B", (pre,))) for pre, what, title in panels]
    drawn = [d for d in drawn if d[3]]
    if not drawn:
        return None
    fig, axes = plt.subplots(1, len(drawn), figsize=(5.2 * len(drawn), 5), squeeze=False)
    info = {"file": "measured_vs_predicted_bytes.png", "unit": "B", "panels": {}}
    for ax, (pre, what, title, rows) in zip(axes[0], drawn):
        diagonal(ax, rows, what)
        ax.set_title(title)
        info["panels"][pre.rstrip(".")] = sorted({r[0] for r in rows})
    info["terms"] = sorted(t for ts in info["panels"].values() for t in ts)
    fig.suptitle("Measured against predicted bytes (each term, each point)")
    fig.tight_layout()
    save(fig, out, "measured_vs_predicted_bytes.png")
    return info


def busbw(report, out):
    cal = report.get("calibration", [])
    if not cal:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for c in cal:
        timed = [s for s in c["samples"] if s[1] > 0]
        sizes = [s[0] for s in timed]
        bw = [s[0] / s[1] * c["busbw_factor"] / 1e9 for s in timed]
        ax.plot(sizes, bw, marker="o", ms=3,
                label=f"{c['machine']} {c['axis']} {c['op']} ({c['ranks']} ranks)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size S (bytes, nccl-tests definition)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("Collectives per communicator (calibration)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    save(fig, out, "busbw.png")
    return {"file": "busbw.png", "communicators": len(cal)}


CALL_MARKERS = {"all_reduce": "o", "reduce_scatter": "s", "all_gather": "D", "all_to_all": "^",
                "point_to_point": ">", "receive": "<", "broadcast": "v"}


def call_rows(report):
    """(axis, op, predicted s per call, measured s per call) of every predicted row."""
    rows = []
    for p in report["points"]:
        for r in (p.get("calls") or {}).get("rows", []):
            q, n = r.get("predicted_s"), r.get("calls", 0)
            if q is None or n <= 0 or q <= 0 or r["measured_s"] <= 0:
                continue
            rows.append((r["axis"], r["op"], q / n, r["measured_s"] / n))
    return rows


def calls(report, out):
    """Measured against predicted seconds per call, per row of the Calls tables."""
    rows = call_rows(report)
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(5.8, 5))
    pairs = sorted({(r[0], r[1]) for r in rows})
    for axis, op in pairs:
        sel = [r for r in rows if (r[0], r[1]) == (axis, op)]
        ax.scatter([r[2] for r in sel], [r[3] for r in sel], s=20, label=f"{axis} {op}",
                   color=TERM_COLOURS.get(axis), marker=CALL_MARKERS.get(op, "x"))
    vals = [r[2] for r in rows] + [r[3] for r in rows]
    lo, hi = min(vals) / 1.5, max(vals) * 1.5
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted seconds per call (calibration)")
    ax.set_ylabel("measured seconds per call")
    ax.set_title("Calls: measured against predicted\n(each axis, operation and size bucket)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, out, "calls.png")
    return {"file": "calls.png", "series": [f"{a} {o}" for a, o in pairs], "rows": len(rows)}


def sensitivity(report, out):
    """Step time against the injected slowdown factor, one curve per axis (docs/sensitivity.md)."""
    groups = report.get("sensitivity") or []
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    markers = "osD^v<>"
    for gi, g in enumerate(groups):
        tag = g.get("label", "") if len(groups) > 1 else ""
        for axis, a in sorted(g["axes"].items()):
            pts = a["points"]
            colour = TERM_COLOURS.get(axis, "#333333")
            xs = [p["factor"] for p in pts]
            ax.plot(xs, [p["measured_step_s"] for p in pts], markers[gi % len(markers)],
                    color=colour, label=f"{axis} measured {tag}".rstrip())
            pred = [(p["factor"], p["predicted_step_s"]) for p in pts
                    if p.get("predicted_step_s") is not None]
            if pred:
                ax.plot([x for x, _ in pred], [y for _, y in pred], "-", color=colour,
                        alpha=0.8, label=f"{axis} model {tag}".rstrip())
    # A linear axis: the injected time grows linearly with the factor, so do the curves.
    ax.set_xlabel("slowdown factor of the axis's links (fault.slow_axis.factor)")
    ax.set_ylabel("step time (s)")
    ax.set_ylim(bottom=0)
    steepest = max(((a["slope_s_per_factor"], axis) for g in groups
                    for axis, a in g["axes"].items()), default=(0, "none"))[1]
    ax.set_title(f"Sensitivity: step time per slowed axis (steepest: {steepest})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, out, "sensitivity.png")
    return {"file": "sensitivity.png", "groups": len(groups)}


PLOTS = [("step_breakdown", step_breakdown), ("bubble", bubble),
         ("measured_vs_predicted", scatter_time), ("measured_vs_predicted_bytes", scatter_bytes),
         ("busbw", busbw), ("calls", calls), ("sensitivity", sensitivity)]


def plot_all(report, out):
    """Draws every plot the report has data for into out; returns {plot: what it drew} (the
    file, and per plot the terms, rows or curves), which ctest/driver/test_plot_report.py checks."""
    made = {}
    for name, fn in PLOTS:
        info = fn(report, out)
        if info is not None:
            made[name] = info
    return made


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1]) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"plot_report.py: error: cannot read '{sys.argv[1]}': {e}", file=sys.stderr)
        return 1
    out = sys.argv[2]
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        print(f"plot_report.py: error: cannot create '{out}': {e}", file=sys.stderr)
        return 1
    try:
        made = plot_all(report, out)
    except PlotError as e:
        print(f"plot_report.py: error: {e}", file=sys.stderr)
        return 1
    print("plots: " + (", ".join(made) if made else "none (no data to plot)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
