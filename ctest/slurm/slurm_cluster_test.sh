#!/usr/bin/env bash
# Runs slurm/cpu.sbatch through a real one-node Slurm cluster started for this test alone.
#
#   slurm_cluster_test.sh --case ok|fail --paraxis EXE --source DIR [--mpiexec MPIEXEC]
#
# The cluster (munged, slurmctld, slurmd, all as root) lives in a temporary directory: its own
# slurm.conf, state/spool/log folders, munge key and socket, ports chosen free. Everything runs
# inside a new network namespace that has only the loopback interface (unshare -n), so the
# daemons cannot be reached from, or reach, anything but 127.0.0.1. Every process the test
# starts is stopped by pid on exit, whatever happened (trap).
#
#   case ok:   sbatch cpu.sbatch with inputs/tiny.yaml on $PARAXIS_SLURM_RANKS ranks; the job must
#              end COMPLETED 0:0 and its results folder must hold summary.json with status ok
#              and the report (report.md, report.json).
#   case restart: sbatch restart.sbatch (2 ranks, dp2 ZeRO-1, fp64, 6 steps, a checkpoint every 2)
#              with rank 1 killed before step 4 in the first attempt (fault.dead_rank); the job
#              must restart once from step-4 and end COMPLETED 0:0 with the final loss and the
#              final checkpoint's tensors (the checksums of step-6's index) of an uninterrupted
#              run of the same deck (plain mpiexec, outside Slurm): bitwise.
#   case fail: sbatch cpu.sbatch with a deck that has an unknown key; the job must end FAILED with
#              a non-zero exit code (scontrol show job, and the jobcomp/filetxt log), and its output
#              must name the bad key.
#
# Variables:
#   PARAXIS_SLURM_RANKS     ranks of the ok job (default 2)
#   PARAXIS_SLURM_SET       --set overrides of the ok job (default "parallel.dp=2 train.steps=3")
#   PARAXIS_SLURM_LAUNCHER  cpu.sbatch's launcher (default srun; mpiexec also works here)
#   PARAXIS_SLURM_TIMEOUT   seconds to wait for a job (default 120)
#   PARAXIS_SLURM_PROBE     0: skip the local mpiexec probe below
#   PARAXIS_SLURM_KEEP      1: keep the temporary directory (logs) after the test
# Before the ok job the same run is tried with plain mpiexec outside Slurm; if it fails (a build
# without data parallelism rejects dp=2), the job falls back to 1 rank and "train.steps=3", and
# the test says so.
# Exit status: 0 pass, 1 fail, 77 skipped (no Slurm/munge installed, not root, no unshare).
set -uo pipefail

SKIP=77
case_name="" paraxis="" source_dir="" mpiexec="mpiexec"
while [ $# -gt 0 ]; do
  case "$1" in
    --case) case_name="$2"; shift 2 ;;
    --paraxis) paraxis="$2"; shift 2 ;;
    --source) source_dir="$2"; shift 2 ;;
    --mpiexec) mpiexec="${2:-mpiexec}"; shift 2 ;;
    *) echo "slurm test: unknown argument $1" >&2; exit 1 ;;
  esac
done
case "$case_name" in ok | fail | restart) ;; *) echo "slurm test: --case ok|fail|restart" >&2; exit 1 ;; esac

say() { echo "slurm test [$case_name]: $*"; }

# --- skip where there is no Slurm to run --------------------------------------------------
for tool in slurmctld slurmd sbatch scontrol sinfo munged munge; do
  if ! command -v "$tool" >/dev/null 2>&1 && ! [ -x "/usr/sbin/$tool" ]; then
    say "SKIPPED: $tool is not installed (apt-get install slurm-wlm munge)"
    exit $SKIP
  fi
done
export PATH="$PATH:/usr/sbin"
if [ "$(id -u)" -ne 0 ]; then
  say "SKIPPED: slurmd must run as root to launch jobs"
  exit $SKIP
