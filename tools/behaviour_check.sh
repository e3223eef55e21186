#!/usr/bin/env bash
# behaviour_check.sh [OUT]: runs a fixed set of tiny fp64 decks covering every axis and schedule
# (1 rank dense and MoE; 1 rank with selective and full recomputation and with fused attention;
# dp2 with ZeRO 0-3, with and without overlap; tp2 with and without sequence parallelism; pp2
# gpipe, 1f1b, zb-h1, interleaved v2, and 1f1b with full recomputation; ep2 MoE dropless and
# with a capacity, ZeRO 0 and 3; tp2 x pp2 on 4 ranks), every point under --verify, plus a
# checkpoint resume (dp2 ZeRO-1 saves at step 2, tp2 resumes it to step 4; --verify does not
# resume), and writes their behaviour fingerprint (tools/behaviour_fingerprint.py) to OUT
# (default behaviour-fingerprint.json).
#
# Use: before a refactor and after it, on the same machine, then compare:
#   PARAXIS_BIN=/tmp/before/build/bin/paraxis tools/behaviour_check.sh before.json
#   tools/behaviour_check.sh after.json
#   tools/behaviour_diff.py before.json after.json     # exit 0: no behaviour changed
# Environment: PARAXIS_BIN (default build/bin/paraxis of this checkout), MPIEXEC (default mpiexec).
# Twelve launches, at most 4 ranks (MPICH), under a minute on 2 cores. See docs/architecture.md
# "Checking a refactor changes no behaviour".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${1:-behaviour-fingerprint.json}
bin=${PARAXIS_BIN:-$root/build/bin/paraxis}
mpiexec=${MPIEXEC:-mpiexec}
[[ -x $bin ]] || { echo "behaviour_check: no paraxis binary at '$bin' (build it, or set PARAXIS_BIN)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/behaviour-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Tiny, fp64 (bitwise reproducible), no calibration or trace (timings only), 3 steps.
cat > "$work/deck.yaml" <<'EOF'
model: {vocab: 32, seq_len: 8, hidden: 16, heads: 2, layers: 4, ffn: 32,
        moe: {experts: 0, top_k: 2, every: 2, capacity_factor: 0, aux_loss_coef: 0.01}}
train: {global_batch: 4, micro_batch: 1, steps: 3, warmup_steps: 1, precision: fp64, seed: 1234,
        lr: 3.0e-3}
parallel: {tp: 1, pp: 1, dp: 1, ep: 1, zero: 0}
hardware: {calibrate: false}
output: {trace: false}
comm: {timeout_s: 120}
EOF

# launch NAME RANKS --set ...: one mpiexec under --verify, its results in $work/NAME (the
# fingerprint's key). launch_plain: the same without --verify (a resume).
launch() {
  local name=$1 ranks=$2
  shift 2
  launch_plain "$name" "$ranks" --verify "$@"
}
launch_plain() {
  local name=$1 ranks=$2
  shift 2
  if ! "$mpiexec" -n "$ranks" "$bin" run "$work/deck.yaml" --out "$work/$name" "$@" \
      > "$work/$name.log" 2>&1; then
    # Exit 1 (a point diverged or failed --verify) is behaviour and lands in the fingerprint;
    # anything else means no usable results.
    if [[ ! -f $work/$name/summary.json ]]; then
      echo "behaviour_check: launch '$name' wrote no summary.json; its log:" >&2
      tail -20 "$work/$name.log" >&2
      exit 3
    fi
  fi
  dirs+=("$work/$name")
}

dirs=()
launch 1rank 1 --set 'sweep.model.moe.experts=[0,4]' --set 'sweep.parallel.schedule=[gpipe,1f1b]'
launch dp2 2 --set parallel.dp=2 --set 'sweep.parallel.zero=[0,1,2,3]' \
  --set 'sweep.comm.overlap=[false,true]'
launch tp2 2 --set parallel.tp=2 --set 'sweep.parallel.sequence_parallel=[false,true]'
launch 1rank-recompute 1 --set model.moe.experts=4 --set 'sweep.train.recompute=[selective,full]'
launch 1rank-fused 1 --set model.attention=fused --set 'sweep.train.recompute=[none,full]'
launch pp2 2 --set parallel.pp=2 --set 'sweep.parallel.schedule=[gpipe,1f1b,zb-h1]'
launch pp2-recompute 2 --set parallel.pp=2 --set train.recompute=full --set train.micro_batch=2
launch pp2v2 2 --set parallel.pp=2 --set parallel.schedule=interleaved \
  --set parallel.virtual_stages=2
launch ep2 2 --set parallel.dp=2 --set parallel.ep=2 --set model.moe.experts=4 \
  --set 'sweep.model.moe.capacity_factor=[0,1.0]' --set 'sweep.parallel.zero=[0,3]'
launch tp2pp2 4 --set parallel.tp=2 --set parallel.pp=2 --set model.moe.experts=4
launch_plain ckpt-save 2 --set parallel.dp=2 --set parallel.zero=1 --set train.steps=2 \
  --set checkpoint.every=2
launch_plain ckpt-resume 2 --set parallel.tp=2 --set train.steps=4 \
  --resume "$work/ckpt-save/checkpoints/step-2"

python3 "$here/behaviour_fingerprint.py" "${dirs[@]}" > "$work/fingerprint.json"
mv "$work/fingerprint.json" "$out"
echo "behaviour_check: ${#dirs[@]} launches, fingerprint in $out ($bin)"
