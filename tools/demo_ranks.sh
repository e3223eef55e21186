#!/usr/bin/env bash
# Prints the number of MPI ranks tools/run.sh runs the demo on. Asked for (the first argument,
# else $PARAXIS_RANKS): that many, a positive integer, with a note on stderr when it exceeds the
# cores (ranks then time-share cores and busy-poll in MPI, which no performance model here
# describes, so the report's residuals measure the time-sharing). Not asked: the cores this
# process may use (nproc, OMP_NUM_THREADS ignored), at most 4, the demo's design size.
#   tools/demo_ranks.sh [RANKS]
set -euo pipefail
max_default=4
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
if ! [[ "$cores" =~ ^[1-9][0-9]*$ ]]; then
  echo "demo_ranks: nproc printed '$cores', expected a positive integer" >&2
  exit 2
fi
requested=${1:-${PARAXIS_RANKS:-}}
if [[ -n "$requested" ]]; then
  if ! [[ "$requested" =~ ^[1-9][0-9]*$ ]]; then
    echo "demo_ranks: rank count '$requested' is not a positive integer" >&2
    exit 2
  fi
  if ((requested > cores)); then
    echo "demo_ranks: note: $requested ranks on $cores core(s): ranks time-share cores, so" \
      "measured step times include that and the report's predictions (a core per rank) miss" >&2
  fi
  echo "$requested"
else
  echo $((cores < max_default ? cores : max_default))
fi
