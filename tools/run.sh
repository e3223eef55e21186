#!/usr/bin/env bash
# Sets up, builds and runs the main job (the README's first command): installs the system
# packages, builds paraxis (Release), runs the demo sweep (inputs/demo.yaml: every
# factorisation of the rank count, each ZeRO stage, checked against the single-rank run with
# --verify), writes the report (measured against predicted, with plots), then measures the
# kernel benchmark suite (GEMM against OpenBLAS, attention, LayerNorm, softmax).
#   tools/run.sh [DECK [RANKS]]        default: inputs/demo.yaml
# Ranks: RANKS, else $PARAXIS_RANKS, else the machine's cores up to 4 (tools/demo_ranks.sh):
# more ranks than cores time-share them, and the first report would measure that.
set -euo pipefail
cd "$(dirname "$0")/.."
deck=${1:-inputs/demo.yaml}
ranks=$(tools/demo_ranks.sh "${2:-}")
echo "run.sh: $deck on $ranks rank(s) ($(env -u OMP_NUM_THREADS nproc) core(s) here;" \
  "RANKS or PARAXIS_RANKS to choose)"
tools/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
out=runs/$(basename "$deck" .yaml)-$(date +%Y%m%d-%H%M%S)
mpiexec -n "$ranks" build/bin/paraxis run "$deck" --verify --out "$out"
build/bin/paraxis report "$out"
OPENBLAS_NUM_THREADS=1 build/bin/paraxis-bench-kernels --benchmark_min_time=0.2 \
  --benchmark_out="$out/bench-kernels.json" --benchmark_out_format=json
echo "results: $out/summary.json, $out/report.md, $out/bench-kernels.json"
