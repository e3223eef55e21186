#!/usr/bin/env bash
# The recheck of the calibration after each point, end to end (docs/report.md, "Recheck"): a tiny
# 2-rank sweep over tp2, pp2 and dp2, each at ZeRO 0 and 3 (so the dp points' calls are timed
# sequences), with and without comm.overlap, writes per point summary.json's `recheck`: the
# prediction rebuilt from it for exactly the point's time terms, the re-timed curve samples of its
# axis (a pipeline point's transfers, a tensor-parallel point's collectives), the dp sequence
# where the calibration timed one, an overlapped dp point's overlap premise (async_progress), the
# compute; and `paraxis report` puts the recheck's prediction beside every time term. A one-rank
# point (no grid, no calls) rechecks its compute alone. No timing verdict: only what was written.
# About 5 s on 2 cores.
# Usage: test_recheck_run.sh PARAXIS MPIEXEC
set -euo pipefail
paraxis=$1 mpiexec=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAILED: $*" >&2; exit 1; }

cat > "$out/one.yaml" <<'YAML'
model: {vocab: 64, seq_len: 16, hidden: 32, heads: 2, layers: 2, ffn: 64, moe: {experts: 0}}
train: {global_batch: 8, micro_batch: 2, steps: 3, warmup_steps: 1, lr: 3.0e-3, seed: 1, precision: fp32}
hardware: {calibrate: true}
comm: {bucket_mb: 0.01}
YAML
# Every factorisation of 2 ranks (tp2, pp2, dp2), each at ZeRO 0 and 3, with and without overlap.
{ sed 's/^hardware.*/&\nparallel: {tp: auto, pp: auto, dp: auto}/' "$out/one.yaml"
  printf 'sweep:\n  parallel.zero: [0, 3]\n  comm.overlap: [false, true]\n'; } > "$out/tiny.yaml"
"$mpiexec" -n 2 "$paraxis" run "$out/tiny.yaml" --out "$out/run" > "$out/run.log" 2>&1 ||
  { cat "$out/run.log"; fail "the 2-rank run"; }
"$mpiexec" -n 1 "$paraxis" run "$out/one.yaml" --out "$out/one" > "$out/one.log" 2>&1 ||
  { cat "$out/one.log"; fail "the 1-rank run"; }
for d in run one; do
  "$paraxis" report "$out/$d" > "$out/$d.report.log" 2>&1 ||
    { cat "$out/$d.report.log"; fail "report $d"; }
done

python3 - "$out" <<'PY' || fail "the recheck fields"
import json, sys
out = sys.argv[1]
def check(cond, what):
    if not cond:
        print("FAILED:", what); sys.exit(1)
s = json.load(open(f"{out}/run/summary.json"))
r = json.load(open(f"{out}/run/report.json"))
check(len(s["points"]) == 12, "twelve points")
for p, q in zip(s["points"], r["points"]):
    g = p["grid"]
    rc = p.get("recheck")
    check(rc is not None, f"point {p['index']} has a recheck")
    want = {"step_time", "compute"} | ({"tp"} if g["tp"] > 1 else set()) | \
           ({"dp"} if g["dp"] > 1 else set()) | ({"bubble"} if g["pp"] > 1 else set())
    check(set(rc["predicted"]) == want, f"point {p['index']}: predicted {sorted(rc['predicted'])}")
    check(all(v > 0 for v in rc["predicted"].values()), "positive predictions")
    check(rc["seconds"] > 0, "its time")
    c = rc["retimed"]["compute"]
    check(c["calibration_s"] > 0 and c["recheck_s"] > 0, "the compute timed again")
    axes = {x["axis"] for x in rc["retimed"]["samples"]}
    axis = "tp" if g["tp"] > 1 else "pp" if g["pp"] > 1 else "dp"
    check(axis in axes, f"point {p['index']}: {axis}'s samples timed again ({sorted(axes)})")
    for x in rc["retimed"]["samples"]:
        check(x["recheck_s"] > 0 and x["calibration_s"] > 0 and x["bytes"] > 0, "a sample")
        fits = p["calibration"]["comm"][x["axis"]][x["op"]]["samples"]
        check(any(b == x["bytes"] and t == x["calibration_s"] for b, t in fits),
              "a re-timed sample is one of the calibration's")
    overlapped = p["settings"]["comm.overlap"] == "true" and g["dp"] > 1
    progress = rc["retimed"].get("async_progress", [])
    check(len(progress) > 0 if overlapped else "async_progress" not in rc["retimed"],
          f"point {p['index']}: the overlap premise timed again exactly where it overlaps")
    for x in progress:
        fit = p["calibration"]["comm"]["dp"][x["op"]]
        check(x["calibration"] == fit["async_progress"] and 0 <= x["recheck"] <= 1,
              f"point {p['index']}: {x['op']}'s async_progress, calibrated and again")
    seq = p["calibration"].get("dp_sequence", {}).get("calls", [])
    check(len(rc["retimed"].get("dp_sequence", [])) == len(seq), "the dp sequence timed again")
    for t in q["terms"]:
        if t["unit"] == "s" and t["name"] in want:
            check(t["recheck_predicted"] == rc["predicted"][t["name"]],
                  f"point {p['index']}: {t['name']}'s recheck in report.json")
check(any(len(p["recheck"]["retimed"].get("dp_sequence", [])) > 0 for p in s["points"]),
      "a dp point with a timed sequence")
one = json.load(open(f"{out}/one/summary.json"))["points"][0]["recheck"]
check(one["retimed"]["samples"] == [] and set(one["predicted"]) == {"step_time", "compute"},
      "the one-rank point: compute alone")
PY
grep -q "recheck (residual %)" "$out/run/report.md" || fail "report.md's recheck column"
echo "recheck run: ok"
