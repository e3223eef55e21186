#!/usr/bin/env python3
"""function_length.py: fails on any non-test C++ function longer than the limit.

The project's size rule is about functions, not files (docs/architecture.md, "Functions, not
files, are the unit of size"): no function of miniapp/, kernels/ or benchmarks/ is longer than
LIMIT lines (default 60), counted from the line of its name to its closing brace, as
universal-ctags reports them (kind `function`, fields `line` and `end`). Lambdas count inside the
function that holds them; the tests (ctest/) and generated files are not checked.

An exception is one line of the exceptions file (default tools/function_length_exceptions.txt):

    <path> <function>   # why it is long (required)

<function> is the name as ctags gives it, prefixed by its class when it is a member
(`ParallelTrainer::step`). A listed function that is no longer over the limit, or no longer
exists, fails the check too ("stale exception"), so the list only shrinks with the code.

Use:  tools/function_length.py [--root DIR] [--limit N] [--exceptions FILE] [FOLDER...]
      tools/function_length.py --self-test      # the check can fail (CTest tools_function_length_catches)
Exit 0: no violation; 1: violations or stale exceptions, each named; 2: usage or ctags missing.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

DEFAULT_FOLDERS = ["miniapp", "kernels", "benchmarks"]


def functions(root, folders):
    """(path, name, first line, length) of every named C++ function under the folders."""
    ctags = shutil.which("ctags")
    if not ctags:
        sys.exit("function_length: universal-ctags (`ctags`) is not on PATH")
    cmd = [ctags, "--output-format=json", "--fields=+ne", "--kinds-C++=f", "--languages=C++",
           "--langmap=C++:+.inl", "-R", "-f", "-"] + folders
    out = subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or tag["name"].startswith("__anon") or "end" not in tag:
            continue
        name = tag["name"]
        if tag.get("scopeKind") in ("class", "struct"):
            name = tag["scope"].split("::")[-1] + "::" + name
        rows.append((tag["path"], name, tag["line"], tag["end"] - tag["line"] + 1))
    return rows


def read_exceptions(path):
    """{(path, function): reason}; a line without a reason is an error."""
    exceptions, errors = {}, []
    if not path:
        return exceptions, errors
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            entry, _, reason = text.partition("#")
            fields = entry.split()
            if len(fields) != 2 or not reason.strip():
                errors.append(f"{path}:{number}: expected '<path> <function>  # reason', got '{text}'")
                continue
            exceptions[(fields[0], fields[1])] = reason.strip()
    return exceptions, errors


def check(root, folders, limit, exceptions_path):
    exceptions, problems = read_exceptions(exceptions_path)
    longest = {}
    for path, name, line, length in functions(root, folders):
        key = (path, name)
        if length > longest.get(key, (0, 0))[0]:
            longest[key] = (length, line)
    for (path, name), (length, line) in sorted(longest.items()):
        if length > limit and (path, name) not in exceptions:
            problems.append(f"{path}:{line}: {name} is {length} lines (limit {limit}); split it, "
                            f"or list it with a reason in the exceptions file")
    for (path, name) in sorted(exceptions):
        length = longest.get((path, name), (0, 0))[0]
        if length <= limit:
            state = "no longer exists" if length == 0 else f"is {length} lines now"
            problems.append(f"stale exception: {path} {name} {state}; remove it from "
                            f"{exceptions_path}")
    return problems


def self_test():
    """The check refuses a long function, accepts it when excepted, and flags a stale entry."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "miniapp"))
        body = "".join(f"  x += {i};\n" for i in range(70))
        with open(os.path.join(root, "miniapp", "long.cpp"), "w", encoding="utf-8") as f:
            f.write("int short_one() { return 1; }\n"
                    f"int long_one() {{\n  int x = 0;\n{body}  return x;\n}}\n")
        exc = os.path.join(root, "exceptions.txt")
        verdicts = []
        with open(exc, "w", encoding="utf-8") as f:
            f.write("")
        p = check(root, ["miniapp"], 60, exc)
        verdicts.append(len(p) == 1 and "long_one is 74 lines" in p[0])
        with open(exc, "w", encoding="utf-8") as f:
            f.write("miniapp/long.cpp long_one  # fixture\n")
        verdicts.append(check(root, ["miniapp"], 60, exc) == [])
        with open(exc, "w", encoding="utf-8") as f:
            f.write("miniapp/long.cpp long_one  # fixture\nminiapp/long.cpp short_one  # fixture\n")
        p = check(root, ["miniapp"], 60, exc)
        verdicts.append(len(p) == 1 and "stale exception" in p[0] and "short_one" in p[0])
        with open(exc, "w", encoding="utf-8") as f:
            f.write("miniapp/long.cpp long_one\n")
        p = check(root, ["miniapp"], 60, exc)
        verdicts.append(any("expected" in x for x in p))
    names = ["long function named", "exception accepted", "stale exception named",
             "exception without a reason refused"]
    for name, ok in zip(names, verdicts):
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(verdicts) else 1


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="*", default=DEFAULT_FOLDERS)
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--exceptions", default=os.path.join(here, "function_length_exceptions.txt"))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    exceptions = os.path.relpath(args.exceptions) if args.exceptions else args.exceptions
    problems = check(args.root, args.folders, args.limit, args.exceptions)
    for p in problems:
        print(p.replace(args.exceptions, exceptions))
    if problems:
        print(f"function_length: {len(problems)} problem(s); rule: docs/architecture.md")
        return 1
    print(f"function_length: every function of {', '.join(args.folders)} within {args.limit} lines "
          f"or listed with a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
