#!/usr/bin/env bash
# Runs, lineages, the lock and non-finite saves through `paraxis run` (issue 29,
# docs/checkpoint.md "Runs, lineages and the lock"), on inputs/tiny.yaml in fp64. Each case fails
# on the code before the issue. Usage: test_checkpoint_lineage.sh PARAXIS MPIEXEC INPUTS CASE
#   two_runs    2 ranks: a second fresh run into A's checkpoint.dir is refused (exit 2, one
#               message naming the folder, A's run and how to proceed), A's checkpoints untouched;
#               A's --resume latest continues its lineage (parent recorded) and prunes only it.
#   concurrent  A (2 ranks) hangs after saving step-2, holding the lock; B, even a resume of A's
#               latest, is refused at once naming A's run and pid; once A is killed its stale lock
#               is taken over (said so) and the resume runs.
#   force       --out X --force with another run's checkpoints in X/checkpoints: refused before
#               anything is removed; with --new-lineage it writes beside them (step-<N>-<tag>).
#   rewind      the issue's case: A saved step-2..10 (keep 5); a resume from step-4 with another
#               train.lr is refused (it would fork A's lineage), with --new-lineage it runs (lr
#               warned and recorded), keeps step-4 and A's step-6..10, prunes only its own; a
#               micro_batch change of this MoE model is refused.
#   new_lineage two fresh lineages in one folder: each prunes its own; without `latest` a resume
#               does not fall back to the other run's newest but asks for the folder.
#   upgrade     checkpoints of an older paraxis (index version 1): a fresh run beside them refused;
#               --resume latest from them starts a lineage and prunes none of them.
#   non_finite  train.adam_eps=0 (2 ranks, ZeRO-1): step-1's NaN state is not committed, nothing is
#               published, the point is diverged; a resume with adam_eps=0 from a finite step-2
#               keeps step-2 as latest.
set -euo pipefail
paraxis=$1 mpiexec=$2 inputs=$3 case=$4
out=$(mktemp -d)
apid=
cleanup() {
  local rc=$?
  if [ -n "$apid" ]; then kill -TERM "$apid" 2>/dev/null; wait "$apid" 2>/dev/null || true; fi
  rm -rf "$out"
  exit $rc
}
trap cleanup EXIT
export OPENBLAS_NUM_THREADS=1
ck=$out/ckpt
common=(--set train.precision=fp64 --set hardware.calibrate=false --set output.trace=false)
fail() { echo "FAIL: $*"; exit 1; }
run1() { "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" "$@"; }
run2() { "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 "$@"; }
# expect CODE LOG cmd...: runs cmd, output to LOG, and checks the exit status.
expect() {
  local want=$1 log=$2 rc
  shift 2
  set +e
  "$@" > "$log" 2>&1
  rc=$?
  set -e
  [ "$rc" -eq "$want" ] || { cat "$log"; fail "exit $rc, expected $want: $*"; }
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
run_id() { json "$1/summary.json" "d['provenance'].get('run_id', '')"; }
sums() { (cd "$1" && find . -name index.json | sort | xargs md5sum); }
ls_ck() { (cd "$1" && ls -d step-* | sort -V | tr '\n' ' '); }
one_error() {  # the log holds exactly one error line and it says each of the words given
  local log=$1
  shift
  [ "$(grep -c 'paraxis: error' "$log")" -eq 1 ] || { cat "$log"; fail "not one error line"; }
  for w in "$@"; do grep 'paraxis: error' "$log" | grep -qF -- "$w" || { cat "$log"; fail "no '$w'"; }; done
  ! grep -q "step  *1/" "$log" || fail "a step was trained: $log"
}

case $case in
  two_runs)
    expect 0 "$out/a.log" run2 --set train.steps=6 --set checkpoint.every=2 --set checkpoint.keep=3 \
      --set "checkpoint.dir=$ck" --out "$out/a"
    a=$(run_id "$out/a")
    [ "$(ls_ck "$ck")" = "step-2 step-4 step-6 " ] || fail "A's checkpoints: $(ls_ck "$ck")"
    sums "$ck" > "$out/before.txt"
    expect 2 "$out/b.log" run2 --set train.steps=6 --set checkpoint.every=2 \
      --set "checkpoint.dir=$ck" --out "$out/b"
    one_error "$out/b.log" "$ck" "run $a" "--resume" "checkpoint.dir" "--new-lineage"
    sums "$ck" | diff "$out/before.txt" - || fail "B changed A's checkpoints"
    [ "$(cat "$ck/latest")" = step-6 ] && [ ! -e "$ck/lock" ] || fail "latest or lock after B"
    [ ! -e "$out/b/summary.json" ] || fail "B wrote results"
    expect 0 "$out/a2.log" run2 --set train.steps=8 --set checkpoint.every=2 --set checkpoint.keep=3 \
      --set "checkpoint.dir=$ck" --resume latest --out "$out/a2"
    [ "$(ls_ck "$ck")" = "step-4 step-6 step-8 " ] || fail "after the resume: $(ls_ck "$ck")"
    python3 - "$out/a2/summary.json" "$ck/step-8/index.json" "$a" <<'PY' || fail "lineage records"
import json, sys
s, idx, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
run = s["provenance"]["run_id"]
assert run != a, run
p = s["points"][0]
assert p["resumed"]["step"] == 6, p["resumed"]
want = {"id": a, "run": run, "parent": {"run": a, "step": 6}}
assert p["lineage"] == want, p["lineage"]
assert idx["version"] == 2 and idx["lineage"] == want, idx["lineage"]
print("two_runs: B refused; A's lineage continued by", run)
PY
    ;;
  concurrent)
    "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 \
      --set train.steps=8 --set checkpoint.every=2 --set "checkpoint.dir=$ck" \
      --set fault.hang.rank=1 --set fault.hang.step=3 --set comm.timeout_s=280 \
      --out "$out/a" > "$out/a.log" 2>&1 &
    apid=$!
    for _ in $(seq 1 240); do
      [ -f "$ck/step-2/index.json" ] && grep -q "stops responding" "$out/a.log" && break
      sleep 0.5
    done
    [ -f "$ck/step-2/index.json" ] || { cat "$out/a.log"; fail "A did not save step-2"; }
    expect 2 "$out/b.log" run1 --set train.steps=8 --set checkpoint.every=2 \
      --set "checkpoint.dir=$ck" --out "$out/b"
    a=$(json "$ck/lock" "d['run']")
    pid=$(json "$ck/lock" "d['pid']")
    one_error "$out/b.log" "locked by run $a (pid $pid on host" "$ck"
    expect 2 "$out/c.log" run1 --set train.steps=8 --set checkpoint.every=2 \
      --set "checkpoint.dir=$ck" --resume latest --out "$out/c"
    one_error "$out/c.log" "locked by run $a (pid $pid on host"
    [ -f "$ck/step-2/index.json" ] && [ "$(json "$ck/lock" "d['pid']")" = "$pid" ] ||
      fail "A's checkpoint or lock changed"
    kill -TERM "$apid"
    wait "$apid" 2>/dev/null || true
    apid=
    if [ -e "$ck/lock" ]; then  # left by the killed run: taken over, and said so
      expect 0 "$out/d.log" run1 --set train.steps=4 --set checkpoint.every=2 \
        --set "checkpoint.dir=$ck" --resume latest --out "$out/d"
      grep -q "took over the stale lock of run $a" "$out/d.log" || { cat "$out/d.log"; fail "no take-over note"; }
      echo "the killed run's lock was taken over"
    else
      expect 0 "$out/d.log" run1 --set train.steps=4 --set checkpoint.every=2 \
        --set "checkpoint.dir=$ck" --resume latest --out "$out/d"
    fi
    [ "$(json "$out/d/summary.json" "d['points'][0]['resumed']['step']")" = 2 ] || fail "d's resume"
    [ ! -e "$ck/lock" ] || fail "the lock outlived its run"
    echo "concurrent: refused naming run $a pid $pid; resumed after it ended" ;;
  force)
    expect 0 "$out/a.log" run1 --set train.steps=4 --set checkpoint.every=2 --out "$out/x"
    a=$(run_id "$out/x")
    sums "$out/x/checkpoints" > "$out/before.txt"
    expect 2 "$out/b.log" run1 --set train.steps=4 --set checkpoint.every=2 --out "$out/x" --force
    one_error "$out/b.log" "run $a" "--force removes earlier results in --out, never checkpoints"
    [ "$(run_id "$out/x")" = "$a" ] || fail "A's results were removed by a refused run"
    expect 0 "$out/c.log" run1 --set train.steps=4 --set checkpoint.every=2 --out "$out/x" --force \
      --new-lineage
    c=$(run_id "$out/x")
    tag=${c: -8}
    sums "$out/x/checkpoints" | grep -v -- "-$tag/" | diff "$out/before.txt" - ||
      fail "--new-lineage changed A's checkpoints"
    [ "$(ls_ck "$out/x/checkpoints")" = "step-2 step-2-$tag step-4 step-4-$tag " ] ||
      fail "beside A's: $(ls_ck "$out/x/checkpoints")"
    [ "$(cat "$out/x/checkpoints/latest")" = "step-4-$tag" ] || fail "latest: $(cat "$out/x/checkpoints/latest")"
    echo "force: refused before removing anything; --new-lineage wrote beside A" ;;
  rewind)
    expect 0 "$out/a.log" run1 --set train.steps=10 --set checkpoint.every=2 --set checkpoint.keep=5 \
      --set "checkpoint.dir=$ck" --out "$out/a"
    a=$(run_id "$out/a")
    sums "$ck" > "$out/before.txt"
    b=(--set train.steps=10 --set checkpoint.every=2 --set checkpoint.keep=2 --set train.lr=1e-3
       --set "checkpoint.dir=$ck" --resume "$ck/step-4")
    expect 2 "$out/b.log" run1 "${b[@]}" --out "$out/b"
    one_error "$out/b.log" "step-6 (run $a)" "after step 4" "--new-lineage"
    sums "$ck" | diff "$out/before.txt" - || fail "the refused rewind changed A's checkpoints"
    expect 0 "$out/b2.log" run1 "${b[@]}" --new-lineage --out "$out/b2"
    grep -q "warning: resuming .*train.lr = 0.001 (it was written with 0.003)" "$out/b2.log" ||
      { cat "$out/b2.log"; fail "the lr change was not warned"; }
    bid=$(run_id "$out/b2")
    tag=${bid: -8}
    sums "$ck" | grep -v -- "-$tag/" | diff "$out/before.txt" - || fail "B pruned A's checkpoints"
    [ "$(ls_ck "$ck")" = "step-2 step-4 step-6 step-8 step-8-$tag step-10 step-10-$tag " ] ||
      fail "after B: $(ls_ck "$ck")"
    python3 - "$out/b2/summary.json" "$a" <<'PY' || fail "B's records"
