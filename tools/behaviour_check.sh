#!/usr/bin/env bash
# behaviour_check.sh [OUT]: runs a fixed set of tiny fp64 decks covering every axis and schedule
# (1 rank dense and MoE; dp2 with ZeRO 0-3, with and without overlap; tp2 with and without
# sequence parallelism; pp2 gpipe, 1f1b, interleaved v2; ep2 MoE dropless and with a capacity,
# ZeRO 0 and 3; tp2 x pp2 on 4 ranks), every point under --verify, and writes their behaviour
# fingerprint (tools/behaviour_fingerprint.py) to OUT (default behaviour-fingerprint.json).
#
# Use: before a refactor and after it, on the same machine, then compare:
#   PARAXIS_BIN=/tmp/before/build/bin/paraxis tools/behaviour_check.sh before.json
#   tools/behaviour_check.sh after.json
#   tools/behaviour_diff.py before.json after.json     # exit 0: no behaviour changed
# Environment: PARAXIS_BIN (default build/bin/paraxis of this checkout), MPIEXEC (default mpiexec).
# Seven launches, at most 4 ranks (MPICH), a few seconds on 2 cores. See docs/architecture.md
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

# launch NAME RANKS --set ...: one mpiexec, its results in $work/NAME (the fingerprint's key).
launch() {
  local name=$1 ranks=$2
  shift 2
  if ! "$mpiexec" -n "$ranks" "$bin" run "$work/deck.yaml" --verify --out "$work/$name" "$@" \
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
launch pp2 2 --set parallel.pp=2 --set 'sweep.parallel.schedule=[gpipe,1f1b]'
launch pp2v2 2 --set parallel.pp=2 --set parallel.schedule=interleaved \
  --set parallel.virtual_stages=2
launch ep2 2 --set parallel.dp=2 --set parallel.ep=2 --set model.moe.experts=4 \
  --set 'sweep.model.moe.capacity_factor=[0,1.0]' --set 'sweep.parallel.zero=[0,3]'
launch tp2pp2 4 --set parallel.tp=2 --set parallel.pp=2 --set model.moe.experts=4

python3 "$here/behaviour_fingerprint.py" "${dirs[@]}" > "$work/fingerprint.json"
mv "$work/fingerprint.json" "$out"
echo "behaviour_check: ${#dirs[@]} launches, fingerprint in $out ($bin)"
