#!/usr/bin/env bash
# End-to-end diagnosis (issue 17, docs/diagnosis.md): inject a fault into a 4-rank run of
# inputs/tiny.yaml, run `paraxis report` on it and check report.json's top finding names the
# right kind, axis, group and ranks. Usage: test_diagnosis_runs.sh PARAXIS MPIEXEC INPUTS CASE
# with CASE slow_rank (pp2 x dp2, rank 3 computing 8x slower from step 2) or slow_link (tp2 x
# dp2 on two emulated nodes of 2 ranks, the link between ranks 1 and 3 adding 20 ms a message).
# Label slow: a 4-rank run on a 2-core machine time-shares its cores (docs/diagnosis.md).
set -euo pipefail
paraxis=$1 mpiexec=$2 inputs=$3 case=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--set train.steps=8 --set train.micro_batch=1 --set hardware.calibrate=false
        --set output.trace=false)
case $case in
  slow_rank)
    set=(--set parallel.pp=2 --set parallel.dp=2 --set fault.slow_rank.rank=3
         --set fault.slow_rank.factor=8 --set fault.slow_rank.from_step=2)
    expect='{"kind": "slow_rank", "axis": "compute", "group": 1, "ranks": [3]}' ;;
  slow_link)
    set=(--set parallel.tp=2 --set parallel.dp=2 --set hardware.ranks_per_node=2
         --set fault.slow_link.ranks=[1,3] --set fault.slow_link.latency_us=20000)
    expect='{"kind": "slow_link", "axis": "dp", "group": 1, "ranks": [1, 3]}' ;;
  *) echo "unknown case $case" >&2; exit 2 ;;
esac
"$mpiexec" -n 4 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" "${set[@]}" --out "$out/run" \
  > "$out/run.log" 2>&1 || { cat "$out/run.log"; exit 1; }
"$paraxis" report "$out/run" > "$out/report.log" 2>&1 || { cat "$out/report.log"; exit 1; }
python3 - "$out/run/report.json" "$expect" <<'PY'
import json, sys
findings = json.load(open(sys.argv[1]))["diagnosis"]
want = json.loads(sys.argv[2])
faults = [f for f in findings if f["kind"] in ("slow_rank", "slow_link", "dead_rank", "hang")]
if not faults:
    sys.exit("no fault finding; all findings: " + json.dumps(findings, indent=1))
top = faults[0]
got = {k: top[k] for k in want}
print("top finding:", top["text"])
if got != want:
    sys.exit("expected %s, got %s" % (want, got))
if len(faults) > 1:
    sys.exit("more than one fault finding: " + json.dumps(faults, indent=1))
PY
