#!/usr/bin/env python3
"""Checks spack/packages/paraxis/package.py without Spack, for what real_spack.py (a real
Spack's audit, concretizer and install) does not check.

A minimal stand-in for Spack's directive API (variant, depends_on, conflicts, version, the
CMakePackage / CudaPackage / ROCmPackage bases, define / define_from_variant, which, Prefix)
is installed as the modules the recipe imports; the recipe is then imported and inspected:

  * it imports both ways Spack offers (Spack >= 1.0's spack_repo build systems, Spack 0.x's
    spack.package);
  * its dependencies are there, the GPU architecture is forwarded to Kokkos (and NCCL, Kokkos
    Kernels) for every value (real_spack.py concretizes one of each), NCCL needs CUDA;
  * its cmake_args define exactly the PARAXIS_* options that the CMakeLists.txt files declare
    with option(...) (parsed from the files: the test fails when the two drift apart), each
    variant reaches its option, PARAXIS_NATIVE_ARCH and PARAXIS_ENABLE_FUZZING are always OFF,
    and a +tests build names the spec's Python;
  * what Spack leaves in the checkout is ignored by git;
  * the environments under spack/environments ask only for variants the recipe has;
  * with --paraxis, its install hook and smoke-test methods run for real against the built
    binary in a fake install prefix.

  test_package.py --source DIR [--paraxis EXE] [--mpiexec MPIEXEC]
"""
import argparse
import contextlib
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

ARGS = None


# --- the stand-in ------------------------------------------------------------------------------
class Directive:
    def __init__(self, kind, args, kwargs):
        self.kind, self.args, self.kwargs = kind, args, kwargs

    @property
    def when(self):
        return self.kwargs.get("when", "")


_pending = []


def _directive(kind):
    def record(*args, **kwargs):
        _pending.append(Directive(kind, args, kwargs))
    record.__name__ = kind
    return record


class _PackageMeta(type):
    """Collects the directives run in a class body (as Spack's metaclass does) and merges those
    of the bases."""

    def __new__(mcs, name, bases, ns):
        cls = super().__new__(mcs, name, bases, ns)
        own = list(_pending)
        _pending.clear()
        inherited = []
        for b in bases:
            inherited += getattr(b, "directives", [])
        cls.directives = inherited + own
        cls.variants = {}
        for d in cls.directives:
            if d.kind == "variant":
                cls.variants[d.args[0]] = d
        return cls


