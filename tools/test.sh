#!/usr/bin/env bash
# Sets up, builds and runs the paraxis test suite (the README's test command; CI runs it).
#   tools/test.sh [--slow] [extra ctest args, e.g. -L kernels]
# Tests labelled `slow` (the full matrices: every precision x axis x schedule) are left out unless
# --slow is given; CI runs without it, and a change is resolved only after `tools/test.sh --slow`.
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=(-LE slow)
if [[ "${1:-}" == "--slow" ]]; then
  exclude=()
  shift
fi
tools/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
ctest --preset default -j "$(nproc)" "${exclude[@]}" "$@"
