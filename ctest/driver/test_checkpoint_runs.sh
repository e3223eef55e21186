#!/usr/bin/env bash
# Checkpoint and restart through `paraxis run` (issue 16, docs/checkpoint.md), on inputs/tiny.yaml
# in fp64. Usage: test_checkpoint_runs.sh PARAXIS MPIEXEC INPUTS CASE
#   resume    2 ranks (dp2 ZeRO-1): 6 steps with a checkpoint every 2 (keep 2: step-2 removed),
#             then --resume latest (step-6 would leave nothing: refused), --resume step-4 in the
#             same layout (steps 5-6 bitwise the uninterrupted run's), under tp2 and on one rank
#             (within 1e-12 of it).
#   async     checkpoint.async: the same checkpoints as the synchronous run (every shard's checksum
#             of step-4 and step-6), the save's staging, exposed time and staged bytes recorded,
#             the fsync and commit off the training thread (its stall only its own spans), and a
#             resume from the asynchronous step-4 bitwise like the uninterrupted run.
#   auto      checkpoint.every: auto with a device MTBF of 1.8 s: a save after the first step, then
#             every N steps counted from it (steps 1, 1 + N, 1 + 2N, ...), N = Daly's interval
#             (recomputed here from the recorded cost, step and MTBF) over the step time; the cost
#             C is the measuring save's stalled time (exposed_s).
#   auto_async the same with checkpoint.async: the measuring save is asynchronous and C its stall
#   dead_save rank 1 killed while step-4 is written (fault.dead_rank at: checkpoint): step-2 is
#             complete, latest names it, the unfinished folder is ignored; --resume latest
#             continues from step 2 bitwise like the uninterrupted run.
#   dead_save_async  the same with checkpoint.async: rank 1 dies after its writing thread wrote
#             and fsynced step-4's data file, before the commit
#   integrity a checkpoint's data file corrupted, truncated or removed, its index removed, or a
#             deck with another model: --resume refused (exit 2) naming the file, tensor or key,
#             and nothing trained; checkpoint.every beyond train.steps is a deck error.
set -euo pipefail
paraxis=$1 mpiexec=$2 inputs=$3 case=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1
common=(--set train.steps=6 --set train.precision=fp64 --set hardware.calibrate=false
        --set output.trace=false --set "checkpoint.dir=$out/ckpt")
losses() {  # the losses of summary.json's steps, one "step loss" per line (17 digits)
  python3 -c "import json,sys
for s in json.load(open(sys.argv[1]))['points'][0]['steps']: print(s['step'], repr(s['loss']))" "$1"
}
fail() { echo "FAIL: $*"; exit 1; }

"$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 \
  --set parallel.zero=1 --set checkpoint.every=2 --out "$out/full" > "$out/full.log" 2>&1 ||
  { cat "$out/full.log"; fail "the uninterrupted run"; }
[ "$(cat "$out/ckpt/latest")" = step-6 ] || fail "latest is not step-6: $(cat "$out/ckpt/latest")"
[ -d "$out/ckpt/step-4" ] && [ ! -e "$out/ckpt/step-2" ] || fail "keep 2: $(ls "$out/ckpt")"
losses "$out/full/summary.json" > "$out/full.txt"

case $case in
  resume)
    set +e
    "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 \
      --resume latest --out "$out/none" > "$out/none.log" 2>&1
    rc=$?
    set -e
    [ $rc -ne 0 ] && grep -q "nothing is left to train" "$out/none.log" ||
      { cat "$out/none.log"; fail "resuming after the last step was not refused"; }
    tail -n 2 "$out/full.txt" > "$out/want.txt"
    # The same layout: bitwise.
    "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 \
      --set parallel.zero=1 --resume "$out/ckpt/step-4" --out "$out/same" > "$out/same.log" 2>&1 ||
      { cat "$out/same.log"; fail "resume in the same layout"; }
    losses "$out/same/summary.json" > "$out/same.txt"
    diff "$out/want.txt" "$out/same.txt" || fail "the same layout's steps 5-6 differ"
    python3 - "$out/same/summary.json" <<'PY' || fail "the resumed point's record"
import json, sys
p = json.load(open(sys.argv[1]))["points"][0]
r = p["resumed"]
assert r["step"] == 4 and r["folder"].endswith("step-4"), r
assert r["bytes"]["min"] > 0 and r["read_s"]["max"] > 0, r
assert r["saved_grid"]["parallel"]["dp"] == 2, r
PY
    python3 - "$out/full/points.csv" "$out/same/points.csv" <<'PY' || fail "points.csv"
