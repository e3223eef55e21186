#!/usr/bin/env python3
"""Runs a real Spack against spack/ (docs/spack-slurm.md, "Testing the recipe with a real Spack").

  real_spack.py --source DIR --work DIR check     audit + concretized specs (label spack)
  real_spack.py --source DIR --work DIR install   spack install from spack/environments/debian12,
                                                  then spack test run paraxis (labels spack;slow)

The Spack: $PARAXIS_SPACK_ARCHIVES, a folder holding spack-*.tar.gz and clingo-*.tar.gz (the
offline archives; .ci/run sets it from ../shared/tools/spack/ when that folder exists), unpacked
once under --work; otherwise a `spack` on PATH; otherwise the test is skipped (exit 77).
Spack's user configuration scope and caches live under --work (SPACK_USER_CONFIG_PATH,
SPACK_USER_CACHE_PATH), so ~/.spack is neither read nor written; the Debian externals are spack/environments/debian12/packages.yaml.
"""
import argparse
import fcntl
import glob
import os
import re
import shutil
import subprocess
import sys
import time

SKIPPED = 77  # CTest SKIP_RETURN_CODE (ctest/CMakeLists.txt)


def log(msg):
    print("real_spack: " + msg, flush=True)


def unpack_archives(folder, work):
    """The offline Spack and clingo archives unpacked under work (once); returns (spack, env)."""
    tars = {k: sorted(glob.glob(os.path.join(folder, k + "-*.tar.gz"))) for k in ("spack", "clingo")}
    missing = [k for k, v in tars.items() if not v]
    if missing:
        sys.exit("real_spack: PARAXIS_SPACK_ARCHIVES=%s holds no %s-*.tar.gz" %
                 (folder, " or ".join(missing)))
    env = {}
    for kind, paths in tars.items():
        dest = os.path.join(work, os.path.basename(paths[-1])[:-len(".tar.gz")])
        if not os.path.isfile(os.path.join(dest, ".unpacked")):
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(dest)
            subprocess.run(["tar", "-xzf", paths[-1], "-C", dest], check=True)
            open(os.path.join(dest, ".unpacked"), "w").close()
        if kind == "spack":
            spack = os.path.join(dest, "bin", "spack")
        else:
            site = glob.glob(os.path.join(dest, "lib", "python3*", "site-packages"))
            env["PYTHONPATH"] = site[0] if site else dest
            # The Python the clingo module was built for (the archive's README: Debian's).
            env["SPACK_PYTHON"] = os.environ.get("PARAXIS_SPACK_PYTHON", "/usr/bin/python3")
    return spack, env


def find_spack(work):
    folder = os.environ.get("PARAXIS_SPACK_ARCHIVES")
    if folder:
        spack, env = unpack_archives(os.path.abspath(folder), work)
        return [spack], env, "the archives in " + folder
    on_path = shutil.which("spack")
    if on_path:
        return [on_path], {}, on_path
    print("real_spack: skipped: no Spack (neither a `spack` on PATH nor PARAXIS_SPACK_ARCHIVES, "
          "the folder of the offline archives; docs/spack-slurm.md)")
    sys.exit(SKIPPED)


