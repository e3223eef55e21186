#!/usr/bin/env python3
"""Issue 30's accuracy targets, read from `paraxis report`'s report.json of one or more run
folders (docs/perf-log/2026-12-05-dp-bubble.md):

  - every time term of every point (step_time, compute, tp, ep, dp, bubble) within TERM_PCT
    (25 %) of its prediction;
  - the step time within STEP_MAX_PCT (15 %) on every point and STEP_MEAN_PCT (10 %) on average.

Per point it prints each time term's measured / predicted ratio and, where the report has it,
whether the prediction lies inside the range the point's own steps took (docs/report.md,
"Noise": "in" = the miss is no larger than the machine's step-to-step spread; "rep" = outside
it, but the folder's points whose tp, dp or ep term is the same to the model were measured both
above and below the prediction; then, from the recheck of the calibration right after the point
(docs/report.md, "Recheck"), "cal" = the machine changed since calibration: the measured term
agrees with the prediction rebuilt from the recheck, or lies between the two predictions;
"model" = both predictions miss it the same way, or the point run again (docs/report.md,
"Rerun") missed it the same way; "out" = none of these, without a recheck). Before the recheck's
verdict, the rerun's: "again" = the point's steps run again measured the term within its target
or on the prediction's other side: the miss did not recur, the machine's noise).
Then per folder the worst term, the step's max / mean |residual|, every term that misses with
its verdict, how many misses are the machine's ("in", "rep", "again", "cal") and the model's, the load
beside it when RUN_DIR.uptime exists (what `uptime` printed before and after the run,
docs/perf-log), and whether the targets hold, or else whether every miss is the machine's ("in",
"rep", "again", "cal") with the step's mean within its target (issue 30 section 2: "Where the machine's
noise still causes a miss, the report must show that it is noise"). Last, the verdict of issue
30 section 2 both ways: the targets met, and met with every miss shown to be the machine's, in
CONSECUTIVE (3) consecutive folders, in the order given.

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
CONSECUTIVE = 3


def load(run_dir):
    path = os.path.join(run_dir, "report.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_report_targets: {path}: {e} (run `paraxis report {run_dir}`)",
              file=sys.stderr)
        sys.exit(2)


def noise_of(term):
    """None (no per-step series, no repeats, no recheck), "steps" (the prediction inside the
    point's own steps' range), "repeats" (1 inside the measured / predicted range of the points
    whose term is the same to the model), "rerun" (the report's rerun_verdict "noise": the point
    run again did not repeat the miss), "cal" / "model" (the report's recheck_verdict: the
    machine changed since calibration / both predictions miss the same way), "model" (the rerun
    repeated the miss, without a recheck verdict) or False (none)."""
    within, repeats = term.get("within_steps_range"), term.get("within_repeats_range")
    if within:
        return "steps"
    if repeats:
        return "repeats"
    if term.get("rerun_verdict") == "noise":
        return "rerun"
    if term.get("recheck_verdict") in ("cal", "model"):
        return term["recheck_verdict"]
    if term.get("rerun_verdict") == "recurs":
        return "model"
    return None if within is None and repeats is None else False


# The misses each verdict makes the machine's.
MACHINE = ("steps", "repeats", "rerun", "cal")


def time_terms(point):
    """(name, measured, predicted, noise_of) of the point's predicted time terms."""
    out = []
    for t in point.get("terms", []):
        if t.get("name") in TIME_TERMS and t.get("unit") == "s" and t.get("predicted"):
            out.append((t["name"], t["measured"], t["predicted"], noise_of(t)))
    return out


def check(report):
    """Per point rows and the folder's verdict: {rows, worst, misses, step_max, step_mean, ok};
    misses: (label, term, ratio, noise_of) of every term beyond its target."""
    rows, worst, steps, misses = [], None, [], []
    for p in report.get("points", []):
        terms = time_terms(p)
        if not terms:
            continue
        for name, measured, predicted, within in terms:
            miss = abs(measured - predicted) / predicted * 100
            if name == "step_time":
                steps.append(miss)
            if miss > (STEP_MAX_PCT if name == "step_time" else TERM_PCT):
                misses.append((p["label"], name, measured / predicted, within))
            if worst is None or miss > worst[2]:
                worst = (p["label"], name, miss, measured / predicted)
        rows.append((p["label"], terms))
    if not steps:
        return {"rows": rows, "worst": None, "misses": misses, "step_max": None,
                "step_mean": None, "ok": False, "shown": False}
    step_max, step_mean = max(steps), sum(steps) / len(steps)
    ok = worst[2] <= TERM_PCT and step_max <= STEP_MAX_PCT and step_mean <= STEP_MEAN_PCT
    # Issue 30 section 2's last sentence: a miss the report shows to be the machine's noise.
    shown = ok or (step_mean <= STEP_MEAN_PCT and all(m[3] in MACHINE for m in misses))
    return {"rows": rows, "worst": worst, "misses": misses, "step_max": step_max,
            "step_mean": step_mean, "ok": ok, "shown": shown}


