#!/usr/bin/env python3
"""The exit codes are declared once (miniapp/config/exit_codes.hpp) and everything else agrees.

Checks, each of which fails with the file and the code it is about:
  1. docs/results.md's "Exit status" table lists exactly the enumeration's values;
  2. slurm/restart.sbatch's retryable() decides only on declared codes, each case line's
     comment naming the enumerators of its codes (or saying why a code stops);
  3. no C++ source of miniapp/ or benchmarks/ ends a process with a bare number
     (MPI_Abort(comm, N), exit(N), _exit(N), _Exit(N), quick_exit(N)), where N is not 0.
The patterns of 3 are run on lines that must match and lines that must not first, so the
check cannot silently pass by matching nothing.

Use: test_exit_codes.py SOURCE_DIR
"""

import os
import re
import sys

BARE_EXIT = re.compile(r"\b(?:MPI_Abort\s*\([^,()]*,|(?:std::|::)?(?:_?exit|_Exit|quick_exit)\s*\()"
                       r"\s*[1-9][0-9]*\s*\)")


def enumeration(src):
    text = open(os.path.join(src, "miniapp/config/exit_codes.hpp")).read()
    body = re.search(r"enum\s+Code\s*:\s*int\s*\{(.*?)\};", text, re.S)
    if not body:
        sys.exit("exit_codes.hpp: no `enum Code : int { ... };`")
    code = re.sub(r"//[^\n]*", "", body.group(1))
    pairs = re.findall(r"(\w+)\s*=\s*(\d+)", code)
    return {name: int(value) for name, value in pairs}


def documented(src):
    text = open(os.path.join(src, "docs/results.md")).read()
    section = text.split("### Exit status", 1)
    if len(section) < 2:
        return None
    body = re.split(r"^#", section[1], maxsplit=1, flags=re.M)[0]  # up to the next heading
    return [int(c) for c in re.findall(r"^\| (\d+) \|", body, re.M)]


def sbatch_cases(src):
    text = open(os.path.join(src, "slurm/restart.sbatch")).read()
    body = re.search(r"retryable\(\) \{(.*?)\n\}", text, re.S)
    cases = []
    for line in body.group(1).splitlines():
        m = re.match(r"\s*([0-9 |]+)\)[^#]*#\s*(.*)", line)
        if m:
            cases.append(([int(c) for c in m.group(1).split("|")], m.group(2)))
    return cases


def bare_exits(src):
    found = []
    for folder in ("miniapp", "benchmarks"):
        for root, _, files in os.walk(os.path.join(src, folder)):
            for f in files:
                if not f.endswith((".cpp", ".hpp", ".inl")):
                    continue
                path = os.path.join(root, f)
                for n, line in enumerate(open(path, errors="replace"), 1):
                    code = line.split("//", 1)[0]
                    if BARE_EXIT.search(code):
                        found.append("%s:%d: %s" % (os.path.relpath(path, src), n, line.strip()))
    return found


def main():
    src = sys.argv[1]
    failures = []
    codes = enumeration(src)
    if len(codes) < 7 or codes.get("ok") != 0 or codes.get("bad_input") != 2:
        failures.append("exit_codes.hpp: parsed %s, expected ok = 0, ..., bad_input = 2" % codes)
    values = sorted(codes.values())

    docs = documented(src)
    if docs is None:
        failures.append("docs/results.md: no '### Exit status' section")
    elif sorted(docs) != values:
        failures.append("docs/results.md 'Exit status' lists %s; exit_codes.hpp declares %s"
                        % (sorted(docs), values))

    names = {v: k for k, v in codes.items()}
    cases = sbatch_cases(src)
    if not cases:
        failures.append("slurm/restart.sbatch: retryable() has no case on an exit code")
    for numbers, comment in cases:
        for n in numbers:
            if n not in names:
                failures.append("slurm/restart.sbatch: retryable() decides on %d, which "
                                "exit_codes.hpp does not declare" % n)
            elif not re.search(r"\b%s\b" % names[n], comment):
                failures.append("slurm/restart.sbatch: the comment of case %s does not name %s "
                                "(the code %d)" % (numbers, names[n], n))

    for must, line in ((True, "MPI_Abort(MPI_COMM_WORLD, 5);"), (True, "std::_Exit(3);"),
                       (True, "::_exit(130);"), (True, "exit(2);"),
                       (False, "MPI_Abort(MPI_COMM_WORLD, exit_code::hang);"),
                       (False, "std::exit(0);"), (False, "return app.exit(e);")):
        if bool(BARE_EXIT.search(line)) != must:
            failures.append("self-test: the bare-exit pattern %s '%s'"
                            % ("misses" if must else "wrongly matches", line))
    for hit in bare_exits(src):
        failures.append("a bare exit number (use exit_code::): " + hit)

    for f in failures:
        print("FAIL:", f)
    print("exit codes: %d declared (%s); %d failure(s)"
          % (len(codes), ", ".join("%s=%d" % kv for kv in codes.items()), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
