#!/usr/bin/env bash
# The rerun of a point whose term missed unexplained, end to end (docs/report.md, "Rerun"): a
# 2-rank pipeline (pp2) whose stage 0 computes 8x slower than calibrated from the first step
# (fault.slow_rank) misses its compute and step time with the recheck missing them the same way,
# so the run runs its steps again: summary.json's `rerun` names the terms that missed and holds
# what the rerun measured of each of the point's time terms, the point's own steps are all kept,
# and `paraxis report` finds the miss recurs (an 8x slowdown recurs on any load). With
# hardware.rerun_misses false the same point is not run again; the output conforms to the
# results schema. About 3 s on 2 cores.
# Usage: test_rerun_run.sh PARAXIS MPIEXEC RESULTS_SCHEMA (paraxis-results-schema)
set -euo pipefail
paraxis=$1 mpiexec=$2 schema=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAILED: $*" >&2; exit 1; }

cat > "$out/slow.yaml" <<'YAML'
model: {vocab: 64, seq_len: 16, hidden: 32, heads: 2, layers: 2, ffn: 64, moe: {experts: 0}}
train: {global_batch: 8, micro_batch: 2, steps: 4, warmup_steps: 1, lr: 3.0e-3, seed: 1, precision: fp32}
parallel: {tp: 1, pp: 2, dp: 1}
hardware: {calibrate: true}
fault: {slow_rank: {rank: 0, factor: 8, from_step: 0}}
YAML
for rerun in true false; do
  "$mpiexec" -n 2 "$paraxis" run "$out/slow.yaml" --set "hardware.rerun_misses=$rerun" \
    --out "$out/$rerun" > "$out/$rerun.log" 2>&1 || { cat "$out/$rerun.log"; fail "run ($rerun)"; }
  "$paraxis" report "$out/$rerun" > "$out/$rerun.report.log" 2>&1 ||
    { cat "$out/$rerun.report.log"; fail "report ($rerun)"; }
done
grep -q "  rerun: .* the steps run again" "$out/true.log" || fail "the rerun's line on stdout"
if grep -q "  rerun: " "$out/false.log"; then fail "hardware.rerun_misses=false ran it again"; fi

python3 - "$out" <<'PY' || fail "the rerun's fields"
import json, sys
out = sys.argv[1]
def check(cond, what):
    if not cond:
        print("FAILED:", what); sys.exit(1)
p = json.load(open(f"{out}/true/summary.json"))["points"][0]
q = json.load(open(f"{out}/true/report.json"))["points"][0]
rr = p.get("rerun")
check(rr is not None, "the point ran again")
check(len(p["steps"]) == 4, "the point's own steps kept")
check({"compute", "step_time"} <= set(rr["terms"]), f"the terms that missed: {rr['terms']}")
check(set(rr["measured"]) == set(p["recheck"]["predicted"]),
      f"the rerun measured the point's time terms: {sorted(rr['measured'])}")
check(all(v > 0 for v in rr["measured"].values()) and rr["seconds"] > 0, "positive figures")
for t in q["terms"]:
    if t["name"] in ("compute", "step_time"):
        check(t.get("rerun_measured") == rr["measured"][t["name"]], f"{t['name']}'s rerun")
        check(t.get("rerun_verdict") == "recurs", f"{t['name']}'s miss recurs: {t}")
check("rerun" not in json.load(open(f"{out}/false/summary.json"))["points"][0],
      "no rerun with hardware.rerun_misses false")
PY
grep -q "the miss recurs" "$out/true/report.md" || fail "report.md's rerun verdict"
# summary.json's `rerun` and report.json's rerun fields against the results schema (issue 31).
"$schema" check "$out/true" || fail "the output does not conform to the results schema"
echo "rerun: passed"
