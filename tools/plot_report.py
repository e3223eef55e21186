#!/usr/bin/env python3
"""Plots of a paraxis report (`paraxis report DIR ...` runs this on its report.json).

    plot_report.py REPORT_JSON OUT_DIR

Writes into OUT_DIR:
  step_breakdown.png     measured step time per configuration, stacked by term, with the
                         predicted step time marked on each bar;
  bubble_vs_microbatches.png
                         measured pipeline bubble against the micro-batch count m, with the
                         formula's curves (p-1)/(m+p-1), (p-1)/(v m+p-1) (interleaved) and
                         (p-1)/(3m+p-1) (zb-h1 at equal forward, B and W times);
  measured_vs_predicted.png
                         every term of every point, measured against predicted, with y = x;
  busbw.png              bus bandwidth (nccl-tests definition) against message size for each
                         calibrated communicator and operation.
  sensitivity.png        step time against the slowdown factor injected on one axis
                         (fault.slow_axis), one curve per axis and base configuration:
                         measured markers, the model's predicted curve as a line.
Each PNG is written to a temporary name in OUT_DIR, flushed, fsync'ed and renamed over the
old one, so a reader sees the previous complete plot or the new one. Any failure: a message
naming the file and the reason on stderr, exit status 1 (`paraxis report` then fails).
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


def step_breakdown(report, out):
    points = [p for p in report["points"] if term(p, "step_time", "measured") is not None]
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(points) + 2), 4.5))
    labels = [p["label"] for p in points]
    bottoms = [0.0] * len(points)
    for name in STACKED:
        vals = [max(0.0, term(p, name, "measured") or 0.0) for p in points]
        if not any(vals):
            continue
        ax.bar(labels, vals, bottom=bottoms, color=TERM_COLOURS[name], label=name)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    steps = [term(p, "step_time", "measured") for p in points]
    other = [max(0.0, s - b) for s, b in zip(steps, bottoms)]
    if any(o > 0 for o in other):
        ax.bar(labels, other, bottom=bottoms, color=TERM_COLOURS["other"], label="other")
    pred = [term(p, "step_time", "predicted") for p in points]
    xs = [i for i, v in enumerate(pred) if v is not None]
    ax.scatter(xs, [pred[i] for i in xs], marker="_", s=400, color="black", zorder=3,
               label="predicted step")
    ax.set_ylabel("seconds per step (measured)")
    ax.set_title("Step time by term")
    ax.tick_params(axis="x", labelrotation=60, labelsize=7)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save(fig, out, "step_breakdown.png")
    return True


def bubble(report, out):
    pts = [p for p in report["points"] if p.get("pipeline")]
    if not pts:
        return False
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
    return True


def scatter(report, out):
    xs, ys, cs = [], [], []
    for p in report["points"]:
        for t in p["terms"]:
            m, q = t.get("measured"), t.get("predicted")
            if m is None or q is None or m <= 0 or q <= 0 or t["name"].startswith("memory"):
                continue
            xs.append(q)
            ys.append(m)
            cs.append(TERM_COLOURS.get(t["name"], "black"))
    if not xs:
        return False
    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.scatter(xs, ys, c=cs, s=18)
    lo, hi = min(xs + ys) / 1.5, max(xs + ys) * 1.5
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted seconds")
    ax.set_ylabel("measured seconds")
    ax.set_title("Measured against predicted (each term, each point)")
    for name, colour in TERM_COLOURS.items():
        ax.scatter([], [], c=colour, label=name if name != "other" else "step_time")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, out, "measured_vs_predicted.png")
    return True


def busbw(report, out):
    cal = report.get("calibration", [])
    if not cal:
        return False
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
    return True


def sensitivity(report, out):
    """Step time against the injected slowdown factor, one curve per axis (docs/sensitivity.md)."""
    groups = report.get("sensitivity") or []
    if not groups:
        return False
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
    return True


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
        made = [name for name, fn in [("step_breakdown", step_breakdown), ("bubble", bubble),
                                      ("measured_vs_predicted", scatter), ("busbw", busbw),
                                      ("sensitivity", sensitivity)]
                if fn(report, out)]
    except PlotError as e:
        print(f"plot_report.py: error: {e}", file=sys.stderr)
        return 1
    print("plots: " + (", ".join(made) if made else "none (no data to plot)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
