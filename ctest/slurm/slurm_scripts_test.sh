#!/usr/bin/env bash
# The batch scripts outside Slurm (no cluster needed): syntax, headers, the launch line each
# builds (PARAXIS_DRY_RUN=1 with a faked SLURM_* environment), the multi-node script's check
# that tensor-parallel groups stay inside a node, and the array script's deck/slice selection.
#   slurm_scripts_test.sh SOURCE_DIR
set -uo pipefail
src="${1:?usage: slurm_scripts_test.sh SOURCE_DIR}"
S="$src/slurm"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok()   { passed=$((passed + 1)); echo "ok:   $*"; }
bad()  { failed=$((failed + 1)); echo "FAIL: $*"; }
# expect NAME RC PATTERN -- command...: exit status RC and output matching PATTERN (grep -E)
expect() {
  local name="$1" want_rc="$2" pat="$3"; shift 4
  local o rc; o="$("$@" 2>&1)"; rc=$?
  if [ "$rc" -eq "$want_rc" ] && grep -qE -- "$pat" <<< "$o"; then ok "$name"
  else bad "$name (rc $rc, want $want_rc; /$pat/ in:)"; sed 's/^/      /' <<< "$o"; fi
}
fake() {  # a Slurm job environment, dry run
  env -i PATH="$PATH" HOME="$tmp" SLURM_JOB_ID=4242 SLURM_SUBMIT_DIR="$tmp" PARAXIS_DRY_RUN=1 \
    PARAXIS_EXE=/bin/true PARAXIS_HOME="$src" "$@"
}