def load_beside(run_dir):
    """The load averages RUN_DIR.uptime recorded (uptime before and after the run), or None."""
    try:
        with open(run_dir.rstrip("/") + ".uptime") as f:
            loads = [line.split("load average:")[1].split(",")[0].strip()
                     for line in f if "load average:" in line]
    except OSError:
        return None
    return " / ".join(loads) if loads else None


def show(run_dir, r):
    print(f"== {run_dir}")
    for label, terms in r["rows"]:
        cells = []
        for name, measured, predicted, within in terms:
            noise = {None: "", "steps": " in", "repeats": " rep", "rerun": " again", "cal": " cal",
                     "model": " model", False: " out"}[within]
            cells.append(f"{name} {measured / predicted:.2f}{noise}")
        print(f"  {label:<28} " + "  ".join(cells))
    if r["worst"] is None:
        print("  no predicted point")
        return
    label, name, miss, ratio = r["worst"]
    print(f"  worst term: {name} of {label}, {ratio:.2f}x ({miss:.1f} %; target {TERM_PCT:g} %)")
    print(f"  step time: max {r['step_max']:.1f} % (target {STEP_MAX_PCT:g} %), "
          f"mean {r['step_mean']:.1f} % (target {STEP_MEAN_PCT:g} %)")
    for label, name, ratio, within in r["misses"]:
        why = {None: "no per-step series", "steps": "inside its steps' range: the machine's noise",
               "repeats": "outside its steps' range, but the points whose term is the same to "
                          "the model straddle it: the machine's noise",
               "rerun": "outside its steps' range, but the point run again did not repeat the "
                        "miss: the machine's noise",
               "cal": "outside its steps' range, but the recheck after the point agrees with "
                      "it or the two predictions straddle it: the machine changed since "
                      "calibration",
               "model": "outside its steps' range, and the recheck after the point or the "
                        "point run again misses it the same way: the model",
               False: "outside its steps' range: the model, or the point ran unlike its "
                      "calibration (no recheck)"}[within]
        print(f"  miss: {name} of {label}, {ratio:.2f}x ({why})")
    machine = sum(1 for m in r["misses"] if m[3] in MACHINE)
    print(f"  misses: {len(r['misses'])}, the machine's {machine} (in, rep, again, cal), "
          f"the model's {sum(1 for m in r['misses'] if m[3] == 'model')}, "
          f"undecided {sum(1 for m in r['misses'] if m[3] in (None, False))}")
    load = load_beside(run_dir)
    if load:
        print(f"  load (uptime, 1 min) before / after: {load}")
    print("  targets " + ("met" if r["ok"] else
                          "MISSED; every miss the machine's: met with the noise shown"
                          if r["shown"] else "MISSED"))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    reports = []
    for run_dir in argv[1:]:
        reports.append(check(load(run_dir)))
        show(run_dir, reports[-1])
    for key, what in (("ok", "targets met"),
                      ("shown", "with every miss shown to be the machine's (in, rep, again, cal), "
                                "met")):
        met, best = consecutive([r[key] for r in reports])
        verdict = "MET" if best >= CONSECUTIVE else "NOT MET"
        print(f"== verdict: {what} in {met} of {len(reports)} runs, at most {best} consecutive; "
              f"issue 30 section 2 ({CONSECUTIVE} consecutive runs): {verdict}")
    return 0 if all(r["ok"] for r in reports) else 1


def consecutive(flags):
    """(how many are true, the longest run of true ones in order)."""
    run = best = 0
    for f in flags:
        run = run + 1 if f else 0
        best = max(best, run)
    return sum(1 for f in flags if f), best


if __name__ == "__main__":
    sys.exit(main(sys.argv))
