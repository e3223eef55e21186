#!/usr/bin/env bash
# Installs paraxis's build and test dependencies from the system package manager.
# Debian 12 / Ubuntu 22.04+; idempotent (already-installed packages are skipped).
# Elsewhere (a cluster, macOS, RHEL): use Spack, see spack/ and README.md:
#   spack repo add spack && spack install paraxis
set -euo pipefail

packages=(
  build-essential cmake git pkg-config
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev   # Kokkos 3.4 (Serial) + Kokkos Kernels
  mpich libmpich-dev                                       # MPI
  libopenblas-dev                                          # BLAS baseline / Kokkos Kernels TPL
  libbenchmark-dev libgtest-dev googletest                 # Google Benchmark, GoogleTest
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev          # decks, results, command line
  libxxhash-dev                                            # checkpoint checksums (XXH3)
  python3 python3-matplotlib                               # report plots
  universal-ctags                                          # tools_function_length (the size rule)
  # ctest -L reference: the model against PyTorch (docs/model.md, "Checked against PyTorch").
  # Measured on Debian 12: 1 min 34 s with recommends (~200 packages, OpenCV and Qt through
  # libtorch-dev); without them (as here) libtorch1.13 + python3-torch, about 180 MB. Without
  # it the reference tests check paraxis against the committed goldens only.
  python3-torch
  clang libclang-rt-dev                                    # libFuzzer targets (ctest -L fuzz)
  slurm-wlm munge                                          # ctest -L slurm: a one-node Slurm cluster
)

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: no apt-get here. Install the equivalents of: ${packages[*]}" >&2
  echo "install-deps: or use Spack: spack repo add spack && spack install paraxis" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
