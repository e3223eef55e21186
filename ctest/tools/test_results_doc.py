#!/usr/bin/env python3
"""docs/results.md's field tables against the results declaration (issue 31): every block between
`<!-- generated: paraxis-results-schema markdown FILE -->` and `<!-- end generated -->` must be
exactly what `paraxis-results-schema markdown FILE` prints (analysis/results_schema_table.cpp),
so a field added, changed or removed in the declaration fails here until the page is regenerated:
--write rewrites each block with the tool's output. Also checks that docs/architecture.md's
worked example "Adding a result field" declares the same line that the unit test
results_schema_unit follows (ctest/driver/test_results_schema.cpp), so the example stays true.

Usage: test_results_doc.py TOOL RESULTS_MD ARCHITECTURE_MD UNIT_TEST_CPP [--write]. Exit 0: every
block matches (or was rewritten); 1: a block or the example differs; 2: bad usage, no block.
"""
import difflib
import re
import subprocess
import sys

BEGIN = re.compile(r"^<!-- generated: paraxis-results-schema markdown (\w+) -->$")
END = "<!-- end generated -->"


def blocks(lines):
    out, i = [], 0
    while i < len(lines):
        m = BEGIN.match(lines[i].rstrip("\n"))
        if m:
            end = i + 1
            while end < len(lines) and lines[end].rstrip("\n") != END:
                end += 1
            if end == len(lines):
                raise ValueError("line %d: the block is never closed" % (i + 1))
            out.append((i, end, m.group(1)))
            i = end + 1
        else:
            i += 1
    return out


def example_line(path):
    """The declaration line of docs/architecture.md's worked example (the one `{"points[]...`
    line inside its section)."""
    text = open(path).read()
    section = text.split("### Adding a result field", 1)
    if len(section) < 2:
        return None
    m = re.search(r'^\s*(\{"points\[\][^\n]*\},)\s*$', section[1], re.M)
    return m.group(1) if m else None


def main():
    args = [a for a in sys.argv[1:] if a != "--write"]
    write = "--write" in sys.argv[1:]
    if len(args) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    tool, doc, arch, unit = args
    lines = open(doc).readlines()
    found = blocks(lines)
    if not found:
        print("%s: no generated block" % doc, file=sys.stderr)
        return 2
    failed = 0
    for start, end, what in reversed(found):
        got = subprocess.run([tool, "markdown", what], stdout=subprocess.PIPE, check=True,
                             universal_newlines=True).stdout.splitlines(True)
        if write:
            lines[start + 1:end] = got
        elif lines[start + 1:end] != got:
            print("%s (line %d): the %s table differs from the declaration "
                  "(regenerate: %s --write):" % (doc, start + 1, what, sys.argv[0]))
            sys.stdout.writelines(difflib.unified_diff(lines[start + 1:end], got, doc, "declared"))
            failed += 1
    if write:
        open(doc, "w").writelines(lines)
    line = example_line(arch)
    if line is None:
        print("%s: no declaration line in \"### Adding a result field\"" % arch)
        failed += 1
    elif line not in open(unit).read():
        print("%s's worked example declares\n  %s\nwhich %s does not follow" % (arch, line, unit))
        failed += 1
    print("%d table(s) %s; the worked example %s" %
          (len(found), "rewritten" if write else "checked", "differs" if failed else "holds"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