for f in "$S"/*.sbatch; do
  n="$(basename "$f")"
  bash -n "$f" && ok "$n: bash -n" || bad "$n: syntax"
  head -n 5 "$f" | grep -q '^# ' && grep -q '^# Variables' "$f" && grep -q '^# Runs' "$f" &&
    ok "$n: header (what it runs, variables)" || bad "$n: header"
  grep -q '^#SBATCH --job-name=' "$f" && grep -q '^#SBATCH --time=' "$f" && ok "$n: #SBATCH lines" || bad "$n: #SBATCH"
  grep -q 'srun -u --kill-on-bad-exit=1' "$f" && ok "$n: srun -u --kill-on-bad-exit" || bad "$n: srun flags"
done

deck="$src/inputs/tiny.yaml"
expect "restart: the first attempt's line, checkpoints beside the results" 0 \
  "srun -u --kill-on-bad-exit=1 --mpi=pmi2 --cpu-bind=cores --ntasks=2 /bin/true run $deck --set checkpoint.dir=$tmp/runs/paraxis-restart-checkpoints --set checkpoint.every=3  --out $tmp/runs/paraxis-restart-4242/attempt-0" -- \
  fake SLURM_NTASKS=2 SLURM_JOB_NAME=paraxis-restart PARAXIS_EVERY=3 bash "$S/restart.sbatch"
expect "restart: a retry count that is not a count" 2 "PARAXIS_RETRIES must be a count" -- \
  fake PARAXIS_RETRIES=x bash "$S/restart.sbatch"
expect "cpu: srun line, results folder named after the job" 0 \
  "srun -u --kill-on-bad-exit=1 --mpi=pmi2 --cpu-bind=cores --ntasks=2 /bin/true run $deck --set train.steps=3 --out $tmp/runs/paraxis-cpu-4242" -- \
  fake SLURM_NTASKS=2 SLURM_JOB_NAME=paraxis-cpu PARAXIS_SET=train.steps=3 bash "$S/cpu.sbatch"
expect "cpu: mpiexec launcher" 0 "^cpu.sbatch: mpiexec -n 2 /bin/true run" -- \
  fake SLURM_NTASKS=2 PARAXIS_LAUNCHER=mpiexec bash "$S/cpu.sbatch"
expect "cpu: unknown launcher refused" 2 "must be srun or mpiexec" -- \
  fake PARAXIS_LAUNCHER=aprun bash "$S/cpu.sbatch"
expect "cpu: outside a job refused" 1 "not inside a Slurm job" -- \
  env -i PATH="$PATH" PARAXIS_EXE=/bin/true bash "$S/cpu.sbatch"

expect "gpu-node: one GPU per rank by SLURM_LOCALID" 0 \
  'srun -u --kill-on-bad-exit=1 .*--ntasks=8 .*CUDA_VISIBLE_DEVICES=\$SLURM_LOCALID.* /bin/true run .*--out '"$tmp"'/runs/paraxis-gpu-4242' -- \
  fake SLURM_NTASKS=8 SLURM_JOB_NAME=paraxis-gpu PARAXIS_DECK="$deck" bash "$S/gpu-node.sbatch"
expect "gpu-node: Kokkos device mapping" 0 'run .* --kokkos-map-device-id-by=mpi_rank$' -- \
  fake SLURM_NTASKS=8 PARAXIS_GPU_SELECT=kokkos PARAXIS_DECK="$deck" bash "$S/gpu-node.sbatch"
# The localid wrapper itself: each rank sees only its own device.
wrap="$(sed -n "s/.*localid) wrap=(bash -c '\(.*\)' paraxis-rank)/\1/p" "$S/gpu-node.sbatch")"
v="$(SLURM_LOCALID=5 bash -c "$wrap" paraxis-rank bash -c 'echo $CUDA_VISIBLE_DEVICES/$ROCR_VISIBLE_DEVICES')"
[ "$v" = "5/5" ] && ok "gpu-node: wrapper sets CUDA/ROCR_VISIBLE_DEVICES=5 for local rank 5" || bad "gpu-node: wrapper gave '$v'"

sweep="$tmp/sweep.yaml"
printf 'model: {layers: 8}\nsweep: {parallel.tp: [1, 2, 4, 8], parallel.pp: [1, 2]}\n' > "$sweep"
sweep3="$tmp/sweep3.yaml"
printf 'parallel: {pp: 2}\nsweep:\n  parallel.tp: [1, 3]\n' > "$sweep3"
scalar="$tmp/scalar.yaml"
printf 'parallel:\n  tp: 16\n  pp: 1\n' > "$scalar"
ms() { fake SLURM_NTASKS=16 SLURM_JOB_NUM_NODES=2 "$@" bash "$S/multi-node-sweep.sbatch"; }
expect "multi-node: tp 1,2,4,8 on 8 tasks/node accepted, block placement" 0 \
  'tp in \{1 2 4 8 \}|--ntasks-per-node=8 --distribution=block:block' -- ms PARAXIS_DECK="$sweep"
expect "multi-node: tp 3 rejected (sweep list)" 2 'tp=3 does not divide the 8 tasks per node' -- ms PARAXIS_DECK="$sweep3"
expect "multi-node: tp 16 rejected (scalar in parallel:)" 2 'tp=16 does not divide' -- ms PARAXIS_DECK="$scalar"
expect "multi-node: --set parallel.tp=16 rejected" 2 'tp=16 does not divide' -- \
  ms PARAXIS_DECK="$deck" PARAXIS_SET="parallel.tp=16"
expect "multi-node: PARAXIS_TP_VALUES checked" 2 'tp=6 does not divide' -- \
  ms PARAXIS_DECK="$deck" PARAXIS_TP_VALUES="2 6"
expect "multi-node: order with tp last rejected" 2 'tp ranks are not adjacent' -- \
  ms PARAXIS_DECK="$sweep" PARAXIS_ORDER=pp-dp-tp
expect "multi-node: uneven tasks over nodes rejected" 2 'do not split evenly' -- \
  fake SLURM_NTASKS=15 SLURM_JOB_NUM_NODES=2 PARAXIS_DECK="$sweep" bash "$S/multi-node-sweep.sbatch"

arr() { fake SLURM_ARRAY_JOB_ID=77 SLURM_JOB_NAME=paraxis-array "$@" bash "$S/array-sweep.sbatch"; }
expect "array: task 1 runs line 1 of the points file" 0 \
  "run $deck --set parallel.tp=2 --set parallel.pp=2 --set parallel.dp=1 --out $tmp/runs/paraxis-array-77_1\$" -- \
  arr SLURM_ARRAY_TASK_ID=1 PARAXIS_DECK="$deck" PARAXIS_POINTS="$S/points-example.txt"
expect "array: a task past the last line fails" 2 'no line 9' -- \
  arr SLURM_ARRAY_TASK_ID=9 PARAXIS_DECK="$deck" PARAXIS_POINTS="$S/points-example.txt"
expect "array: task 1 runs the second deck" 0 "run $src/inputs/small.yaml --set train.steps=2 --out $tmp/runs/paraxis-array-77_1\$" -- \
  arr SLURM_ARRAY_TASK_ID=1 PARAXIS_DECKS="$deck $src/inputs/small.yaml" PARAXIS_SET=train.steps=2

echo "slurm scripts: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
