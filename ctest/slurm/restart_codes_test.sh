#!/usr/bin/env bash
# slurm/restart.sbatch's retry decision, outside Slurm (issue 29): the job's launcher is a fake
# `srun` that ends with a given status, and job.txt counts the attempts. A status another attempt
# can cure (a failed rank 3, a hang 5, a rank killed by a signal: 137, 143) is retried
# PARAXIS_RETRIES times; every other one (0, 1, 2, 4, SIGINT's 130, CLI11's former 104-114, 126,
# 127) stops at once, with the script's exit status the attempt's.
#   restart_codes_test.sh SOURCE_DIR
set -uo pipefail
src="${1:?usage: restart_codes_test.sh SOURCE_DIR}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
printf '#!/bin/bash\nexit "${FAKE_RC:-0}"\n' > "$tmp/bin/srun"
chmod +x "$tmp/bin/srun"
passed=0 failed=0
attempts_for() {  # RC -> prints "<attempts> <script status>"
  local rc="$1" job="77$1"
  env -i PATH="$tmp/bin:$PATH" HOME="$tmp" SLURM_JOB_ID="$job" SLURM_SUBMIT_DIR="$tmp" \
    PARAXIS_EXE=/bin/true PARAXIS_HOME="$src" PARAXIS_RETRIES=2 FAKE_RC="$rc" \
    bash "$src/slurm/restart.sbatch" > "$tmp/log-$rc" 2>&1
  local status=$?
  echo "$(grep -c '^attempt=' "$tmp/runs/paraxis-restart-$job/job.txt" 2>/dev/null || echo 0) $status"
}
for rc in 0 1 2 4 130 104 109 114 126 127; do
  got="$(attempts_for "$rc")"
  if [ "$got" = "1 $rc" ]; then passed=$((passed + 1)); echo "ok:   exit $rc stops after one attempt"
  else failed=$((failed + 1)); echo "FAIL: exit $rc: $got (attempts, status); want 1 $rc"; sed 's/^/      /' "$tmp/log-$rc"; fi
done
for rc in 3 5 137 143; do
  got="$(attempts_for "$rc")"
  if [ "$got" = "3 $rc" ]; then passed=$((passed + 1)); echo "ok:   exit $rc is retried twice"
  else failed=$((failed + 1)); echo "FAIL: exit $rc: $got (attempts, status); want 3 $rc"; sed 's/^/      /' "$tmp/log-$rc"; fi
done
echo "restart codes: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
