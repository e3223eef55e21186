#!/usr/bin/env bash
# Checkpoint resume against fio's sequential read of the same bytes in the same folder (issue 34,
# docs/checkpoint.md "Measuring"; log: docs/perf-log/2026-12-05-checkpoint.md).
#   tools/checkpoint_bench.sh [BUILD_DIR] [WORK_DIR] [RUNS] [OLD_BUILD_DIR]
#   (defaults: build, /tmp/paraxis-ckpt-bench, 5; OLD_BUILD_DIR: another build's resume of the
#   same checkpoint in each run too, before/after a change)
# For 1 and 2 ranks: saves inputs/checkpoint-bench.yaml's state once (252 MB), then RUNS times,
# alternating: fio reads the checkpoint's own data files (one job per file, --invalidate=1: the
# page cache of those files dropped first), then `paraxis run --resume` of the same folder after
# tools/evict_cache.py dropped the same files' pages (posix_fadvise DONTNEED). Prints one line per
# run (GB/s of both, the load average) and the medians. Run at normal priority on a quiet machine.
set -euo pipefail
build=${1:-build}
work=${2:-/tmp/paraxis-ckpt-bench}
runs=${3:-5}
old=${4:-}
here=$(cd "$(dirname "$0")/.." && pwd)
paraxis="$build/bin/paraxis"
deck="$here/inputs/checkpoint-bench.yaml"
command -v fio > /dev/null || { echo "fio is needed (apt-get install -y fio)" >&2; exit 2; }
mkdir -p "$work"
export OPENBLAS_NUM_THREADS=1
# ONLY=resume or ONLY=async runs one part; NPS="2" the resume on those rank counts only.
[ "${ONLY:-resume}" = resume ] && for np in ${NPS:-1 2}; do
  save="$work/save-np$np"
  rm -rf "$save"
  mpiexec -n $np "$paraxis" run "$deck" --set parallel.dp=$np --out "$save" > "$save.log" 2>&1
  ckpt="$save/checkpoints/step-2"
  files=("$ckpt"/rank-*.bin)
  bytes=$(cat "${files[@]}" | wc -c)
  jobs=()
  for f in "${files[@]}"; do jobs+=(--name="$(basename "$f")" --filename="$f"); done
  fio_rates=() px_rates=() old_rates=()
  for i in $(seq 1 "$runs"); do
    fio_bw=$(fio --rw=read --bs=8M --invalidate=1 --readonly --group_reporting \
               --output-format=json "${jobs[@]}" |
             python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"])')
    python3 "$here/tools/evict_cache.py" "$ckpt" > /dev/null
    out="$work/resume-np$np-$i"
    mpiexec -n $np "$paraxis" run "$deck" --set parallel.dp=$np --set checkpoint.every=0 \
      --resume "$ckpt" --out "$out" --force > "$out.log" 2>&1
    read -r px_s storage verify <<< "$(python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))["points"][0]["resumed"]
print(r["read_s"]["max"], r["storage_s"]["max"], r["verify_s"]["max"])' "$out/summary.json")"
    old_txt=""
    if [ -n "$old" ]; then
      python3 "$here/tools/evict_cache.py" "$ckpt" > /dev/null
      mpiexec -n $np "$old/bin/paraxis" run "$deck" --set parallel.dp=$np --set checkpoint.every=0 \
        --resume "$ckpt" --out "$out-old" --force > "$out-old.log" 2>&1
      old_s=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["points"][0]["resumed"]["read_s"]["max"])' "$out-old/summary.json")
      old_rates+=("$(python3 -c "print($bytes / $old_s)")")
      old_txt=$(python3 -c "print(f'  old build {$bytes/$old_s/1e9:.3f} GB/s ({$old_s:.3f} s)')")
    fi
    px_bw=$(python3 -c "print($bytes / $px_s)")
    fio_rates+=("$fio_bw"); px_rates+=("$px_bw")
    printf 'np=%d run %d: fio %.3f GB/s  resume %.3f GB/s (%.3f s: storage %.3f s, verify %.3f s)  ratio %.2f  load %s\n' \
      "$np" "$i" "$(python3 -c "print($fio_bw/1e9)")" "$(python3 -c "print($px_bw/1e9)")" \
      "$px_s" "$storage" "$verify" "$(python3 -c "print($px_bw/$fio_bw)")" \
      "$(cut -d' ' -f1-3 /proc/loadavg)"
    [ -z "$old_txt" ] || echo "$old_txt"
  done
  python3 - "$np" "$bytes" "${fio_rates[*]}" "${px_rates[*]}" "${old_rates[*]:-}" <<'PY'
