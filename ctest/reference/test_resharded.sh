#!/usr/bin/env bash
# A checkpoint saved on 4 ranks gives the PyTorch reference the same result (label reference,
# issue 32): paraxis trains step 1 under a layout with tp, pp, dp, ep and ZeRO and saves it; the
# reference (tools/reference/compare.py --start) reads that checkpoint, whose shards it assembles
# itself, trains steps 2-10 and matches the single-rank dump's losses and final state. Without
# torch there is no reference to run: skipped (77).
# Usage: test_resharded.sh PARAXIS MPIEXEC NPROC_FLAG PYTHON TOOLS_REFERENCE DECKS WORK TINY_DECK
set -euo pipefail
paraxis=$1 mpiexec=$2 npflag=$3 py=$4 tools=$5 decks=$6 work=$7 tiny=$8
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "test_resharded: no torch for $py: skipped"
  exit 77
fi
status=0
# save NAME DECK DUMP --set ...: step 1 on 4 ranks, then the reference from its checkpoint.
save() {
  local name=$1 deck=$2 dump=$3
  shift 3
  rm -rf "${work:?}/$name"
  "$mpiexec" "$npflag" 4 "$paraxis" run "$deck" "$@" --set train.steps=1 \
    --set train.warmup_steps=0 --set checkpoint.every=1 --set hardware.calibrate=false \
    --set output.trace=false --set checkpoint.dir="$work/$name/checkpoints" \
    --out "$work/$name/out" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; return 1; }
  echo "== $name"
  "$py" "$tools/compare.py" "$work/$dump" --start "$work/$name/checkpoints/step-1" || status=1
}
save tiny-tp2-pp2 "$tiny" tiny --set train.precision=fp64 --set parallel.tp=2 --set parallel.pp=2
save moe-tp2-dp2-ep2-zero3 "$decks/moe-capacity.yaml" moe_capacity --set parallel.tp=2 \
  --set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=3
save moe-pp2-dp2-zero1-zbh1 "$decks/moe-capacity.yaml" moe_capacity --set parallel.pp=2 \
  --set parallel.dp=2 --set parallel.zero=1 --set parallel.schedule=zb-h1
exit $status
