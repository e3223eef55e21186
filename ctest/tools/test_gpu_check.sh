#!/usr/bin/env bash
# tools/gpu-check.sh's own logic, without building anything (issue 20): argument errors exit 2
# with one line naming the problem; --dry-run prints the five stages in order with the commands
# the Kokkos install calls for (nvcc_wrapper for a CUDA Kokkos, NCCL only with CUDA) and
# creates nothing; a stage whose binaries are missing fails the script (exit 1) and the summary
# says which; the run stage fails on a point whose --verify failed or whose loss did not fall.
# Fake Kokkos installs, a fake paraxis and a fake launcher stand in for real ones.
#   test_gpu_check.sh <repository root>
set -uo pipefail
root=$1
script="$root/tools/gpu-check.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# A fake install: KokkosConfig.cmake, a version file and a configuration header with the
# given backends.
fake_kokkos() {
  local dir=$1
  shift
  mkdir -p "$dir/lib/cmake/Kokkos" "$dir/include" "$dir/bin"
  : > "$dir/lib/cmake/Kokkos/KokkosConfig.cmake"
  echo 'set(PACKAGE_VERSION "4.6.1")' > "$dir/lib/cmake/Kokkos/KokkosConfigVersion.cmake"
  for b in "$@"; do echo "#define KOKKOS_ENABLE_$b"; done > "$dir/include/KokkosCore_config.h"
  printf '#!/bin/sh\n' > "$dir/bin/nvcc_wrapper"
  chmod +x "$dir/bin/nvcc_wrapper"
}
fake_kokkos "$work/omp" SERIAL OPENMP
fake_kokkos "$work/cuda" SERIAL CUDA
mkdir -p "$work/not-kokkos/lib"

# expect_error <what the message must contain> args...: exit 2, one line on stderr, nothing on
# stdout.
expect_error() {
  local want=$1
  shift
  local out err rc
  out=$(cd "$work" && env -u KOKKOS_ROOT "$script" "$@" 2> "$work/err")
  rc=$?
  err=$(cat "$work/err")
  if [[ $rc -ne 2 || $err != *"$want"* || $(wc -l < "$work/err") -ne 1 || -n $out ]]; then
    fail "args [$*]: exit $rc, stderr '$err', stdout '$out'; expected exit 2 and one line with '$want'"
  fi
}
expect_error "no Kokkos install: give its prefix as the argument or in KOKKOS_ROOT"
expect_error "'$work/missing' is not a directory" "$work/missing"
expect_error "no Kokkos at '$work/not-kokkos'" "$work/not-kokkos"
expect_error "unknown option '--frobnicate'" --frobnicate "$work/omp"
expect_error "--jobs must be a positive integer, not 'many'" --jobs many "$work/omp"
expect_error "--jobs must be a positive integer, not '0'" --jobs 0 "$work/omp"
expect_error "unknown stage 'bnech'" --stages build,bnech "$work/omp"
expect_error "--build-dir needs a value" "$work/omp" --build-dir
expect_error "one Kokkos install expected, got 2" "$work/omp" "$work/cuda"
expect_error "--nccl needs a CUDA Kokkos" --nccl "$work/omp"
expect_error "--kokkos-kernels '$work/nokk' is not a directory" --kokkos-kernels "$work/nokk" "$work/omp"

# A dry run: the five stages in order, the commands, nothing created.
dry=$(cd "$work" && KOKKOS_ROOT="$work/omp" "$script" --dry-run --build-dir "$work/b" --jobs 3 -- -DFOO=1)
rc=$?
[[ $rc -eq 0 ]] || fail "dry run (KOKKOS_ROOT): exit $rc"
order=$(sed -n 's/^stage \([a-z]*\):.*/\1/p' <<< "$dry" | tr '\n' ' ')
[[ $order == "configure build test run bench " ]] || fail "dry run stages '$order'"
line() { sed -n "s/^stage $1: //p" <<< "$dry"; }
[[ $(line configure) == *"-DKokkos_ROOT=$work/omp "* ]] || fail "configure: $(line configure)"
[[ $(line configure) == *"-DPARAXIS_ENABLE_FUZZING=OFF"*"-DFOO=1" ]] || fail "configure: $(line configure)"
[[ $(line configure) != *CMAKE_CXX_COMPILER* ]] || fail "an OpenMP Kokkos got a compiler: $(line configure)"
[[ $(line build) == "cmake --build $work/b -j 3" ]] || fail "build: $(line build)"
[[ $(line test) == *"ctest --test-dir $work/b -LE slow -j 3"* ]] || fail "test: $(line test)"
[[ $(line test) == *"KOKKOS_NUM_THREADS=1"* ]] || fail "test without one thread per test: $(line test)"
[[ $(line test) != *"OMP_NUM_THREADS"* ]] || fail "OMP_NUM_THREADS makes nproc say 1: $(line test)"
[[ $(line run) == *"-n 1 $work/b/bin/paraxis run $root/inputs/tiny.yaml --verify"* ]] || fail "run: $(line run)"
[[ $(line bench) == *"paraxis-bench-kernels --benchmark_filter="*"--benchmark_min_time=0.05"* ]] ||
  fail "bench: $(line bench)"