import csv, sys
full, same = (next(csv.DictReader(open(p))) for p in sys.argv[1:3])
assert full["checkpoints"] == "3" and float(full["checkpoint_bytes_per_rank_max"]) > 0, full
assert full["resumed_step"] == "-1" and same["resumed_step"] == "4", same
assert float(same["restart_s"]) > 0, same
PY
    # Another layout (tp2), and one rank: the same to 1e-12.
    "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.tp=2 \
      --resume "$out/ckpt/step-4" --out "$out/tp" > "$out/tp.log" 2>&1 ||
      { cat "$out/tp.log"; fail "resume under tp2"; }
    "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --resume "$out/ckpt/step-4" \
      --out "$out/one" > "$out/one.log" 2>&1 || { cat "$out/one.log"; fail "resume on one rank"; }
    for run in tp one; do
      losses "$out/$run/summary.json" > "$out/$run.txt"
      python3 - "$out/want.txt" "$out/$run.txt" "$run" <<'PY' || fail "$run differs"
import sys
want = [l.split() for l in open(sys.argv[1])]
got = [l.split() for l in open(sys.argv[2])]
assert [w[0] for w in want] == [g[0] for g in got], (want, got)
for w, g in zip(want, got):
    a, b = float(w[1]), float(g[1])
    assert abs(a - b) <= 1e-12 * abs(a), (sys.argv[3], w, g)
print(sys.argv[3], "matches the uninterrupted run within 1e-12")
PY
    done
    echo "resume: bitwise in the same layout, within 1e-12 under tp2 and on one rank" ;;
  async)
    "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 \
      --set parallel.zero=1 --set checkpoint.every=2 --set checkpoint.async=true \
      --set "checkpoint.dir=$out/async" --out "$out/async-run" > "$out/async.log" 2>&1 ||
      { cat "$out/async.log"; fail "the asynchronous run"; }
    losses "$out/async-run/summary.json" | diff "$out/full.txt" - || fail "async changed the losses"
    python3 - "$out/ckpt" "$out/async" "$out/async-run/summary.json" <<'PY' || fail "async checkpoints"
import json, sys
def sums(root, step):
    idx = json.load(open("%s/step-%d/index.json" % (root, step)))
    return {t["name"]: [s["checksum"] for s in t["shards"]] for t in idx["tensors"]}
for step in (4, 6):
    assert sums(sys.argv[1], step) == sums(sys.argv[2], step), "step-%d differs" % step
saves = json.load(open(sys.argv[3]))["points"][0]["checkpoints"]
assert [c["step"] for c in saves] == [2, 4, 6], saves
for c in saves:
    assert c["async"] is True and c["staged_bytes"]["min"] > 0, c
    assert c["exposed_s"]["max"] >= c["staging_s"]["max"] > 0, c
    # The fsync and the commit's publication ran off the training thread, and the stall is the
    # sum of the training thread's own spans (staging, polls, the waits in finish) only.
    assert c["commit_off_training_thread"] is True, c
    parts = sum(c[k]["mean"] for k in ("staging_s", "poll_s", "join_wait_s", "commit_wait_s"))
    assert abs(c["exposed_s"]["mean"] - parts) <= 1e-9 * max(1.0, parts), (c, parts)
print("async: step-4 and step-6 identical to the synchronous run's; exposed %.4f s of %.4f s"
      % (saves[1]["exposed_s"]["max"], saves[1]["total_s"]))
PY
    "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 \
      --set parallel.zero=1 --resume "$out/async/step-4" --out "$out/async-resumed" \
      > "$out/async-resumed.log" 2>&1 || { cat "$out/async-resumed.log"; fail "resume async"; }
    losses "$out/async-resumed/summary.json" | diff <(tail -n 2 "$out/full.txt") - ||
      fail "the resume from the asynchronous checkpoint differs" ;;
  auto|auto_async)
    async=false
    [ "$case" = auto_async ] && async=true
    "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set train.steps=12 \
      --set parallel.dp=2 --set checkpoint.every=auto --set checkpoint.device_mtbf_h=0.0005 \
      --set checkpoint.keep=20 --set "checkpoint.dir=$out/auto" --out "$out/auto-run" \
      --set checkpoint.async=$async \
      > "$out/auto.log" 2>&1 || { cat "$out/auto.log"; fail "checkpoint.every: auto"; }
    python3 - "$out/auto-run/summary.json" "$async" <<'PY' || { cat "$out/auto.log"; fail "auto cadence"; }
import json, math, sys
p = json.load(open(sys.argv[1]))["points"][0]
a = p["checkpoint_auto"]
assert p["config"]["checkpoint"]["every"] == "auto", p["config"]["checkpoint"]
c, m = a["checkpoint_s"], 0.0005 * 3600 / 2  # 2 ranks
first = p["checkpoints"][0]  # the measuring save, in the mode in use: C is its stall
assert first["async"] == (sys.argv[2] == "true") and c == first["exposed_s"]["max"], (first, a)
assert abs(a["system_mtbf_s"] - m) < 1e-9 * m, a
# Daly 2006, C < 2M: tau = sqrt(2CM) (1 + sqrt(C/2M)/3 + (C/2M)/9) - C
x = c / (2 * m)
tau = math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c if c < 2 * m else m
assert abs(a["daly_interval_s"] - tau) < 1e-9 * tau, (a, tau)
n = max(1, round(tau / a["step_s"]))
assert a["every"] == n, (a, n)
want = list(range(1, 13, n))  # counted from the first save, not from step 0
got = [s["step"] for s in p["checkpoints"]]
if sys.argv[2] == "true":  # the cadence is known once the measuring save committed: then on grid
    assert got[0] == 1 and got[1:] == want[len(want) - len(got) + 1:], (got, want)
