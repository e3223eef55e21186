#!/usr/bin/env bash
# Sets up, builds and runs the whole paraxis test suite (the README's test command; CI runs it).
#   tools/test.sh [extra ctest args, e.g. -L kernels]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
ctest --preset default -j "$(nproc)" "$@"
