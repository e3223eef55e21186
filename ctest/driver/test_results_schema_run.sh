#!/usr/bin/env bash
# The results schema against real output (issue 31; analysis/results_schema.hpp): what paraxis
# writes is what the declaration says — every key written is declared, every field declared as
# always written is there, every value of its kind and range — for summary.json, points.csv and
# report.json, over runs that write every optional part a tiny run can: 2 ranks, pp2 with MoE,
# calibration, a slowed axis, checkpoints, --verify (A); a resume with checkpoint.every: auto (B);
# dp2 x ep2 with ZeRO-1 and dp slowed (D); one rank with a sweep whose points are skipped (C);
# one rank whose point fails (F). `paraxis report` accepts A, C, D and F (the reader; F's
# report lists its dead_rank finding and the points not analysed); a summary of schema version 1 is refused, naming both versions, with exit 2 (bad
# input). The benchmark programs' provenance keys are the declared ones (paraxis-bench-comm's
# JSON, the kernel benchmarks' Google Benchmark context). About 30 s on 2 cores.
# Usage: test_results_schema_run.sh PARAXIS SCHEMA_TOOL MPIEXEC BENCH_COMM BENCH_KERNELS
set -euo pipefail
paraxis=$1 tool=$2 mpiexec=$3 bench_comm=$4 bench_kernels=$5
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAILED: $*" >&2; exit 1; }

cat > "$out/cover.yaml" <<'YAML'
model: {vocab: 64, seq_len: 16, hidden: 32, heads: 2, layers: 2, ffn: 64,
        moe: {experts: 2, top_k: 1, every: 2, capacity_factor: 0, aux_loss_coef: 0.01, router_skew: 0}}
train: {global_batch: 4, micro_batch: 2, steps: 4, warmup_steps: 1, lr: 3.0e-3, seed: 1, precision: fp32}
parallel: {tp: 1, pp: 2, dp: 1, ep: 1, zero: 0}
hardware: {calibrate: true, peak_flops: 1.0e12, ranks_per_node: 1}
checkpoint: {every: 2}
fault: {slow_axis: {axis: pp, factor: 2}}
output: {trace: true}
YAML
cat > "$out/sweep.yaml" <<'YAML'
model: {vocab: 64, seq_len: 16, hidden: 32, heads: 2, layers: 2, ffn: 64, moe: {experts: 0}}
train: {global_batch: 4, micro_batch: 2, steps: 3, warmup_steps: 1, lr: 3.0e-3, seed: 1, precision: fp32}
parallel: {tp: 1, pp: 1, dp: 1, ep: 1, zero: 0}
hardware: {calibrate: false}
sweep:
  parallel.dp: [1, 2]
YAML

"$mpiexec" -n 2 "$paraxis" run "$out/cover.yaml" --out "$out/A" --verify > "$out/A.log" 2>&1 ||
  { cat "$out/A.log"; fail "run A"; }
"$mpiexec" -n 2 "$paraxis" run "$out/cover.yaml" --out "$out/B" --resume "$out/A/checkpoints/step-2" \
  --set checkpoint.every=auto > "$out/B.log" 2>&1 || { cat "$out/B.log"; fail "run B (resume)"; }
"$mpiexec" -n 2 "$paraxis" run "$out/cover.yaml" --out "$out/D" --set parallel.pp=1 --set parallel.dp=2 \
  --set parallel.ep=2 --set parallel.zero=1 --set fault.slow_axis.axis=dp --set checkpoint.every=0 \
  > "$out/D.log" 2>&1 || { cat "$out/D.log"; fail "run D"; }
"$paraxis" run "$out/sweep.yaml" --out "$out/C" > "$out/C.log" 2>&1 || { cat "$out/C.log"; fail "run C"; }
set +e  # a rank that fails: exit 3, the point recorded as failed
"$paraxis" run "$out/sweep.yaml" --out "$out/F" --set fault.dead_rank.rank=0 --set fault.dead_rank.step=1 \
  > "$out/F.log" 2>&1
rc=$?
set -e
[ "$rc" = 3 ] || { cat "$out/F.log"; fail "run F: exit $rc, expected 3"; }
grep -q '"skipped: ' "$out/C/summary.json" || fail "run C has no skipped point"
for d in A C D F; do
  "$paraxis" report "$out/$d" > "$out/report-$d.log" 2>&1 ||
    { cat "$out/report-$d.log"; fail "paraxis report $d (the reader refused the writer's output)"; }
done
for d in A B C D F; do "$tool" check "$out/$d" || fail "$d does not conform to the results schema"; done

# A summary of schema version 1: refused, naming the version found and the one expected, exit 2.
mkdir "$out/old"
sed 's|"schema": "paraxis.summary/2"|"schema": "paraxis.summary/1"|' "$out/C/summary.json" > "$out/old/summary.json"
set +e
"$paraxis" report "$out/old" > "$out/old.log" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || { cat "$out/old.log"; fail "a /1 summary: exit $rc, expected 2 (bad input)"; }
grep -q 'schema: this summary is "paraxis.summary/1"; this paraxis reads "paraxis.summary/2"' "$out/old.log" ||
  { cat "$out/old.log"; fail "a /1 summary: the message does not name both versions"; }

# The checker itself can fail: a key the writer does not declare.
python3 - "$out/C/summary.json" "$out/bad/summary.json" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1])); j["points"][0]["time"]["undeclared_s"] = 1.0
os.makedirs(os.path.dirname(sys.argv[2])); json.dump(j, open(sys.argv[2], "w"))
PY
cp "$out/C/points.csv" "$out/bad/"
if "$tool" check "$out/bad" > "$out/bad.log"; then fail "an undeclared key passed the check"; fi
grep -q 'points\[0\].time.undeclared_s: not declared' "$out/bad.log" || { cat "$out/bad.log"; fail "bad"; }

# The benchmark programs' provenance: the declared keys (none: built without benchmarks).
if [ "$bench_comm" = none ]; then echo "results schema: output conforms; /1 refused"; exit 0; fi
"$mpiexec" -n 2 "$bench_comm" --min-bytes 8 --max-bytes 8 --op all_reduce --iters 1 --warmup 1 \
  --blocks 1 --json "$out/comm.json" > "$out/comm.log" 2>&1 || { cat "$out/comm.log"; fail "bench_comm"; }
"$tool" check-provenance "$out/comm.json" || fail "paraxis-bench-comm's provenance"
"$bench_kernels" '--benchmark_filter=^layernorm/fwd/4096x512/' --benchmark_min_time=0.01 \
  --benchmark_format=json > "$out/kernels.json" 2> "$out/kernels.log" ||
  { cat "$out/kernels.log"; fail "paraxis-bench-kernels"; }
"$tool" check-provenance "$out/kernels.json" || fail "paraxis-bench-kernels' context"
echo "results schema: A, B, C, D, F, report.json and both benchmarks' provenance conform; /1 refused"