else:
    assert got == want, (got, want)
print(f"auto (async {sys.argv[2]}): C %.4f s, step %.4f s, Daly %.3f s -> every %d steps; saved after %s" %
      (c, a["step_s"], tau, n, got))
PY
    ;;
  dead_save|dead_save_async)
    async=()  # asynchronous: killed between staging (its thread wrote and synced) and commit
    [ "$case" = dead_save_async ] && async=(--set checkpoint.async=true)
    set +e
    "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 \
      --set parallel.zero=1 --set checkpoint.every=2 --set "checkpoint.dir=$out/dead" "${async[@]}" \
      --set fault.dead_rank.rank=1 --set fault.dead_rank.step=3 --set fault.dead_rank.at=checkpoint \
      --out "$out/died" > "$out/died.log" 2>&1
    rc=$?
    set -e
    [ $rc -ne 0 ] && grep -q "dies while checkpoint step-4 is written" "$out/died.log" ||
      { cat "$out/died.log"; fail "rank 1 did not die during step-4's save (exit $rc)"; }
    [ "$(cat "$out/dead/latest")" = step-2 ] && [ -f "$out/dead/step-2/index.json" ] &&
      [ ! -e "$out/dead/step-4" ] || fail "after the failed save: $(ls "$out/dead") latest=$(cat "$out/dead/latest")"
    "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 \
      --set parallel.zero=1 --set "checkpoint.dir=$out/dead" --resume latest --out "$out/after" \
      > "$out/after.log" 2>&1 || { cat "$out/after.log"; fail "resume after the failed save"; }
    losses "$out/after/summary.json" > "$out/after.txt"
    tail -n 4 "$out/full.txt" | diff - "$out/after.txt" || fail "steps 3-6 after the failed save differ"
    echo "$case: step-2 kept, the unfinished step-4 ignored, steps 3-6 bitwise" ;;
  integrity)
    refused() {  # a resume of folder $1 must exit 2 and say $2
      set +e
      "$mpiexec" -n 2 "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" --set parallel.dp=2 \
        --resume "$1" --out "$out/r$3" "${@:4}" > "$out/r$3.log" 2>&1
      local rc=$?
      set -e
      [ $rc -eq 2 ] || { cat "$out/r$3.log"; fail "case $3: exit $rc, expected 2"; }
      grep -q -- "$2" "$out/r$3.log" || { cat "$out/r$3.log"; fail "case $3: no '$2'"; }
      grep -q "step  *5/6" "$out/r$3.log" && fail "case $3: a step was trained" || true
      echo "case $3 refused: $(grep 'paraxis: error' "$out/r$3.log" | head -n 1)"
    }
    cp -r "$out/ckpt/step-4" "$out/c1"
    python3 - "$out/c1/rank-1.bin" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(100); b = f.read(1); f.seek(100); f.write(bytes([b[0] ^ 0xFF]))
PY
    refused "$out/c1" "rank-1.bin" 1
    cp -r "$out/ckpt/step-4" "$out/c2"
    truncate -s 1000 "$out/c2/rank-0.bin"
    refused "$out/c2" "rank-0.bin" 2
    cp -r "$out/ckpt/step-4" "$out/c3"
    rm "$out/c3/rank-1.bin"
    refused "$out/c3" "rank-1.bin" 3
    cp -r "$out/ckpt/step-4" "$out/c4"
    rm "$out/c4/index.json"
    refused "$out/c4" "index.json" 4
    refused "$out/ckpt/step-4" "model.hidden" 5 --set model.hidden=32
    set +e
    "$paraxis" check "$inputs/tiny.yaml" --set train.steps=4 --set checkpoint.every=5 \
      > "$out/check.log" 2>&1
    rc=$?
    set -e
    [ $rc -eq 2 ] && grep -q "checkpoint.every" "$out/check.log" ||
      { cat "$out/check.log"; fail "checkpoint.every beyond train.steps was accepted"; }
    set +e
    "$paraxis" check "$inputs/tiny.yaml" --set fault.dead_rank.rank=0 \
      --set fault.dead_rank.at=checkpoint > "$out/check2.log" 2>&1
    rc=$?
    set -e
    [ $rc -eq 2 ] && grep -q "fault.dead_rank.at" "$out/check2.log" ||
      { cat "$out/check2.log"; fail "a death during a checkpoint that is never written was accepted"; }
    set +e
    "$paraxis" check "$inputs/tiny.yaml" --set checkpoint.every=sometimes > "$out/check3.log" 2>&1
    rc=$?
    set -e
    [ $rc -eq 2 ] && grep -q "checkpoint.every.*or auto" "$out/check3.log" ||
      { cat "$out/check3.log"; fail "checkpoint.every: sometimes was accepted"; } ;;
  *) echo "unknown case $case" >&2; exit 2 ;;
esac