fi
[ -x "$paraxis" ] || { say "FAIL: no paraxis binary at '$paraxis'"; exit 1; }
[ -f "$source_dir/slurm/cpu.sbatch" ] || { say "FAIL: no slurm/cpu.sbatch under '$source_dir'"; exit 1; }

# --- into a private network namespace (loopback only) --------------------------------------
if [ "${PARAXIS_SLURM_IN_NETNS:-}" != 1 ]; then
  if ! unshare -n true 2>/dev/null; then
    say "SKIPPED: cannot create a network namespace (unshare -n), and the daemons must not listen beyond loopback"
    exit $SKIP
  fi
  PARAXIS_SLURM_IN_NETNS=1 exec unshare -n bash "$0" --case "$case_name" --paraxis "$paraxis" \
    --source "$source_dir" --mpiexec "$mpiexec"
fi
ip link set lo up 2>/dev/null || { say "FAIL: cannot bring up lo in the namespace"; exit 1; }
# getaddrinfo(AI_ADDRCONFIG), which Slurm uses, finds no IPv4 "configured" while 127.0.0.1 is the
# only address; a second loopback address (still on lo, still 127/8) makes it answer.
ip addr add 127.0.0.2/8 dev lo 2>/dev/null || true

# --- the temporary cluster ---------------------------------------------------------------------
tmp="$(mktemp -d /tmp/paraxis-slurm.XXXXXX)"
chmod 711 "$tmp"
mkdir -p "$tmp"/{state,spool,log,run,work,munge}
chmod 755 "$tmp/munge"
# A tag in the environment of every daemon (and so of every slurmstepd) and of every job: cleanup
# finds the processes this test started by it, and stops them by pid. (Not in this script's own
# environment, so that the script and its subshells do not carry it.)
tag="PARAXIS_SLURM_TEST_TAG=$tmp"
export SLURM_CONF="$tmp/slurm.conf"
pids=()

