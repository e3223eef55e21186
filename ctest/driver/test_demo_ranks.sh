#!/usr/bin/env bash
# tools/demo_ranks.sh, the demo's rank count (issue 20): never more ranks than cores unless
# asked, at most 4; RANKS (argument) before $PARAXIS_RANKS; a count that is not a positive
# integer exits 2. The core count comes from a fake nproc put first on PATH; tools/run.sh must
# take its rank count from this script.
#   test_demo_ranks.sh <repository root>
set -uo pipefail
root=$1
script="$root/tools/demo_ranks.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
# expect <cores> <expected stdout> <expected exit> [args...]   (env PARAXIS_RANKS passes through)
expect() {
  local cores=$1 want=$2 want_rc=$3
  shift 3
  printf '#!/bin/sh\necho %s\n' "$cores" > "$work/nproc"
  chmod +x "$work/nproc"
  local got rc
  got=$(PATH="$work:$PATH" "$script" "$@" 2>"$work/err")
  rc=$?
  if [[ "$got" != "$want" || $rc -ne $want_rc ]]; then
    echo "FAIL: cores=$cores args=[$*] PARAXIS_RANKS=${PARAXIS_RANKS:-}: got '$got' (exit $rc)," \
      "expected '$want' (exit $want_rc); stderr: $(cat "$work/err")"
    fails=$((fails + 1))
  fi
}
unset PARAXIS_RANKS
expect 2 2 0          # the 2-core machine of the issue: 2 ranks, not 4
expect 1 1 0
expect 3 3 0
expect 16 4 0         # never more than the demo's 4 by default
expect 2 3 0 3        # asked for: honoured ...
grep -q "time-share" "$work/err" || { echo "FAIL: no time-sharing note for 3 ranks on 2 cores"; fails=$((fails + 1)); }
expect 16 8 0 8
grep -q . "$work/err" && { echo "FAIL: a note for 8 ranks on 16 cores: $(cat "$work/err")"; fails=$((fails + 1)); }
PARAXIS_RANKS=1 expect 4 1 0
PARAXIS_RANKS=1 expect 4 2 0 2   # the argument wins over the environment
expect 2 "" 2 0
expect 2 "" 2 x2
PARAXIS_RANKS=-1 expect 2 "" 2
expect "" "" 2   # nproc printing nothing is an error, not a default
grep -q 'ranks=$(tools/demo_ranks.sh' "$root/tools/run.sh" ||
  { echo "FAIL: tools/run.sh does not take its rank count from tools/demo_ranks.sh"; fails=$((fails + 1)); }
if ((fails > 0)); then
  echo "$fails failure(s)"
  exit 1
fi
echo "demo_ranks: all cases passed"
