#!/usr/bin/env bash
# tools/gpu-check.sh: the first-GPU checklist in one command (issue 20, docs/gpu.md). Given a
# Kokkos install, it configures and builds paraxis in its own build folder, runs the test suite
# (what tools/test.sh runs: every test but label slow), a one-rank training run of the tiny deck
# in fp64, fp32 and bf16 with --verify, and short kernel and model benchmarks, then prints one
# summary: each stage's verdict, time and log, the GEMM and model-step rates, the device and the
# Kokkos backend. Exit 0 when every stage passed, 1 when one failed, 2 on a bad argument.
#
#   tools/gpu-check.sh [options] [KOKKOS_ROOT]       (or KOKKOS_ROOT in the environment)
#
# Options:
#   --build-dir DIR     build folder (default: build-gpu-check/ in the checkout; reused if there)
#   --log-dir DIR       logs, results and summary.txt (default: BUILD_DIR/gpu-check)
#   --jobs N            build and ctest parallelism (default: nproc)
#   --stages LIST       comma-separated subset of configure,build,test,run,bench (default: all)
#   --cxx COMPILER      C++ compiler (default: KOKKOS_ROOT/bin/nvcc_wrapper for a CUDA Kokkos,
#                       hipcc for HIP, else CMake's choice)
#   --kokkos-kernels DIR  a Kokkos Kernels install built against this Kokkos (vendor GEMM)
#   --nccl              build the NCCL backend (PARAXIS_ENABLE_NCCL=ON; CUDA only)
#   --mpiexec "CMD"     launcher of the one-rank run (default: the MPI CMake found; "srun" works)
#   --build-lock FILE   hold flock(1) on FILE while configuring and building (a shared machine)
#   --dry-run           print the stages and their commands, run nothing
#   -- ARGS...          further arguments for the configure step's cmake
#
# Sized for a 16-core GPU node in about ten minutes (docs/gpu.md, "Sizing"): fuzzing off, the
# test suite without label slow, 20 steps of the tiny deck per precision, benchmarks at
# --benchmark_min_time=0.05 on a few GEMM shapes, one memory-bound kernel and the model step.
set -uo pipefail
{  # read whole before it runs: editing this file during a run cannot change that run

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
me=gpu-check.sh

die() {  # an argument error: one line, exit 2
  echo "$me: error: $*" >&2
  exit 2
}

kokkos=${KOKKOS_ROOT:-}
build=""
logs=""
jobs=$(nproc 2>/dev/null || echo 2)
stages="configure,build,test,run,bench"
cxx=${CXX_FOR_GPU_CHECK:-}
kk=""
nccl=OFF
mpiexec_cmd=""
lock=""
dry=0
extra=()
positional=()
while (($#)); do
  case "$1" in
    --build-dir|--log-dir|--jobs|--stages|--cxx|--kokkos-kernels|--mpiexec|--build-lock)
      (($# >= 2)) || die "$1 needs a value"
      case "$1" in
        --build-dir) build=$2 ;;
        --log-dir) logs=$2 ;;
        --jobs) jobs=$2 ;;
        --stages) stages=$2 ;;
        --cxx) cxx=$2 ;;
        --kokkos-kernels) kk=$2 ;;
        --mpiexec) mpiexec_cmd=$2 ;;
        --build-lock) lock=$2 ;;
      esac
      shift 2 ;;
    --nccl) nccl=ON; shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) positional+=("$1"); shift ;;
  esac