stop_pid() {  # stop_pid PID: TERM, wait up to 5 s, then KILL
  local p="$1" i
  kill -0 "$p" 2>/dev/null || return 0
  kill -TERM "$p" 2>/dev/null
  for i in $(seq 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null
}
tagged_pids() {  # processes whose environment holds this test's tag (jobs, slurmstepd, daemons)
  local d p
  for d in /proc/[0-9]*; do
    p="${d#/proc/}"
    [ "$p" = "$$" ] && continue
    { tr '\0' '\n' < "$d/environ"; } 2>/dev/null | grep -qxF "$tag" && echo "$p"
  done
}
cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  if [ "$rc" -ne 0 ] && [ "$rc" -ne $SKIP ]; then
    for f in "$tmp"/log/*.log "$tmp"/work/*.out; do
      [ -f "$f" ] && { echo "----- $f (last 30 lines)"; tail -n 30 "$f"; }
    done
  fi
  scancel --quiet --full --user=root 2>/dev/null || true
  # Daemons in reverse start order (slurmd, slurmctld, munged), then anything left with our tag.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop_pid "${pids[$i]}"; done
  for p in $(tagged_pids); do stop_pid "$p"; done
  local left; left="$(tagged_pids | tr '\n' ' ')"
  [ -n "$left" ] && say "WARNING: processes still alive after cleanup: $left"
  if [ "${PARAXIS_SLURM_KEEP:-0}" = 1 ]; then say "kept $tmp"; else rm -rf "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ctld_port="$(free_port)"; slurmd_port="$(free_port)"
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port="$(free_port)"; done
cpus="$(nproc)"

# munge: own key, socket and seed, in the foreground so that $! is the daemon.
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
env "$tag" munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.sock" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" \
  --seed-file="$tmp/munge/munge.seed" &
pids+=($!)

cat > "$SLURM_CONF" <<EOF
# One-node test cluster for paraxis's CTest (ctest/slurm); everything on 127.0.0.1.
ClusterName=paraxistest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/log/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1024 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

for i in $(seq 50); do [ -S "$tmp/munge/munge.sock" ] && break; sleep 0.1; done
[ -S "$tmp/munge/munge.sock" ] || { say "FAIL: munged did not start"; exit 1; }

env "$tag" slurmctld -D -c -f "$SLURM_CONF" > "$tmp/log/slurmctld.stdout" 2>&1 &
pids+=($!)
env "$tag" slurmd -D -N localhost -f "$SLURM_CONF" > "$tmp/log/slurmd.stdout" 2>&1 &
pids+=($!)

t0=$SECONDS
until [ "$(sinfo -h -n localhost -o %T 2>/dev/null)" = idle ]; do
  if [ $((SECONDS - t0)) -ge 60 ]; then say "FAIL: node not idle after 60 s"; sinfo 2>&1; exit 1; fi
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { say "FAIL: daemon $p died"; exit 1; }; done
  sleep 0.5
done
say "cluster up in $((SECONDS - t0)) s (slurmctld :$ctld_port, slurmd :$slurmd_port, $cpus CPUs, in $tmp)"

# --- one job ---------------------------------------------------------------------------------
timeout_s="${PARAXIS_SLURM_TIMEOUT:-120}"
job_field() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
wait_job() {  # wait_job ID: until the job leaves PENDING/RUNNING/COMPLETING, at most timeout_s
  local id="$1" t=$SECONDS st
  while :; do
    st="$(job_field "$id" JobState)"
    case "$st" in
      PENDING | RUNNING | CONFIGURING | COMPLETING | "") ;;
      *) echo "$st"; return 0 ;;
    esac
    if [ $((SECONDS - t)) -ge "$timeout_s" ]; then
      scancel "$id" 2>/dev/null
      echo "TIMEOUT_IN_TEST"
      return 1
    fi
    sleep 0.5
  done
}
submit() {  # submit RANKS DECK "SETS" -> job id; cpu.sbatch's variables through --export
  sbatch --parsable --chdir="$tmp/work" --ntasks="$1" --cpus-per-task=1 \
    --output="$tmp/work/paraxis-cpu-%j.out" \
    --export="ALL,$tag,PARAXIS_EXE=$paraxis,PARAXIS_DECK=$2,PARAXIS_SET=$3,PARAXIS_HOME=$source_dir,PARAXIS_RESULTS=$tmp/work/runs,PARAXIS_LAUNCHER=${PARAXIS_SLURM_LAUNCHER:-srun}" \
    "$source_dir/slurm/cpu.sbatch"
}

if [ "$case_name" = ok ]; then
  ranks="${PARAXIS_SLURM_RANKS:-2}"
  sets="${PARAXIS_SLURM_SET:-parallel.dp=2 train.steps=3}"
  deck="$source_dir/inputs/tiny.yaml"
  # Does this build run that configuration at all? Try it outside Slurm first.
  probe_args=()
  for kv in $sets; do probe_args+=(--set "$kv"); done
  if [ "${PARAXIS_SLURM_PROBE:-1}" = 1 ] &&
     ! probe="$(timeout 120 "$mpiexec" -n "$ranks" "$paraxis" run "$deck" "${probe_args[@]}" --out "$tmp/probe" 2>&1)"; then
    say "NOTE: '$mpiexec -n $ranks paraxis run tiny.yaml ${probe_args[*]}' fails outside Slurm:"
    echo "$probe" | grep -m 3 -i 'error' | sed 's/^/    /'
    say "NOTE: falling back to 1 rank with train.steps=3 (set PARAXIS_SLURM_RANKS/PARAXIS_SLURM_SET once the build runs $ranks ranks)"
    ranks=1
    sets="train.steps=3"
  fi
  t=$SECONDS
  id="$(submit "$ranks" "$deck" "$sets")" || { say "FAIL: sbatch refused the job"; exit 1; }
  say "submitted job $id: $ranks rank(s), --set $sets, launcher ${PARAXIS_SLURM_LAUNCHER:-srun}"
  state="$(wait_job "$id")"
  exit_code="$(job_field "$id" ExitCode)"
  say "job $id: $state $exit_code after $((SECONDS - t)) s"
  out="$tmp/work/runs/paraxis-cpu-$id"
  log="$tmp/work/paraxis-cpu-$id.out"
  fail=0
  [ "$state" = COMPLETED ] && [ "$exit_code" = "0:0" ] || { say "FAIL: expected COMPLETED 0:0"; fail=1; }
  if ! python3 - "$out/summary.json" "$ranks" <<'PY'
import json, sys
path, ranks = sys.argv[1], int(sys.argv[2])
s = json.load(open(path))
assert s.get("schema") == "paraxis.summary/2", s.get("schema")
p = s["points"][0]
assert p["status"] == "ok", p["status"]
world = p.get("grid", {}).get("world")
assert world in (None, ranks), f"grid.world {world} != {ranks}"
print(f"summary.json: status ok, {len(p['steps'])} steps, final loss {p['steps'][-1]['loss']:.6f}")
PY
  then
    say "FAIL: $out/summary.json missing or not ok"; ls -la "$out" 2>&1; fail=1
  fi
  grep -q "^exit_status=0$" "$out/job.txt" 2>/dev/null || { say "FAIL: job.txt has no exit_status=0"; fail=1; }
  [ -f "$out/report.md" ] && [ -f "$out/report.json" ] ||
    { say "FAIL: the job wrote no report (report.md, report.json) next to its results"; fail=1; }
  grep -q "loss" "$log" 2>/dev/null || { say "FAIL: the job's output $log shows no training steps"; fail=1; }
  if [ "$ranks" = 1 ] && [ "${PARAXIS_SLURM_RANKS:-2}" != 1 ]; then
    # Fallback: the launcher still has to give MPI a world of 2. A single-rank build rejects a
    # 2-rank run of the plain deck naming the rank count, which it can only know from MPI.
    id2="$(submit 2 "$deck" "train.steps=3")" || { say "FAIL: sbatch refused the 2-rank job"; exit 1; }
    state2="$(wait_job "$id2")"
    if grep -q "has 2 ranks" "$tmp/work/paraxis-cpu-$id2.out" 2>/dev/null; then
      say "launcher check: job $id2 ($state2) ran 2 ranks in one MPI world"
    else
      say "FAIL: launcher check: job $id2 ($state2) did not report a 2-rank MPI world"; fail=1
    fi
  fi
  [ $fail -eq 0 ] && say "PASS"
  exit $fail
fi

if [ "$case_name" = restart ]; then
  deck="$source_dir/inputs/tiny.yaml"
  common="parallel.dp=2 parallel.zero=1 train.precision=fp64 train.steps=6 hardware.calibrate=false output.trace=false checkpoint.every=2"
  ref_args=()
  for kv in $common; do ref_args+=(--set "$kv"); done
  # The uninterrupted run, outside Slurm.
  if ! timeout 120 "$mpiexec" -n 2 "$paraxis" run "$deck" "${ref_args[@]}" \
       --set "checkpoint.dir=$tmp/ref-ckpt" --out "$tmp/ref" > "$tmp/ref.log" 2>&1; then
    say "FAIL: the uninterrupted run failed outside Slurm"; tail -n 5 "$tmp/ref.log"; exit 1
  fi
  t=$SECONDS
  id="$(sbatch --parsable --chdir="$tmp/work" --ntasks=2 --cpus-per-task=1 \
    --output="$tmp/work/paraxis-restart-%j.out" \
    --export="ALL,$tag,PARAXIS_EXE=$paraxis,PARAXIS_DECK=$deck,PARAXIS_SET=$common,PARAXIS_FIRST_SET=fault.dead_rank.rank=1 fault.dead_rank.step=4,PARAXIS_HOME=$source_dir,PARAXIS_RESULTS=$tmp/work/runs,PARAXIS_CHECKPOINTS=$tmp/work/ckpt,PARAXIS_RETRIES=2,PARAXIS_LAUNCHER=${PARAXIS_SLURM_LAUNCHER:-srun}" \
    "$source_dir/slurm/restart.sbatch")" || { say "FAIL: sbatch refused the job"; exit 1; }
  say "submitted job $id: restart.sbatch, rank 1 killed before step 4 in the first attempt"
  state="$(wait_job "$id")"
  exit_code="$(job_field "$id" ExitCode)"
  say "job $id: $state $exit_code after $((SECONDS - t)) s"
  out="$tmp/work/runs/paraxis-restart-$id"
  fail=0
  [ "$state" = COMPLETED ] && [ "$exit_code" = "0:0" ] || { say "FAIL: expected COMPLETED 0:0"; fail=1; }
  cat "$out/job.txt" 2>/dev/null | sed 's/^/    /'
  grep -q "^attempt=0 exit_status=[1-9]" "$out/job.txt" 2>/dev/null &&
    grep -q "^attempt=1 exit_status=0 resumed=2" "$out/job.txt" 2>/dev/null ||
    { say "FAIL: expected a failed attempt 0 and a resumed attempt 1 that ended 0"; fail=1; }
  if ! python3 - "$tmp/ref/summary.json" "$out/attempt-1/summary.json" \
       "$tmp/ref-ckpt/step-6/index.json" "$tmp/work/ckpt/step-6/index.json" <<'PY'
import json, sys
ref, got = (json.load(open(p))["points"][0] for p in sys.argv[1:3])
assert got["resumed"]["step"] == 4, got["resumed"]
assert [s["step"] for s in got["steps"]] == [4, 5], [s["step"] for s in got["steps"]]
assert ref["steps"][-1]["loss"] == got["steps"][-1]["loss"], (ref["steps"][-1], got["steps"][-1])
def sums(path):
    idx = json.load(open(path))
    return {t["name"]: [s["checksum"] for s in t["shards"]] for t in idx["tensors"]}
a, b = sums(sys.argv[3]), sums(sys.argv[4])
assert a == b, "the final checkpoints differ: " + str([k for k in a if a[k] != b.get(k)][:5])
print("restarted run: final loss %r and %d tensors of step-6 bitwise the uninterrupted run's"
      % (got["steps"][-1]["loss"], len(a)))
PY
  then
    say "FAIL: the restarted run differs from the uninterrupted one"; fail=1
  fi
  [ $fail -eq 0 ] && say "PASS"
  exit $fail
fi

# case fail: a deck with an unknown key must fail the job, visibly.
bad="$tmp/work/bad.yaml"
printf 'model: {vocab: 128, no_such_key: 3}\ntrain: {steps: 2}\n' > "$bad"
t=$SECONDS
id="$(submit 1 "$bad" "")" || { say "FAIL: sbatch refused the job"; exit 1; }
say "submitted job $id with a bad deck"
state="$(wait_job "$id")"
exit_code="$(job_field "$id" ExitCode)"
say "job $id: $state $exit_code after $((SECONDS - t)) s (scontrol show job)"
fail=0
[ "$state" = FAILED ] || { say "FAIL: expected JobState FAILED, got $state"; fail=1; }
case "$exit_code" in 0:* | "") say "FAIL: expected a non-zero exit code, got '$exit_code'"; fail=1 ;; esac
# slurmctld's job completion log records the same.
for i in $(seq 20); do grep -q "JobId=$id " "$tmp/log/jobcomp.txt" 2>/dev/null && break; sleep 0.25; done
comp="$(grep "JobId=$id " "$tmp/log/jobcomp.txt" 2>/dev/null)"
say "jobcomp: $(echo "$comp" | tr ' ' '\n' | grep -E '^(JobState|ExitCode)=' | tr '\n' ' ')"
echo "$comp" | grep -q "JobState=FAILED" || { say "FAIL: jobcomp log has no JobState=FAILED for $id"; fail=1; }
grep -q "no_such_key" "$tmp/work/paraxis-cpu-$id.out" 2>/dev/null ||
  { say "FAIL: the job's output does not name the bad key"; fail=1; }
[ $fail -eq 0 ] && say "PASS"
exit $fail
