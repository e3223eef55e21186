#!/usr/bin/env python3
"""behaviour_diff.py A.json B.json [--rel-tol X]

Compares two behaviour fingerprints (tools/behaviour_fingerprint.py) and prints every difference
with its JSON path, e.g. `runs.1rank[0].steps[2].loss: 3.470347601614550 != 3.470347601614551`.
Exit status: 0 identical, 1 differences, 2 bad input.

Numbers are compared bitwise by default (the same build on the same machine is bitwise
reproducible: docs/parallel.md). --rel-tol X accepts |a - b| <= X * max(|a|, |b|) for floats, for
comparisons across machines or compilers (-march=native may contract a*b+c into an FMA
differently); integers, strings, booleans and structure are always compared exactly.
Inside a `config` object only the keys present on both sides are compared: a refactor may add
deck keys, and their defaults are checked by the results they produce. Any other key present on
one side only is a difference.
"""
import argparse
import json
import math
import sys


def fmt(v):
    return repr(v) if isinstance(v, float) else json.dumps(v)


def equal_numbers(a, b, rel_tol):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if rel_tol == 0.0:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return abs(a - b) <= rel_tol * max(abs(a), abs(b))


def diff(a, b, path, rel_tol, in_config, out, notes):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            sub = "%s.%s" % (path, k) if path else k
            if k not in b or k not in a:
                side = "A" if k in a else "B"
                line = "%s: only in %s (%s)" % (sub, side, fmt(a.get(k, b.get(k)))[:120])
                (notes if in_config else out).append(line)
                continue
            diff(a[k], b[k], sub, rel_tol, in_config or k == "config", out, notes)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append("%s: length %d != %d" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i), rel_tol, in_config, out, notes)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
            isinstance(a, bool) == isinstance(b, bool):
        if not equal_numbers(a, b, rel_tol):
            out.append("%s: %s != %s" % (path, fmt(a), fmt(b)))
    elif type(a) is not type(b) or a != b:
        out.append("%s: %s != %s" % (path, fmt(a)[:200], fmt(b)[:200]))


def load(path):
    try:
        with open(path) as f:
            fp = json.load(f)
    except (OSError, ValueError) as e:
        sys.stderr.write("behaviour_diff: cannot read '%s': %s\n" % (path, e))
        sys.exit(2)
    if not isinstance(fp, dict) or fp.get("schema") != "paraxis.behaviour/1":
        sys.stderr.write("behaviour_diff: '%s' is not a behaviour fingerprint (schema %r, "
                         "expected 'paraxis.behaviour/1')\n" % (path, fp.get("schema")
                                                                if isinstance(fp, dict) else None))
        sys.exit(2)
    return fp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[2])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rel-tol", type=float, default=0.0,
                    help="relative tolerance for floats (default 0: bitwise)")
    args = ap.parse_args()
    if not (args.rel_tol >= 0.0 and math.isfinite(args.rel_tol)):
        sys.stderr.write("behaviour_diff: --rel-tol %r: expected a finite number >= 0\n"
                         % args.rel_tol)
        return 2
    out, notes = [], []
    diff(load(args.a), load(args.b), "", args.rel_tol, False, out, notes)
    for line in notes:
        print("note (config key on one side, not compared): " + line)
    for line in out:
        print(line)
    if out:
        print("behaviour_diff: %d difference(s) between %s and %s" % (len(out), args.a, args.b))
        return 1
    print("behaviour_diff: identical (%s)" % ("bitwise" if args.rel_tol == 0.0 else
                                             "rel-tol %g" % args.rel_tol))
    return 0


if __name__ == "__main__":
    sys.exit(main())