class Prefix(str):
    """A path whose attributes are sub-paths, like Spack's Prefix."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Prefix(os.path.join(self, name))


class ProcessError(Exception):
    pass


class Executable:
    def __init__(self, path):
        self.path = str(path)

    def __call__(self, *args, output=None, error=None, fail_on_error=True):
        p = subprocess.run([self.path] + [str(a) for a in args], capture_output=True, text=True,
                           timeout=300)
        if fail_on_error and p.returncode != 0:
            raise ProcessError("%s exited %d: %s%s" % (self.path, p.returncode, p.stdout, p.stderr))
        if output is str or error is str:
            return (p.stdout if output is str else "") + (p.stderr if error is str else "")
        return None


def which(*names, required=False):
    for n in names:
        n = str(n)
        path = n if os.path.isabs(n) and os.access(n, os.X_OK) else shutil.which(n)
        if path:
            return Executable(path)
    if required:
        raise ProcessError("none of %s found" % (names,))
    return None


def run_after(phase, when=None):
    def deco(f):
        f.run_after = phase
        return f
    return deco


def join_path(*parts):
    return Prefix(os.path.join(*[str(p) for p in parts]))


def install_tree(src, dst):
    shutil.copytree(src, dst, dirs_exist_ok=True)


class FakeSpec:
    """A concrete spec: variant values, compiler, and dependency prefixes."""

    def __init__(self, variants, deps=None, compiler="gcc"):
        self.variants = variants
        self.compiler = compiler
        self.deps = deps or {}

    def satisfies(self, constraint):
        for tok in re.findall(r"[+~][\w-]+|[\w-]+=[\w,-]+|%[\w-]+", constraint):
            if tok[0] in "+~":
                name = tok[1:]
                if name not in self.variants:
                    return False
                if bool(self.variants[name]) != (tok[0] == "+"):
                    return False
            elif tok[0] == "%":
                if tok[1:] != self.compiler:
                    return False
            else:
                name, value = tok.split("=", 1)
                if str(self.variants.get(name)) != value:
                    return False
        return True

    def __contains__(self, constraint):
        return self.satisfies(constraint)

    def __getitem__(self, name):
        return self.deps[name]


class FakeBuilderMixin:
    def define(self, name, value):
        if isinstance(value, bool):
            return "-D%s:BOOL=%s" % (name, "ON" if value else "OFF")
        return "-D%s:STRING=%s" % (name, value)

    def define_from_variant(self, name, variant):
        if variant not in type(self).variants:
            raise KeyError("define_from_variant: no variant '%s'" % variant)
        self.defined_from_variants[name] = variant
        return self.define(name, bool(self.spec.variants[variant]))


def _base_classes():
    class PackageBase(FakeBuilderMixin, metaclass=_PackageMeta):
        def __init__(self, spec, prefix="/nonexistent"):
            self.spec = spec
            self.prefix = Prefix(prefix)
            self.defined_from_variants = {}

    class CMakePackage(PackageBase):
        variant("build_type", default="Release", description="CMake build type")
        depends_on("cmake", type="build")

    class CudaPackage(PackageBase):
        cuda_arch_values = ("60", "70", "75", "80", "86", "89", "90", "90a")
        variant("cuda", default=False, description="CUDA")
        variant("cuda_arch", default="none", values=("none",) + cuda_arch_values, when="+cuda")
        depends_on("cuda", when="+cuda")

    class ROCmPackage(PackageBase):
        amdgpu_targets = ("gfx906", "gfx908", "gfx90a", "gfx942")
        variant("rocm", default=False, description="ROCm")
        variant("amdgpu_target", default="none", values=("none",) + amdgpu_targets, when="+rocm")
        depends_on("hip", when="+rocm")

    return CMakePackage, CudaPackage, ROCmPackage


variant = _directive("variant")
depends_on = _directive("depends_on")
conflicts = _directive("conflicts")
version = _directive("version")
maintainers = _directive("maintainers")
license = _directive("license")
requires = _directive("requires")
patch = _directive("patch")
provides = _directive("provides")


@contextlib.contextmanager
def stand_in(spack_1x):
    """Installs fake spack modules. spack_1x: build systems under spack_repo (Spack >= 1.0);
    otherwise exported by spack.package (Spack 0.x)."""
    cmake, cuda, rocm = _base_classes()
    pkg = types.ModuleType("spack.package")
    public = dict(variant=variant, depends_on=depends_on, conflicts=conflicts, version=version,
                  maintainers=maintainers, license=license, requires=requires, patch=patch,
                  provides=provides, which=which, Executable=Executable, run_after=run_after,
                  join_path=join_path, install_tree=install_tree, Prefix=Prefix,
                  ProcessError=ProcessError)
    if not spack_1x:
        public.update(CMakePackage=cmake, CudaPackage=cuda, ROCmPackage=rocm)
    pkg.__dict__.update(public)
    pkg.__all__ = list(public)
    mods = {"spack": types.ModuleType("spack"), "spack.package": pkg}
    if spack_1x:
        for name in ("spack_repo", "spack_repo.builtin", "spack_repo.builtin.build_systems"):
            mods[name] = types.ModuleType(name)
        for sub, cls in (("cmake", cmake), ("cuda", cuda), ("rocm", rocm)):
            m = types.ModuleType("spack_repo.builtin.build_systems." + sub)
            setattr(m, cls.__name__, cls)
            mods[m.__name__] = m
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    try:
        yield cmake, cuda, rocm
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def load_recipe(spack_1x):
    path = os.path.join(ARGS.source, "spack", "packages", "paraxis", "package.py")
    with stand_in(spack_1x) as bases:
        spec = importlib.util.spec_from_file_location("paraxis_recipe_%d" % spack_1x, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    return mod.Paraxis, bases


def read(path):
    with open(path) as f:
        return f.read()


# Options the recipe sets to OFF whatever the spec: -march=native (Spack passes the target's
# flags) and the libFuzzer targets (built with a clang outside Spack's compiler wrappers).
FIXED_OFF = {"PARAXIS_NATIVE_ARCH", "PARAXIS_ENABLE_FUZZING"}


def cmake_options():
    """option(PARAXIS_... "doc" DEFAULT) lines of every CMakeLists.txt of the source tree (not
    of build folders)."""
    found = {}
    for top, dirs, files in os.walk(ARGS.source):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d != "runs"]
        if "CMakeLists.txt" in files:
            text = read(os.path.join(top, "CMakeLists.txt"))
            found.update(re.findall(r'^\s*option\(\s*(PARAXIS_\w+)\s+"[^"]*"\s+(\w+)\s*\)',
                                    text, re.M))
    return found


def dep_prefixes(tmp="/opt/fake"):
    class Dep:
        def __init__(self, name):
            self.prefix = Prefix(os.path.join(tmp, name))
            self.kokkos_cxx = os.path.join(tmp, name, "bin", "nvcc_wrapper")
            self.hipcc = os.path.join(tmp, name, "bin", "hipcc")
            self.command = types.SimpleNamespace(path=os.path.join(tmp, name, "bin", name + "3"))
    return {n: Dep(n) for n in ("kokkos", "kokkos-kernels", "nccl", "hip", "mpi", "cuda", "python")}


def make_spec(cls, **overrides):
    values = {}
    for name, d in cls.variants.items():
        values[name] = d.kwargs.get("default")
    values.update(overrides)
    return FakeSpec(values, dep_prefixes())


def parse_args(args):
    out = {}
    for a in args:
        m = re.match(r"-D(\w+)(?::(\w+))?=(.*)", a)
        assert m, "not a -D argument: %r" % a
        out[m.group(1)] = m.group(3)
    return out


# --- the tests -------------------------------------------------------------------------------
class RecipeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.P, (cls.CMake, cls.Cuda, cls.ROCm) = load_recipe(spack_1x=True)
        cls.deps = [d for d in cls.P.directives if d.kind == "depends_on"]
        cls.conflicts = [d for d in cls.P.directives if d.kind == "conflicts"]

    def depends(self, name_re, when_re=None, type_=None):
        for d in self.deps:
            if re.match(name_re + r"($|[@+~ %])", d.args[0]) and (
                    when_re is None or re.search(when_re, d.when)):
                if type_ is None or type_ in (d.kwargs.get("type") or ()):
                    return d
        return None

    def test_imports_with_spack_0x_api_too(self):
        P0, _ = load_recipe(spack_1x=False)
        self.assertEqual(set(P0.variants), set(self.P.variants))

    def test_gpu_arch_propagated_per_value(self):
        for arch in self.Cuda.cuda_arch_values:
            w = r"\+cuda cuda_arch=%s$" % re.escape(arch)
            d = self.depends(r"kokkos\+cuda cuda_arch=%s" % re.escape(arch), w)
            self.assertIsNotNone(d, "cuda_arch=%s not forwarded to kokkos" % arch)
            self.assertIsNotNone(self.depends(r"nccl\+cuda cuda_arch=%s" % re.escape(arch),
                                              r"\+nccl.*" + w), "nccl cuda_arch=%s" % arch)
        for t in self.ROCm.amdgpu_targets:
            d = self.depends(r"kokkos\+rocm amdgpu_target=%s" % t, r"\+rocm amdgpu_target=%s$" % t)
            self.assertIsNotNone(d, "amdgpu_target=%s not forwarded to kokkos" % t)

    def test_nccl_only_with_cuda(self):
        self.assertTrue(any(d.args[0] == "+nccl" and d.when == "~cuda" for d in self.conflicts)
                        or self.P.variants["nccl"].when == "+cuda", "+nccl allowed without CUDA")
        self.assertIsNotNone(self.depends("nccl", r"^\+nccl$"))

    def test_dependencies(self):
        for name in ("mpi", "yaml-cpp", "nlohmann-json", "cli11", "xxhash"):
            self.assertIsNotNone(self.depends(re.escape(name)), name)
        self.assertIsNotNone(self.depends("benchmark", r"\+benchmarks"))
        self.assertIsNotNone(self.depends("googletest", r"\+tests"))
        self.assertIsNotNone(self.depends("kokkos-kernels", r"^\+kokkoskernels$"))
        self.assertIsNotNone(self.depends("python", type_="run"), "python as a run dependency")
        self.assertIsNotNone(self.depends("py-matplotlib", type_="run"), "py-matplotlib (run)")
        cm = [d for d in self.deps if d.args[0].startswith("cmake@")]
        self.assertTrue(cm, "cmake version bound")
        top = read(os.path.join(ARGS.source, "CMakeLists.txt"))
        need = re.search(r"cmake_minimum_required\(VERSION ([\d.]+)", top).group(1)
        self.assertTrue(any(d.args[0].startswith("cmake@%s:" % need) for d in cm),
                        "cmake@%s: (cmake_minimum_required)" % need)

    def test_cmake_args_match_declared_options(self):
        declared = cmake_options()
        self.assertGreaterEqual(len(declared), 5, "option() lines not found in CMakeLists.txt")
        specs = {
            "defaults": make_spec(self.P),
            "cpu": make_spec(self.P, openmp=True, tests=True, benchmarks=False, kokkoskernels=False),
            "h100": make_spec(self.P, cuda=True, cuda_arch="90", nccl=True),
            "rocm": make_spec(self.P, rocm=True, amdgpu_target="gfx90a"),
        }
        for label, spec in specs.items():
            pkg = self.P(spec)
            args = parse_args(pkg.cmake_args())
            ours = {k for k in args if k.startswith("PARAXIS_")}
            self.assertEqual(ours, set(declared),
                             "%s: cmake_args PARAXIS_* != option()s of the CMakeLists.txt files" % label)
            for opt in FIXED_OFF:
                self.assertEqual(args[opt], "OFF", "%s: %s" % (label, opt))
            for opt, var in pkg.defined_from_variants.items():
                self.assertEqual(args[opt], "ON" if spec.variants[var] else "OFF", opt)
            self.assertIn("Kokkos_ROOT", args)
        h = parse_args(self.P(specs["h100"]).cmake_args())
        self.assertEqual(h["PARAXIS_ENABLE_NCCL"], "ON")
        self.assertIn("NCCL_ROOT", h)
        self.assertTrue(h["CMAKE_CXX_COMPILER"].endswith("nvcc_wrapper"))
        self.assertTrue(parse_args(self.P(specs["rocm"]).cmake_args())["CMAKE_CXX_COMPILER"]
                        .endswith("hipcc"))
        # Every option that should follow a variant does.
        pkg = self.P(specs["defaults"])
        pkg.cmake_args()
        self.assertEqual(set(pkg.defined_from_variants),
                         set(declared) - FIXED_OFF,
                         "options not driven by a variant")

    def test_tests_build_uses_the_specs_python(self):
        # The test suite's CMake would take the first python3 on PATH (a pyenv shim, another
        # Python without matplotlib) unless told which: the spec's.
        args = parse_args(self.P(make_spec(self.P, tests=True)).cmake_args())
        self.assertEqual(args.get("Python3_EXECUTABLE"), "/opt/fake/python/bin/python3")
        self.assertIsNotNone(self.depends("python", r"\+tests", type_="build"),
                             "python as a build dependency with +tests")

    def test_environments(self):
        envs = sorted(glob.glob(os.path.join(ARGS.source, "spack", "environments", "*", "spack.yaml")))
        self.assertGreaterEqual(len(envs), 2)
        text = {os.path.basename(os.path.dirname(e)): read(e) for e in envs}
        self.assertIn("cpu", text)
        self.assertIn("h100", text)
        self.assertRegex(text["cpu"], r"paraxis@?\S* .*\+openmp")
        self.assertIn("mpich", text["cpu"])
        self.assertRegex(text["h100"], r"paraxis\S* .*\+cuda .*cuda_arch=90.*\+nccl")
        for name, t in text.items():
            for line in re.findall(r"^\s*-\s*(paraxis\S*\s.*)$", t, re.M):
                for v in re.findall(r"[+~](\w+)", line):
                    self.assertIn(v, self.P.variants, "%s: unknown variant %s" % (name, v))
                for v in re.findall(r"(\w+)=", line):
                    self.assertIn(v, self.P.variants, "%s: unknown variant %s" % (name, v))
        repo = read(os.path.join(ARGS.source, "spack", "repo.yaml"))
        self.assertRegex(repo, r"namespace:\s*['\"]?paraxis")

    def test_what_spack_leaves_in_the_checkout_is_ignored(self):
        # `spack env activate` / `spack install` from spack/environments/<name> write these; the
        # build-<platform>-<hash> entry is a symlink, which a "/build-*/" rule does not match.
        if not os.path.isdir(os.path.join(ARGS.source, ".git")) and \
                not os.path.isfile(os.path.join(ARGS.source, ".git")):
            self.skipTest("the source is not a git checkout")
        for path in ("spack/environments/debian12/.spack-env/view", "spack/environments/h100/spack.lock",
                     "build-linux-debian12-x86_64_v4-2vxw5lp"):
            p = subprocess.run(["git", "-C", ARGS.source, "check-ignore", "-q", "--no-index", path])
            self.assertEqual(p.returncode, 0, "not ignored by .gitignore: " + path)

    def test_install_hook_and_smoke_tests_run(self):
        if not os.environ.get("PARAXIS_EXE_FOR_TEST"):
            self.skipTest("no --paraxis given")
        tmp = tempfile.mkdtemp(prefix="paraxis-spack-test.")
        try:
            prefix = Prefix(os.path.join(tmp, "prefix"))
            os.makedirs(prefix.bin)
            os.symlink(os.environ["PARAXIS_EXE_FOR_TEST"], prefix.bin.paraxis)
            spec = make_spec(self.P)
            mpiexec = os.environ.get("PARAXIS_MPIEXEC_FOR_TEST") or shutil.which("mpiexec")
            spec.deps["mpi"].prefix = Prefix(os.path.dirname(os.path.dirname(mpiexec)))
            pkg = self.P(spec, prefix=prefix)
            hooks = [f for f in vars(self.P).values() if getattr(f, "run_after", None) == "install"]
            self.assertTrue(hooks, "no run_after('install') hook")
            cwd = os.getcwd()
            os.chdir(ARGS.source)  # Spack runs install hooks in the stage's source directory
            try:
                for h in hooks:
                    h(pkg)
            finally:
                os.chdir(cwd)
            self.assertTrue(os.path.isfile(os.path.join(prefix.share.paraxis.inputs, "tiny.yaml")))
            self.assertTrue(os.path.isfile(os.path.join(prefix.share.paraxis.slurm, "cpu.sbatch")))
            tests = [n for n in vars(self.P) if n.startswith("test_") and callable(getattr(self.P, n))]
            self.assertGreaterEqual(len(tests), 2, tests)
            os.chdir(tmp)  # Spack runs stand-alone tests in a scratch directory
            try:
                for n in tests:
                    getattr(pkg, n)()
            finally:
                os.chdir(cwd)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--paraxis")
    ap.add_argument("--mpiexec")
    ARGS, rest = ap.parse_known_args()
    if ARGS.paraxis:
        os.environ["PARAXIS_EXE_FOR_TEST"] = os.path.abspath(ARGS.paraxis)
    if ARGS.mpiexec:
        os.environ["PARAXIS_MPIEXEC_FOR_TEST"] = ARGS.mpiexec
    unittest.main(argv=[sys.argv[0], "-v"] + rest)


if __name__ == "__main__":
    main()
