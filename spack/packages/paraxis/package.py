# Spack recipe for paraxis, kept in paraxis's own repository (spack/, namespace "paraxis").
#   spack repo add spack
#   spack install paraxis +cuda cuda_arch=90          # H100, NCCL on by default with CUDA
#   spack install paraxis +openmp                      # CPU nodes
# ctest/spack/test_package.py checks this file against the top-level CMakeLists.txt.
import json
import os

try:  # Spack >= 1.0: build systems live in the builtin package repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
    from spack_repo.builtin.build_systems.cuda import CudaPackage
    from spack_repo.builtin.build_systems.rocm import ROCmPackage
except ImportError:  # Spack 0.x: spack.package exports them
    from spack.package import CMakePackage, CudaPackage, ROCmPackage

from spack.package import *

# This file sits at <checkout>/spack/packages/paraxis/package.py: the checkout is the source.
_CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class Paraxis(CMakePackage, CudaPackage, ROCmPackage):
    """Kokkos + MPI mini-app and benchmark suite that trains GPT models (dense and
    Mixture-of-Experts) under data (ZeRO), tensor, pipeline and expert parallelism, measures
    what each axis costs on the machine, and compares it with analytic models."""

    homepage = "file://" + os.path.join(_CHECKOUT, "README.md")
    git = "file://" + _CHECKOUT

    version("main", branch="main")

    # Kokkos execution spaces besides the GPU ones (cuda/rocm come from CudaPackage and
    # ROCmPackage). Each is forwarded to the Kokkos this build uses.
    kokkos_host_backends = {
        "serial": (True, "Kokkos Serial execution space"),
        "openmp": (False, "Kokkos OpenMP execution space (threads per rank)"),
        "threads": (False, "Kokkos C++ threads execution space"),
    }
    for _name, (_default, _descr) in kokkos_host_backends.items():
        variant(_name, default=_default, description=_descr)

    variant("kokkoskernels", default=True,
            description="Vendor GEMM through Kokkos Kernels (cuBLAS with CUDA, BLAS on CPUs)")
    variant("nccl", default=False, description="NCCL communication backend (CUDA only)")
    variant("tests", default=False, description="Build the CTest suite (GoogleTest)")
    variant("benchmarks", default=True,
            description="Build the Google Benchmark microbenchmarks (paraxis-bench-*)")

    depends_on("cxx", type="build")
    depends_on("cmake@3.20:", type="build")

    depends_on("kokkos@3.4:")
    depends_on("kokkos@4:", when="+cuda")
    for _name in kokkos_host_backends:
        depends_on("kokkos+{0}".format(_name), when="+{0}".format(_name))
    # GPU backends: Kokkos built for exactly the architecture asked of paraxis.
    depends_on("kokkos+cuda+cuda_lambda", when="+cuda")
    # nvcc_wrapper with every +cuda build. Conditioned on "%gcc" it let the solver pick %clang
    # to avoid the wrapper (ctest/spack/real_spack.py checks the concretized compiler).
    depends_on("kokkos+wrapper", when="+cuda")
    for _arch in CudaPackage.cuda_arch_values:
        depends_on("kokkos+cuda cuda_arch={0}".format(_arch), when="+cuda cuda_arch={0}".format(_arch))
        depends_on("nccl+cuda cuda_arch={0}".format(_arch), when="+nccl+cuda cuda_arch={0}".format(_arch))
        depends_on("kokkos-kernels+cuda cuda_arch={0}".format(_arch),
                   when="+kokkoskernels+cuda cuda_arch={0}".format(_arch))
    depends_on("kokkos+rocm", when="+rocm")
    for _target in ROCmPackage.amdgpu_targets:
        depends_on("kokkos+rocm amdgpu_target={0}".format(_target),
                   when="+rocm amdgpu_target={0}".format(_target))
    conflicts("+cuda", when="cuda_arch=none", msg="paraxis +cuda needs cuda_arch=<sm>, e.g. 90 for H100")
    conflicts("+rocm", when="amdgpu_target=none", msg="paraxis +rocm needs amdgpu_target=<gfx>")
    conflicts("+cuda", when="+rocm", msg="one GPU backend per build")

    depends_on("kokkos-kernels", when="+kokkoskernels")
    depends_on("kokkos-kernels+cublas", when="+kokkoskernels+cuda")
    depends_on("kokkos-kernels+blas", when="+kokkoskernels~cuda~rocm")

    depends_on("nccl", when="+nccl")
    conflicts("+nccl", when="~cuda", msg="the NCCL backend needs +cuda")

    depends_on("mpi")
    depends_on("yaml-cpp@0.6:")
    depends_on("nlohmann-json@3:")
    depends_on("cli11@2:")
    depends_on("xxhash@0.8:")  # checkpoint checksums (XXH3: stable from xxHash 0.8)
    depends_on("openblas", when="+benchmarks")  # the GEMM baseline paraxis-bench-kernels measures
    depends_on("benchmark", when="+benchmarks")
    depends_on("googletest", type=("build", "test"), when="+tests")

    # paraxis report (tables and plots) runs Python with matplotlib; the test suite runs the
    # same Python (cmake_args names it: the first python3 on PATH may be another one).
    depends_on("python@3.8:", type="run")
    depends_on("python@3.8:", type=("build", "run", "test"), when="+tests")
    depends_on("py-matplotlib", type="run")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("PARAXIS_ENABLE_KOKKOSKERNELS", "kokkoskernels"),
            self.define_from_variant("PARAXIS_ENABLE_NCCL", "nccl"),
            self.define_from_variant("PARAXIS_ENABLE_TESTS", "tests"),
            self.define_from_variant("PARAXIS_ENABLE_BENCHMARKS", "benchmarks"),
            # Spack's compiler wrappers pass the target's flags; -march=native would tune for
            # the build node instead of the compute nodes.
            self.define("PARAXIS_NATIVE_ARCH", False),
            # The libFuzzer targets need a clang of their own, outside Spack's compiler wrappers.
            self.define("PARAXIS_ENABLE_FUZZING", False),
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
        ]
        if spec.satisfies("+tests"):
            args.append(self.define("Python3_EXECUTABLE", spec["python"].command.path))
        if spec.satisfies("+kokkoskernels"):
            args.append(self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix))
        if spec.satisfies("+nccl"):
            args.append(self.define("NCCL_ROOT", spec["nccl"].prefix))
        if spec.satisfies("+rocm"):
            args.append(self.define("CMAKE_CXX_COMPILER", spec["hip"].hipcc))
        elif spec.satisfies("+cuda"):
            # nvcc_wrapper (or clang), as Kokkos was built with.
            args.append(self.define("CMAKE_CXX_COMPILER", spec["kokkos"].kokkos_cxx))
        return args

    @run_after("install")
    def install_shared_files(self):
        # Decks and batch scripts next to the binaries: $prefix/share/paraxis/{inputs,slurm}.
        install_tree("inputs", join_path(self.prefix.share.paraxis, "inputs"))
        install_tree("slurm", join_path(self.prefix.share.paraxis, "slurm"))

    def test_check_shipped_deck(self):
        """paraxis check validates the shipped small deck"""
        paraxis = which(self.prefix.bin.paraxis)
        out = paraxis("check", join_path(self.prefix.share.paraxis.inputs, "small.yaml"),
                      output=str, error=str)
        assert ": ok," in out, out

    def test_tiny_run_one_rank(self):
        """a one-rank run of the tiny deck writes summary.json with status ok"""
        mpiexec = which(join_path(self.spec["mpi"].prefix.bin, "mpiexec"), "mpiexec", "srun")
        outdir = join_path(os.getcwd(), "paraxis-tiny")
        out = mpiexec("-n", "1", self.prefix.bin.paraxis, "run",
                      join_path(self.prefix.share.paraxis.inputs, "tiny.yaml"),
                      "--set", "train.steps=3", "--out", outdir, output=str, error=str)
        assert "ok" in out, out
        with open(join_path(outdir, "summary.json")) as f:
            status = json.load(f)["points"][0]["status"]
        assert status == "ok", "tiny run: status " + status