import json, sys
p, a = json.load(open(sys.argv[1]))["points"][0], sys.argv[2]
assert p["resumed"]["changed"]["train.lr"] == {"checkpoint": 0.003, "now": 0.001, "change": "warned"}, p["resumed"]
assert p["lineage"]["parent"] == {"run": a, "step": 4} and p["lineage"]["id"] != a, p["lineage"]
PY
    # --resume latest is B's newest, and B's lineage goes on pruning only itself.
    expect 0 "$out/c.log" run1 --set train.steps=12 --set checkpoint.every=2 --set checkpoint.keep=2 \
      --set train.lr=1e-3 --set "checkpoint.dir=$ck" --resume latest --out "$out/c"
    [ "$(json "$out/c/summary.json" "d['points'][0]['resumed']['folder'].split('/')[-1]")" = "step-10-$tag" ] ||
      fail "latest was not B's newest"
    [ "$(ls_ck "$ck")" = "step-2 step-4 step-6 step-8 step-10 step-10-$tag step-12 " ] ||
      fail "after C: $(ls_ck "$ck")"
    expect 2 "$out/d.log" run1 --set train.steps=12 --set train.micro_batch=2 --resume "$ck/step-10" \
      --out "$out/d"
    one_error "$out/d.log" "train.micro_batch" "auxiliary loss"
    echo "rewind: refused without --new-lineage; beside A with it, step-4 and A's kept" ;;
  new_lineage)
    expect 0 "$out/a.log" run1 --set train.steps=4 --set checkpoint.every=2 --set checkpoint.keep=1 \
      --set "checkpoint.dir=$ck" --out "$out/a"
    expect 0 "$out/b.log" run1 --set train.steps=4 --set checkpoint.every=2 --set checkpoint.keep=1 \
      --set "checkpoint.dir=$ck" --new-lineage --out "$out/b"
    tag=$(run_id "$out/b")
    tag=${tag: -8}
    [ "$(ls_ck "$ck")" = "step-4 step-4-$tag " ] || fail "two lineages, keep 1: $(ls_ck "$ck")"
    rm "$ck/latest"
    expect 2 "$out/c.log" run1 --set train.steps=6 --set "checkpoint.dir=$ck" --resume latest \
      --out "$out/c"
    one_error "$out/c.log" "several runs" "give the step folder"
    expect 0 "$out/d.log" run1 --set train.steps=6 --resume "$ck/step-4-$tag" --out "$out/d"
    echo "new_lineage: each lineage kept its own; no silent fall-back to another run's" ;;
  upgrade)
    expect 0 "$out/a.log" run1 --set train.steps=4 --set checkpoint.every=2 --set checkpoint.keep=3 \
      --set "checkpoint.dir=$ck" --out "$out/a"
    for s in 2 4; do  # as an older paraxis wrote them: index version 1, no lineage
      python3 - "$ck/step-$s/index.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["version"] = 1
