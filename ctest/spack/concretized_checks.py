"""Run by real_spack.py under `spack python` (scopes: the Debian externals, then Kokkos made
buildable): concretizes paraxis's specs with the real solver and checks what reaches its
dependencies on the concrete spec.

  spack -C <debian12> -C <kokkos-buildable> python concretized_checks.py <h100 spack.yaml>
"""
import sys
import time

import spack.config
import spack.spec
import spack.util.spack_yaml as syaml

try:  # Spack >= 1.0
    from spack.concretize import concretize_one
except ImportError:  # Spack 0.x
    def concretize_one(text):
        return spack.spec.Spec(text).concretized()

FAILURES = []


def expect(spec, dep, constraint):
    node = spec if dep is None else spec[dep]
    ok = node.satisfies(constraint)
    print("  %s %s satisfies %s: %s" % ("ok  " if ok else "FAIL", dep or "paraxis", constraint,
                                        "yes" if ok else node.format("{name}{@version}{%compiler}{variants}")))
    if not ok:
        FAILURES.append("%s: %s not %s" % (spec.format("{name}{variants}"), dep, constraint))


def expect_absent(spec, dep):
    if dep in spec:
        print("  FAIL paraxis depends on %s" % dep)
        FAILURES.append("%s: depends on %s" % (spec.format("{name}{variants}"), dep))


def concretize(text, kokkos_buildable):
    t = time.time()
    with spack.config.override("packages:kokkos", {"buildable": kokkos_buildable}), \
            spack.config.override("packages:kokkos-kernels", {"buildable": kokkos_buildable}):
        s = concretize_one(text)
    print("spec %s (%.0f s)" % (text, time.time() - t))
    return s


def check_specs():
    s = concretize("paraxis", kokkos_buildable=False)  # Debian's externals as they are
    expect(s, "kokkos", "@3.4.01 +serial ~cuda ~rocm")
    expect(s, "kokkos-kernels", "+blas")
    expect_absent(s, "nccl")
    s = concretize("paraxis +openmp", kokkos_buildable=True)
    expect(s, "kokkos", "+openmp +serial ~cuda")
    # No compiler named: +cuda must still come with gcc and nvcc_wrapper (not %clang).
    s = concretize("paraxis +cuda cuda_arch=90 +nccl", kokkos_buildable=True)
    expect(s, None, "%gcc")
    expect(s, "kokkos", "@4: +cuda +cuda_lambda +wrapper cuda_arch=90 %gcc")
    expect(s, "kokkos-kernels", "+cuda +cublas cuda_arch=90")
    expect(s, "nccl", "+cuda cuda_arch=90 %gcc")
    s = concretize("paraxis +rocm amdgpu_target=gfx90a", kokkos_buildable=True)
    expect(s, "kokkos", "+rocm amdgpu_target=gfx90a ~cuda")
    expect_absent(s, "cuda")


def check_h100_mpi_not_faked(h100_yaml):
    """The H100 environment's requirements (mpich +cuda) against Debian's MPICH, which is not
    CUDA-aware: concretization must fail, not fill +cuda into the external."""
    with open(h100_yaml) as f:
        env = syaml.load(f)["spack"]
    spec = env["specs"][0].replace("@main", "")
    try:
        with spack.config.override("packages:mpich", env["packages"]["mpich"]):
            s = concretize(spec, kokkos_buildable=True)
    except Exception as e:  # the solver's UnsatisfiableSpecError (its module moved across versions)
        if "Unsatisfiable" not in type(e).__name__:
            raise
        print("  ok   h100 requirements against Debian's MPICH: %s: %s" %
              (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
        return
    print("  FAIL the external %s passes as %s" % (s["mpich"].format("{name}{@version}{variants}"),
                                                   env["packages"]["mpich"]["require"]))
    FAILURES.append("an MPICH external without CUDA satisfies the h100 environment's +cuda")


check_specs()
check_h100_mpi_not_faked(sys.argv[1])
if FAILURES:
    print("FAILED:\n  " + "\n  ".join(FAILURES))
    sys.exit(1)
print("all concretized checks passed")
