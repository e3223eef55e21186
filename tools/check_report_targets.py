#!/usr/bin/env python3
"""Issue 30's accuracy targets, read from `paraxis report`'s report.json of one or more run
folders (docs/perf-log/2026-12-05-dp-bubble.md):

  - every time term of every point (step_time, compute, tp, ep, dp, bubble) within TERM_PCT
    (25 %) of its prediction;
  - the step time within STEP_MAX_PCT (15 %) on every point and STEP_MEAN_PCT (10 %) on average.

Per point it prints each time term's measured / predicted ratio and, where the report has it,
whether the prediction lies inside the range the point's own steps took (docs/report.md,
"Noise": "in" = the miss is no larger than the machine's step-to-step spread). Then per folder
the worst term and the step's max / mean |residual|, and whether the targets hold.

  tools/check_report_targets.py RUN_DIR [RUN_DIR ...]     (each after `paraxis report RUN_DIR`)
Exit status: 0 every folder meets the targets, 1 one misses, 2 bad input.
"""
import json
import os
import sys

TERM_PCT = 25.0
STEP_MAX_PCT = 15.0
STEP_MEAN_PCT = 10.0
TIME_TERMS = ("step_time", "compute", "tp", "ep", "dp", "bubble")


def load(run_dir):
    path = os.path.join(run_dir, "report.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_report_targets: {path}: {e} (run `paraxis report {run_dir}`)",
              file=sys.stderr)
        sys.exit(2)


def time_terms(point):
    """(name, measured, predicted, within_steps_range or None) of the point's predicted time terms."""
    out = []
    for t in point.get("terms", []):
        if t.get("name") in TIME_TERMS and t.get("unit") == "s" and t.get("predicted"):
            out.append((t["name"], t["measured"], t["predicted"], t.get("within_steps_range")))
    return out


def check(report):
    """Per point rows and the folder's verdict: {rows, worst, step_max, step_mean, ok}."""
    rows, worst, steps = [], None, []
    for p in report.get("points", []):
        terms = time_terms(p)
        if not terms:
            continue
        for name, measured, predicted, within in terms:
            miss = abs(measured - predicted) / predicted * 100
            if name == "step_time":
                steps.append(miss)
            if worst is None or miss > worst[2]:
                worst = (p["label"], name, miss, measured / predicted)
        rows.append((p["label"], terms))
    if not steps:
        return {"rows": rows, "worst": None, "step_max": None, "step_mean": None, "ok": False}
    step_max, step_mean = max(steps), sum(steps) / len(steps)
    ok = worst[2] <= TERM_PCT and step_max <= STEP_MAX_PCT and step_mean <= STEP_MEAN_PCT
    return {"rows": rows, "worst": worst, "step_max": step_max, "step_mean": step_mean, "ok": ok}


def show(run_dir, r):
    print(f"== {run_dir}")
    for label, terms in r["rows"]:
        cells = []
        for name, measured, predicted, within in terms:
            noise = "" if within is None else (" in" if within else " out")
            cells.append(f"{name} {measured / predicted:.2f}{noise}")
        print(f"  {label:<28} " + "  ".join(cells))
    if r["worst"] is None:
        print("  no predicted point")
        return
    label, name, miss, ratio = r["worst"]
    print(f"  worst term: {name} of {label}, {ratio:.2f}x ({miss:.1f} %; target {TERM_PCT:g} %)")
    print(f"  step time: max {r['step_max']:.1f} % (target {STEP_MAX_PCT:g} %), "
          f"mean {r['step_mean']:.1f} % (target {STEP_MEAN_PCT:g} %)")
    print("  targets " + ("met" if r["ok"] else "MISSED"))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    ok = True
    for run_dir in argv[1:]:
        r = check(load(run_dir))
        show(run_dir, r)
        ok = ok and r["ok"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