d.pop("lineage", None)
json.dump(d, open(sys.argv[1], "w"))
PY
    done
    expect 2 "$out/b.log" run1 --set train.steps=4 --set checkpoint.every=2 --set "checkpoint.dir=$ck" \
      --out "$out/b"
    one_error "$out/b.log" "step-4 (no run recorded: written by an older paraxis)"
    expect 0 "$out/c.log" run1 --set train.steps=6 --set checkpoint.every=2 --set checkpoint.keep=1 \
      --set "checkpoint.dir=$ck" --resume latest --out "$out/c"
    [ "$(ls_ck "$ck")" = "step-2 step-4 step-6 " ] || fail "after the upgrade: $(ls_ck "$ck")"
    python3 - "$ck/step-6/index.json" "$(run_id "$out/c")" <<'PY' || fail "the upgraded lineage"
import json, sys
l = json.load(open(sys.argv[1]))["lineage"]
assert l == {"id": sys.argv[2], "run": sys.argv[2], "parent": {"run": "", "step": 4}}, l
PY
    echo "upgrade: a fresh run refused beside old checkpoints; a resume of them starts a lineage, prunes none" ;;
  non_finite)
    expect 1 "$out/a.log" run2 --set parallel.zero=1 --set train.steps=3 --set checkpoint.every=1 \
      --set train.adam_eps=0 --set "checkpoint.dir=$ck" --out "$out/a"
    grep -q "checkpoint after step 1 not committed: its state is not finite (rank [01]: [0-9]* non-finite values, the first in" "$out/a.log" ||
      { cat "$out/a.log"; fail "the non-finite save was not reported"; }
    [ ! -e "$ck/latest" ] && [ -z "$(ls -d "$ck"/step-* 2>/dev/null)" ] || fail "published: $(ls "$ck")"
    [ "$(json "$out/a/summary.json" "d['points'][0]['status'].startswith('diverged')")" = True ] ||
      fail "status: $(json "$out/a/summary.json" "d['points'][0]['status']")"
    # A finite step-2, then a resume that goes non-finite: step-2 stays latest.
    expect 0 "$out/b.log" run1 --set train.steps=2 --set checkpoint.every=1 --set checkpoint.keep=3 \
      --set "checkpoint.dir=$out/ck2" --out "$out/b"
    expect 1 "$out/c.log" run1 --set train.steps=4 --set checkpoint.every=1 --set checkpoint.keep=3 \
      --set train.adam_eps=0 --set "checkpoint.dir=$out/ck2" --resume latest --out "$out/c"
    grep -q "not committed: its state is not finite.*latest still names step-2" "$out/c.log" ||
      { cat "$out/c.log"; fail "the resumed run's non-finite save"; }
    [ "$(cat "$out/ck2/latest")" = step-2 ] && [ "$(ls_ck "$out/ck2")" = "step-1 step-2 " ] ||
      fail "after the non-finite save: $(ls_ck "$out/ck2") latest $(cat "$out/ck2/latest")"
    expect 0 "$out/d.log" run1 --set train.steps=3 --set "checkpoint.dir=$out/ck2" --resume latest \
      --out "$out/d"
    echo "non_finite: nothing published from a NaN state; the last finite checkpoint kept" ;;
  *) echo "unknown case $case" >&2; exit 2 ;;
esac