class Spack:
    def __init__(self, args):
        self.source = os.path.abspath(args.source)
        self.work = os.path.abspath(args.work)
        os.makedirs(self.work, exist_ok=True)
        self.cmd, extra, where = find_spack(self.work)
        self.env = dict(os.environ, **extra)
        # The user scope under work (not ~/.spack): the repo, compilers and install tree below.
        self.env.pop("SPACK_DISABLE_LOCAL_CONFIG", None)  # it would drop the user scope too
        self.env.update(SPACK_USER_CONFIG_PATH=os.path.join(self.work, "config"),
                        SPACK_USER_CACHE_PATH=os.path.join(self.work, "cache"))
        self.debian = os.path.join(self.source, "spack", "environments", "debian12")
        log("Spack from " + where)

    def run(self, *args, check=True, scopes=(), cwd=None):
        cmd = self.cmd + [a for s in scopes for a in ("-C", s)] + list(args)
        log("$ spack " + " ".join(cmd[1:]))
        t = time.time()
        p = subprocess.run(cmd, env=self.env, cwd=cwd or self.work, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        print(p.stdout, end="", flush=True)
        log("(%.0f s, exit %d)" % (time.time() - t, p.returncode))
        if check and p.returncode != 0:
            sys.exit("real_spack: FAILED: spack %s exited %d" % (" ".join(args), p.returncode))
        return p

    def configure(self):
        """User scope under work: this checkout's repo, the compilers found, and an install tree
        under work (not the Spack's own). Done once; a lock keeps concurrent tests apart."""
        config = self.env["SPACK_USER_CONFIG_PATH"]
        os.makedirs(config, exist_ok=True)
        with open(os.path.join(self.work, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(os.path.join(config, "repos.yaml"), "w") as f:
                f.write("repos:\n- %s\n" % os.path.join(self.source, "spack"))
            with open(os.path.join(config, "config.yaml"), "w") as f:
                f.write("config:\n  install_tree:\n    root: %s\n" % os.path.join(self.work, "opt"))
            done = os.path.join(config, ".compilers-found")
            if not os.path.isfile(done):
                self.run("compiler", "find", "--scope", "user")
                open(done, "w").close()

    def kokkos_buildable_scope(self):
        """A test-only scope: Debian's Kokkos is Serial-only, so the OpenMP and GPU specs need a
        buildable one (concretized only, never built)."""
        scope = os.path.join(self.work, "kokkos-buildable")
        os.makedirs(scope, exist_ok=True)
        with open(os.path.join(scope, "packages.yaml"), "w") as f:
            f.write("packages:\n  kokkos:\n    buildable: true\n"
                    "  kokkos-kernels:\n    buildable: true\n")
        return scope


def check(sp):
    sp.run("audit", "packages", "paraxis", scopes=[sp.debian])
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "concretized_checks.py")
    h100 = os.path.join(sp.source, "spack", "environments", "h100", "spack.yaml")
    p = sp.run("python", script, h100, check=False,
               scopes=[sp.debian, sp.kokkos_buildable_scope()])
    return p.returncode


def untracked(source):
    p = subprocess.run(["git", "-C", source, "status", "--porcelain", "--untracked-files=all"],
                       text=True, capture_output=True)
    return set(p.stdout.splitlines()) if p.returncode == 0 else None


def install(sp):
    if not os.path.isfile("/etc/debian_version") or \
            not open("/etc/debian_version").read().startswith("12"):
        print("real_spack: skipped: the install uses Debian 12's packages as externals")
        return SKIPPED
    before = untracked(sp.source)
    env = ["-e", sp.debian]
    sp.run(*env, "concretize", "-f")
    sp.run(*env, "install", "-j", str(os.cpu_count() or 2), "--fail-fast")
    sp.run(*env, "test", "run", "paraxis")
    rc = 0
    # The develop build's folder, linked from the checkout as build-<platform>-<hash>, and
    # the Python of the concrete spec.
    out = sp.run(*env, "python", "-c", "import spack.environment as e; _ = [print('root', "
                 "s.dag_hash(7), s['python'].command.path) for s in "
                 "e.active_environment().concrete_roots()]", check=False).stdout
    root = re.search(r"^root (\w+) (\S+)$", out, re.M)
    python = root.group(2) if root else "(none)"
    cache = glob.glob(os.path.join(sp.source, "build-*-" + root.group(1), "*",
                                   "CMakeCache.txt")) if root else []
    if not cache:
        log("FAILED: no build-<platform>-<hash>/*/CMakeCache.txt in the checkout")
        rc = 1
    elif not re.search(r"^Python3_EXECUTABLE:\w+=%s$" % re.escape(python),
                       open(cache[0]).read(), re.M):
        log("FAILED: the test build's Python3_EXECUTABLE is not the spec's %s" % python)
        rc = 1
    else:
        log("the test build's Python3_EXECUTABLE is the spec's %s" % python)
    after = untracked(sp.source)
    if before is not None and after is not None and after - before:
        log("FAILED: Spack left untracked files in the checkout: %s" % sorted(after - before))
        rc = 1
    return rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("what", choices=("check", "install"))
    args = ap.parse_args()
    sp = Spack(args)
    sp.configure()
    rc = check(sp) if args.what == "check" else install(sp)
    log("ok" if rc == 0 else ("skipped" if rc == SKIPPED else "FAILED"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