done
((${#positional[@]} <= 1)) || die "one Kokkos install expected, got ${#positional[@]}: ${positional[*]}"
((${#positional[@]} == 0)) || kokkos=${positional[0]}

[[ -n $kokkos ]] || die "no Kokkos install: give its prefix as the argument or in KOKKOS_ROOT"
[[ -d $kokkos ]] || die "Kokkos install '$kokkos' is not a directory"
kokkos=$(cd "$kokkos" && pwd)
kconfig=$(ls "$kokkos"/lib*/cmake/Kokkos/KokkosConfig.cmake "$kokkos"/lib/*/cmake/Kokkos/KokkosConfig.cmake \
  2>/dev/null | head -1)
[[ -n $kconfig ]] || die "no Kokkos at '$kokkos': no lib*/cmake/Kokkos/KokkosConfig.cmake under it"
kheader=$(ls "$kokkos"/include/KokkosCore_config.h "$kokkos"/include/*/KokkosCore_config.h 2>/dev/null | head -1)
[[ -n $kheader ]] || die "no KokkosCore_config.h under '$kokkos/include': not a Kokkos install"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer, not '$jobs'"
all_stages=(configure build test run bench)
IFS=, read -r -a want <<< "$stages"
((${#want[@]} > 0)) || die "--stages is empty (choose from ${all_stages[*]})"
for s in "${want[@]}"; do
  [[ " ${all_stages[*]} " == *" $s "* ]] || die "unknown stage '$s' in --stages (choose from ${all_stages[*]})"
done
[[ -z $kk || -d $kk ]] || die "--kokkos-kernels '$kk' is not a directory"
command -v cmake > /dev/null || die "cmake is not on PATH"
command -v python3 > /dev/null || die "python3 is not on PATH (the summary reads JSON with it)"
[[ -z $lock ]] || command -v flock > /dev/null || die "--build-lock needs flock(1) on PATH"

# The backends this Kokkos was built with, from its configuration header.
backends=$(sed -n 's/^#define KOKKOS_ENABLE_\(CUDA\|HIP\|SYCL\|OPENMPTARGET\|OPENMP\|THREADS\|SERIAL\|HPX\)$/\1/p' \
  "$kheader" | tr '\n' ' ')
backends=${backends% }
kversion=$(sed -n 's/.*set(Kokkos_VERSION \([0-9.]*\)).*/\1/p' "$(dirname "$kconfig")/KokkosConfigVersion.cmake" \
  2>/dev/null | head -1)
[[ -n $kversion ]] || kversion=$(sed -n 's/.*PACKAGE_VERSION "\([0-9.]*\)".*/\1/p' \
  "$(dirname "$kconfig")/KokkosConfigVersion.cmake" 2>/dev/null | head -1)
if [[ -z $cxx ]]; then
  if [[ " $backends " == *" CUDA "* && -x $kokkos/bin/nvcc_wrapper ]]; then
    cxx=$kokkos/bin/nvcc_wrapper
  elif [[ " $backends " == *" HIP "* ]] && command -v hipcc > /dev/null; then
    cxx=$(command -v hipcc)
  fi
fi
[[ " $backends " == *" CUDA "* || $nccl == OFF ]] || die "--nccl needs a CUDA Kokkos; '$kokkos' has: $backends"

build=${build:-$root/build-gpu-check}
[[ $build == /* ]] || build=$PWD/$build
logs=${logs:-$build/gpu-check}
[[ $logs == /* ]] || logs=$PWD/$logs

cfg=(cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "-DKokkos_ROOT=$kokkos"
     -DPARAXIS_ENABLE_TESTS=ON -DPARAXIS_ENABLE_BENCHMARKS=ON -DPARAXIS_ENABLE_FUZZING=OFF
     "-DPARAXIS_ENABLE_NCCL=$nccl")
[[ -z $cxx ]] || cfg+=("-DCMAKE_CXX_COMPILER=$cxx")
[[ -z $kk ]] || cfg+=("-DKokkosKernels_ROOT=$kk")
cfg+=("${extra[@]}")
bld=(cmake --build "$build" -j "$jobs")
if [[ -n $lock ]]; then
  cfg=(flock "$lock" "${cfg[@]}")
  bld=(build_one_target_at_a_time)
fi
# Tests: one Kokkos host thread each (ctest runs $jobs at once; more would oversubscribe the
# cores). KOKKOS_NUM_THREADS, not OMP_NUM_THREADS: nproc(1) honours the latter, and tests that
# size things by nproc (the Slurm cluster's CPUs) would see one core.
tst=(env KOKKOS_NUM_THREADS=1 OMP_PROC_BIND=false ctest --test-dir "$build" -LE slow -j "$jobs"
     --output-on-failure --no-tests=error)
# The one-rank run: the tiny deck (MoE included), 20 steps in each precision, checked against
# the single-rank reference at every step (--verify), then `paraxis report` on it.
# The launcher: --mpiexec, else the mpiexec of the MPI CMake found (read once configured).
set_run_command() {
  local cmd=$mpiexec_cmd launcher
  [[ -n $cmd ]] || cmd=$(sed -n 's/^MPIEXEC_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
  read -r -a launcher <<< "${cmd:-mpiexec}"
  run=("${launcher[@]}" -n 1 "$build/bin/paraxis" run "$root/inputs/tiny.yaml" --verify --force
       --set train.steps=20 --set 'sweep.train.precision=[fp64,fp32,bf16]' --out "$logs/run")
}
set_run_command
rep=("$build/bin/paraxis" report "$logs/run")
# Benchmarks: a square and a model-shaped GEMM (portable, vendor, OpenBLAS), the bf16 GEMM,
# LayerNorm forward beside its copy baseline; the model step on inputs/small.yaml.
kfilter='^(gemm/(portable|vendor|openblas)/(512|512x2048x512)|gemm/portable-bf16/512|layernorm/(fwd|baseline_copy)/4096x512)/real_time$'
bk=("$build/bin/paraxis-bench-kernels" "--benchmark_filter=$kfilter" --benchmark_min_time=0.05
    --benchmark_out="$logs/bench-kernels.json" --benchmark_out_format=json)
bm=("$build/bin/paraxis-bench-model" --benchmark_min_time=0.05
    --benchmark_out="$logs/bench-model.json" --benchmark_out_format=json)

declare -A cmds=(
  [configure]="${cfg[*]}"
  [build]="${bld[*]}${lock:+ (cmake --build $build -j $jobs --target T under flock $lock, one target at a time)}"
  [test]="${tst[*]}"
  [run]="${run[*]}; ${rep[*]}"
  [bench]="${bk[*]}; ${bm[*]}"
)
selected() { [[ ",$stages," == *",$1,"* ]]; }

if ((dry)); then
  echo "$me: dry run: Kokkos $kversion at $kokkos (backends: $backends); build $build; logs $logs"
  for s in "${all_stages[@]}"; do
    if selected "$s"; then echo "stage $s: ${cmds[$s]}"; else echo "stage $s: (not selected)"; fi
  done
  exit 0
fi

mkdir -p "$logs" || die "cannot create the log folder '$logs'"
declare -A verdict secs note
start_all=$(date +%s)

# stage NAME LOG CMD...: runs CMD with its output in LOG, records PASS/FAIL and the time.
stage() {
  local name=$1 log=$2
  shift 2
  local t0=$(date +%s)
  echo "$me: $name ... (log: $log)"
  if "$@" > "$log" 2>&1; then verdict[$name]=PASS; else verdict[$name]=FAIL; fi
  secs[$name]=$(($(date +%s) - t0))
  echo "$me: $name ${verdict[$name]} in ${secs[$name]} s"
}
skip() { verdict[$1]=SKIP; secs[$1]=0; note[$1]=$2; }
bench_both() { "${bk[@]}" && "${bm[@]}"; }
# --build-lock: the lock is taken per target (Makefile generators list theirs), so other builds on
# a shared machine get their turn between two of ours; then once more for whatever is left.
build_one_target_at_a_time() {
  local t targets=()
  if [[ -f $build/Makefile ]]; then
    mapfile -t targets < <(cmake --build "$build" --target help 2>/dev/null | sed -n 's/^\.\.\. \([A-Za-z0-9_.-]*\)$/\1/p' |
      grep -v -x -E 'all|clean|depend|edit_cache|install(/local|/strip)?|list_install_components|rebuild_cache|test')
  fi
  # The run and bench stages' binaries first: a build cut short still leaves them usable.
  local first=(paraxis paraxis-bench-kernels paraxis-bench-model)
  targets=("${first[@]}" $(printf '%s\n' "${targets[@]}" | grep -v -x -F "${first[@]/#/-e}"))
  for t in "${targets[@]}"; do
    echo "== target $t"
    flock "$lock" cmake --build "$build" -j "$jobs" --target "$t" || return 1
  done
  flock "$lock" cmake --build "$build" -j "$jobs"
}

for s in "${all_stages[@]}"; do
  selected "$s" || { skip "$s" "not selected"; continue; }
  case "$s" in
    configure) stage configure "$logs/configure.log" "${cfg[@]}" ;;
    build)
      if [[ ${verdict[configure]:-} == FAIL ]]; then skip build "configure failed"; continue; fi
      stage build "$logs/build.log" "${bld[@]}"
      [[ ${verdict[build]:-} == PASS ]] || note[build]=$(grep -m1 -E 'error|Error' "$logs/build.log") ;;
    test)
      if [[ ${verdict[build]:-} == FAIL || ${verdict[configure]:-} == FAIL ]]; then
        skip test "no build"; continue
      fi
      stage test "$logs/test.log" "${tst[@]}"
      note[test]=$(grep -E 'tests passed|tests failed' "$logs/test.log" | tail -1) ;;
    run)
      if [[ ! -x $build/bin/paraxis ]]; then
        verdict[run]=FAIL; secs[run]=0; note[run]="no paraxis binary at $build/bin/paraxis"; continue
      fi
      set_run_command
      stage run "$logs/run.log" "${run[@]}"
      # --verify's verdict per point, the loss falling and finite, from summary.json.
      if check=$(python3 - "$logs/run/summary.json" 2>&1 <<'EOF'
import json, math, sys
pts = json.load(open(sys.argv[1]))["points"]
bad, parts = [], []
for p in pts:
    prec = p["config"]["train"]["precision"]
    loss = [s["loss"] for s in p.get("steps", [])]
    v = p.get("verify") or {}
    if p["status"] != "ok": bad.append(f"{prec}: {p['status']}")
    elif not v.get("passed"): bad.append(f"{prec}: --verify did not pass ({v.get('reason', 'no verdict')})")
    elif not loss or not all(math.isfinite(x) for x in loss): bad.append(f"{prec}: loss not finite")
    elif loss[-1] >= loss[0]: bad.append(f"{prec}: loss did not fall ({loss[0]:.4f} -> {loss[-1]:.4f})")
    if loss:
        parts.append(f"{prec} loss {loss[0]:.3f}->{loss[-1]:.3f} verify {v.get('max_loss_rel_diff', float('nan')):.1e}")
print(("; ".join(bad) + " | " if bad else f"{len(pts)} points ok, --verify passed: ") + ", ".join(parts))
sys.exit(1 if bad or len(pts) != 3 else 0)
EOF
      ); then note[run]=$check; else verdict[run]=FAIL; note[run]=${check:-no summary.json}; fi
      if [[ ${verdict[run]:-} == PASS ]] && ! "${rep[@]}" >> "$logs/run.log" 2>&1; then
        verdict[run]=FAIL; note[run]="paraxis report failed (see the log)"
      fi ;;
    bench)
      if [[ ! -x $build/bin/paraxis-bench-kernels || ! -x $build/bin/paraxis-bench-model ]]; then
        verdict[bench]=FAIL; secs[bench]=0; note[bench]="no paraxis-bench-kernels/-model in $build/bin"
        continue
      fi
      rm -f "$logs/bench-kernels.json" "$logs/bench-model.json"  # no figure from an earlier run
      stage bench "$logs/bench.log" bench_both ;;
  esac
done

# The rates and the machine, from this run's benchmark JSON (context and counters).
[[ ${verdict[bench]} != SKIP ]] || rm -f "$logs/bench-kernels.json" "$logs/bench-model.json"
run_summary=$logs/run/summary.json
[[ ${verdict[run]} != SKIP ]] || run_summary=""
rates=$(python3 - "$logs/bench-kernels.json" "$logs/bench-model.json" "$run_summary" 2>/dev/null <<'EOF'
import json, sys
def load(f):
    try:
        return json.load(open(f))
    except (OSError, ValueError):
        return {"context": {}, "benchmarks": []}
k, m = load(sys.argv[1]), load(sys.argv[2])
ctx = k["context"] or m["context"]
if not ctx:  # no benchmark ran: the run's provenance names the same things
    try:
        prov = json.load(open(sys.argv[3]))["provenance"]
        ctx = prov  # the same keys (driver/provenance_common.hpp)
    except (OSError, ValueError, KeyError, TypeError):
        pass
def rate(doc, name, key="FLOP/s"):
    for b in doc["benchmarks"]:
        if b["name"].startswith(name) and not b.get("error_occurred") and key in b:
            return b[key]
    return None
def g(x, unit=1e9):
    return "-" if x is None else f"{x / unit:.{0 if unit == 1 else 1}f}"
if ctx.get("execution_space"):
    print(f"space={ctx['execution_space']} (concurrency {ctx.get('threads', '?')}),"
          f" BLAS {ctx.get('blas_library', '?')} core {ctx.get('blas_core', '?')}")
if ctx.get("cpu_model"):
    print(f"cpu={ctx['cpu_model']}")
if not k["benchmarks"] and not m["benchmarks"]:
    print("benchmarks: no figures (the bench stage did not run or wrote nothing)")
    sys.exit(0)
for shape in ("512", "512x2048x512"):
    print(f"GEMM fp32 {shape}: portable {g(rate(k, f'gemm/portable/{shape}/'))}, vendor "
          f"{g(rate(k, f'gemm/vendor/{shape}/'))}, OpenBLAS (host) {g(rate(k, f'gemm/openblas/{shape}/'))} GFLOP/s")
print(f"GEMM bf16 512: portable {g(rate(k, 'gemm/portable-bf16/512/'))} GFLOP/s")
ln, cp = rate(k, "layernorm/fwd/4096x512/", "bytes/s"), rate(k, "layernorm/baseline_copy/4096x512/", "bytes/s")
print(f"LayerNorm fwd 4096x512: {g(ln)} GB/s, copy {g(cp)} GB/s"
      + (f", {ln / cp:.2f} of copy" if ln and cp else ""))
st, mg = rate(m, "model/step/portable"), rate(m, "gemm/portable/model-mlp")
tok = rate(m, "model/step/portable", "tokens/s")
print(f"model step (small.yaml, portable GEMM): {g(st)} GFLOP/s, {g(tok, 1)} tokens/s; MLP GEMM {g(mg)} GFLOP/s"
      + (f"; step/GEMM {st / mg:.2f}" if st and mg else ""))
sv = rate(m, "model/step/vendor")
if sv:
    print(f"model step (vendor GEMM): {g(sv)} GFLOP/s")
EOF
)
space=$(sed -n 's/^space=//p' <<< "$rates")
cpu=$(sed -n 's/^cpu=//p' <<< "$rates")
device=""
if [[ " $backends " == *" CUDA "* ]] && command -v nvidia-smi > /dev/null; then
  device=$(nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null | head -1)
elif [[ " $backends " == *" HIP "* ]] && command -v rocm-smi > /dev/null; then
  device=$(rocm-smi --showproductname 2>/dev/null | grep -m1 -i 'card series' | sed 's/.*: *//')
fi
if [[ -z $device ]]; then
  cpu=${cpu:-$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -1)}
  if [[ " $backends " == *" CUDA "* || " $backends " == *" HIP "* || " $backends " == *" SYCL "* ]]; then
    device="GPU backend, but no device name (nvidia-smi/rocm-smi not found); host CPU: ${cpu:-?}"
  else
    device="host CPU only (no GPU backend in this Kokkos): ${cpu:-?}"
  fi
fi

total=$(($(date +%s) - start_all))
failed=0
for s in "${all_stages[@]}"; do [[ ${verdict[$s]:-} != FAIL ]] || failed=1; done
{
  echo "gpu-check summary: $(date -u +%Y-%m-%dT%H:%M:%SZ), $total s, $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "  Kokkos:  ${kversion:-?} at $kokkos; backends $backends; default space ${space:-unknown (no benchmark ran)}"
  echo "  device:  $device"
  printf '  %-10s %-5s %6s  %s\n' stage verdict seconds "log / note"
  for s in "${all_stages[@]}"; do
    case "$s" in run) log=$logs/run.log ;; bench) log=$logs/bench.log ;; *) log=$logs/$s.log ;; esac
    printf '  %-10s %-5s %6s  %s\n' "$s" "${verdict[$s]:-}" "${secs[$s]:-}" "$log${note[$s]:+ -- ${note[$s]}}"
  done
  grep -v -e '^space=' -e '^cpu=' <<< "$rates" | sed 's/^/  /'
  echo "  logs:    $logs (summary.txt, *.log, run/ with summary.json and report.md, bench-*.json)"
  if ((failed)); then echo "gpu-check: FAIL"; else echo "gpu-check: PASS"; fi
} | tee "$logs/summary.txt"
exit "$failed"
}