[[ $(line bench) == *"paraxis-bench-model"* ]] || fail "bench: $(line bench)"
[[ ! -e $work/b ]] || fail "the dry run created the build folder"
grep -q "Kokkos 4.6.1 at $work/omp (backends: SERIAL OPENMP)" <<< "$dry" || fail "dry run header: $dry"

# A CUDA Kokkos: its nvcc_wrapper is the compiler, NCCL when asked; a subset of stages.
dry=$("$script" --dry-run --nccl --stages configure,test "$work/cuda" --build-dir "$work/b")
[[ $(line configure) == *"-DPARAXIS_ENABLE_NCCL=ON -DCMAKE_CXX_COMPILER=$work/cuda/bin/nvcc_wrapper"* ]] ||
  fail "CUDA configure: $(line configure)"
[[ $(line build) == "(not selected)" && $(line run) == "(not selected)" ]] || fail "stages: $dry"

# A real (not dry) run of the bench and run stages against an empty build folder: both fail,
# the summary says why, the exit status is 1, and the summary is written.
mkdir -p "$work/empty"
out=$("$script" --stages run,bench "$work/omp" --build-dir "$work/empty" 2>&1)
rc=$?
[[ $rc -eq 1 ]] || fail "missing binaries: exit $rc, expected 1; $out"
grep -q "run .*FAIL.*no paraxis binary at $work/empty/bin/paraxis" <<< "$out" || fail "run line: $out"
grep -q "bench .*FAIL.*no paraxis-bench-kernels" <<< "$out" || fail "bench line: $out"
grep -q "configure .*SKIP" <<< "$out" || fail "configure line: $out"
grep -q "^gpu-check: FAIL$" <<< "$out" || fail "verdict: $out"
[[ -f $work/empty/gpu-check/summary.txt ]] || fail "no summary.txt in the log folder"
grep -q "host CPU only (no GPU backend in this Kokkos)" <<< "$out" || fail "device line: $out"

# The run stage's verdict comes from summary.json: a fake paraxis writes one (every point ok and
# verified, or one point broken as $FAKE_BREAK says), a fake launcher drops "-n 1".
mkdir -p "$work/fake/bin"
cat > "$work/fake/bin/paraxis" <<'PY'
#!/usr/bin/env python3
import json, os, sys
if sys.argv[1] == "report":
    sys.exit(0)
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out, exist_ok=True)
brk = os.environ.get("FAKE_BREAK", "")
pts = []
for prec in ("fp64", "fp32", "bf16"):
    loss = [4.9, 5.0, 5.1] if brk == "flat" and prec == "fp32" else [4.9, 4.2, 3.5]
    v = {"passed": not (brk == "verify" and prec == "bf16"), "max_loss_rel_diff": 0.0,
         "reason": "max param abs diff 1.2e-02 at wte[3] > tolerance"}
    pts.append({"config": {"train": {"precision": prec}}, "status": "ok", "verify": v,
                "steps": [{"loss": x} for x in loss]})
json.dump({"points": pts}, open(os.path.join(out, "summary.json"), "w"))
PY
printf '#!/bin/sh\nshift 2\nexec "$@"\n' > "$work/fake/launch"
chmod +x "$work/fake/bin/paraxis" "$work/fake/launch"
run_fake() {
  FAKE_BREAK=$1 "$script" --stages run --mpiexec "$work/fake/launch" --build-dir "$work/fake" \
    "$work/omp" 2>&1
}
out=$(run_fake "")
rc=$?
[[ $rc -eq 0 ]] && grep -q "run .*PASS.*3 points ok, --verify passed" <<< "$out" ||
  fail "good run: exit $rc; $out"
out=$(run_fake verify)
rc=$?
[[ $rc -eq 1 ]] && grep -q "run .*FAIL.*bf16: --verify did not pass (max param abs diff" <<< "$out" ||
  fail "failed --verify: exit $rc; $out"
out=$(run_fake flat)
rc=$?
[[ $rc -eq 1 ]] && grep -q "run .*FAIL.*fp32: loss did not fall (4.9000 -> 5.1000)" <<< "$out" ||
  fail "loss not falling: exit $rc; $out"

if ((fails)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo "gpu-check.sh: arguments, dry run and failing stages as expected"