import statistics, sys
np_, b = sys.argv[1], int(sys.argv[2])
f = [float(x) for x in sys.argv[3].split()]; p = [float(x) for x in sys.argv[4].split()]
o = [float(x) for x in sys.argv[5].split()]
if o:
    print(f"np={np_} old build: resume median {statistics.median(o)/1e9:.3f} GB/s "
          f"[{min(o)/1e9:.3f}, {max(o)/1e9:.3f}], ratio to fio {statistics.median(o)/statistics.median(f):.2f}")
print(f"np={np_} {b} bytes: fio median {statistics.median(f)/1e9:.3f} GB/s "
      f"[{min(f)/1e9:.3f}, {max(f)/1e9:.3f}], resume median {statistics.median(p)/1e9:.3f} GB/s "
      f"[{min(p)/1e9:.3f}, {max(p)/1e9:.3f}], ratio of medians {statistics.median(p)/statistics.median(f):.2f}")
PY
done

# Asynchronous against synchronous saves on 1 rank (a core left free on a 2-core machine): 7
# steps, a save after steps 2, 4 and 6; RUNS alternating pairs. Stall: a save's exposed_s (the
# first save, which pays for fresh staging pages, left out); step time during a save: the step
# right after each save (summary.json numbers steps from 0, so the one after the save at `step` 2
# is steps[2]: an asynchronous save's write runs behind it) against the step right before it.
# (Until round 5 this compared steps[3, 5] with steps[2, 4, 6], the wrong way round.)
# Staging against the copy bandwidth paraxis-bench-kernels measures (its largest copy baseline,
# its bytes/s counts bytes read + written, as 2 x staged bytes here), taken before each pair.
copy_bw() {
  "$build/bin/paraxis-bench-kernels" --benchmark_filter='^adamw/baseline_copy/28311552/' \
    --benchmark_format=json 2> /dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["benchmarks"][0]["bytes/s"])'
}
[ "${ONLY:-async}" = async ] && for i in $(seq 1 "$runs"); do
  bw=$(copy_bw)
  for mode in false true; do
    out="$work/async-$mode-$i"
    rm -rf "$out"
    mpiexec -n 1 "$paraxis" run "$deck" --set parallel.dp=1 --set train.steps=7 \
      --set checkpoint.every=2 --set checkpoint.async=$mode --set checkpoint.keep=1 \
      --out "$out" > "$out.log" 2>&1
    python3 - "$out/summary.json" "$mode" "$i" "$(cut -d' ' -f1-3 /proc/loadavg)" "$bw" <<'PY'
import json, statistics, sys
p = json.load(open(sys.argv[1]))["points"][0]
st = [c["exposed_s"]["max"] for c in p["checkpoints"][1:]]
t = {s["step"]: s["time_s"] for s in p["steps"]}
saves = [c["step"] for c in p["checkpoints"]]
during = statistics.median([t[s] for s in saves if s in t])
without = statistics.median([t[s - 1] for s in saves if s - 1 in t])
print(f"run {sys.argv[3]} async={sys.argv[2]}: stall median {statistics.median(st):.3f} s "
      f"(saves 2-3: {', '.join(f'{x:.3f}' for x in st)}), step during a save {during:.3f} s, "
      f"without {without:.3f} s, ratio {during / without:.2f}  load {sys.argv[4]}")
if sys.argv[2] == "true":  # staging (saves 2-3) against the kernel bench's copy, read + written
    rate = statistics.median([2 * c["staged_bytes"]["max"] / c["staging_s"]["max"]
                              for c in p["checkpoints"][1:]])
    bw = float(sys.argv[5])
    print(f"  staging {rate / 1e9:.2f} GB/s (2 x staged bytes / staging_s), kernel bench copy "
          f"{bw / 1e9:.2f} GB/s: {rate / bw:.2f} of it; commit off the training thread: "
          f"{all(c.get('commit_off_training_thread') for c in p['checkpoints'])}")
    # What the stall was made of (docs/checkpoint.md, "Asynchronous saves"): the join wait is
    # a write longer than the saves' spacing, the commit wait a commit not done by then.
    parts = lambda k: "/".join(f"{c[k]['max']:.3f}" for c in p["checkpoints"][1:])
    print(f"  saves 2-3: staging {parts('staging_s')} s, join wait {parts('join_wait_s')} s, "
          f"commit wait {parts('commit_wait_s')} s, write {parts('write_s')} s")
PY
  done
done
exit 0
