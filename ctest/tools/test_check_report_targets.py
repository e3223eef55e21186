#!/usr/bin/env python3
"""tools/check_report_targets.py on synthetic report.json files: a folder within every target,
one whose step times meet theirs while one dp term is 1.3x its prediction (a term over 25 %),
one whose mean step residual is above 10 %, and a folder without report.json (exit 2)."""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]


def term(name, measured, predicted, within=None):
    t = {"name": name, "measured": measured, "predicted": predicted, "unit": "s"}
    if within is not None:
        t["within_steps_range"] = within
    return t


def point(label, step, dp):
    return {"label": label, "terms": [term("step_time", step, 1.0, True), term("compute", 0.5, 0.5),
                                      term("dp", dp, 0.2, False),
                                      {"name": "bytes.dp", "measured": 9, "predicted": 1,
                                       "unit": "B"}]}


cases = {  # folder -> (points, expected exit, expected verdict line)
    "met": ([point("a", 1.10, 0.22), point("b", 0.95, 0.18)], 0, "targets met"),
    "term": ([point("a", 1.10, 0.26), point("b", 1.0, 0.2)], 1, "worst term: dp of a, 1.30x"),
    "mean": ([point("a", 1.14, 0.2), point("b", 0.88, 0.2)], 1, "mean 13.0 %"),
}
failed = False
with tempfile.TemporaryDirectory() as tmp:
    for name, (points, code, text) in cases.items():
        d = os.path.join(tmp, name)
        os.makedirs(d)
        with open(os.path.join(d, "report.json"), "w") as f:
            json.dump({"points": points}, f)
        r = subprocess.run([sys.executable, script, d], capture_output=True, text=True)
        if r.returncode != code or text not in r.stdout:
            print(f"{name}: exit {r.returncode} (expected {code}), output:\n{r.stdout}{r.stderr}")
            failed = True
    # A byte term's 9x never counts; the noise flags are shown beside the ratios.
    r = subprocess.run([sys.executable, script, os.path.join(tmp, "met")], capture_output=True,
                       text=True)
    if "step_time 1.10 in" not in r.stdout or "dp 1.10 out" not in r.stdout:
        print("met: ratios or noise flags missing:\n" + r.stdout)
        failed = True
    r = subprocess.run([sys.executable, script, os.path.join(tmp, "none")], capture_output=True,
                       text=True)
    if r.returncode != 2 or "report.json" not in r.stderr:
        print(f"missing report.json: exit {r.returncode}\n{r.stdout}{r.stderr}")
        failed = True
sys.exit(1 if failed else 0)
