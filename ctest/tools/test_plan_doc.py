#!/usr/bin/env python3
"""docs/plan.md's `paraxis plan` examples against the binary (issue 33): every fenced block whose
first line is `$ build/bin/paraxis plan ...` is run (from the repository root, with the given
binary) and must print exactly the block's remaining lines on stdout (stderr, where a slow
search reports its progress, is not compared). A model change that moves a figure
fails here until the page is regenerated: --write rewrites each block with the binary's output.

Usage: test_plan_doc.py PARAXIS DOC [--write]. Exit 0: every block matches (or was rewritten);
1: a block differs (a unified diff is printed) or a command failed; 2: bad usage or a page
without any such block.
"""
import difflib
import os
import shlex
import subprocess
import sys

PREFIX = "$ build/bin/paraxis plan "


def blocks(lines):
    """(index of the command line, index of the closing fence) of every example block."""
    out = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip("\n") == "```" and i + 1 < len(lines) and \
                lines[i + 1].startswith(PREFIX):
            end = i + 2
            while end < len(lines) and lines[end].rstrip("\n") != "```":
                end += 1
            if end == len(lines):
                raise ValueError("line %d: the block is never closed" % (i + 1))
            out.append((i + 1, end))
            i = end + 1
        else:
            i += 1
    return out


def run(paraxis, root, command):
    argv = shlex.split(command[len("$ "):])
    # stdout only: a slow search reports its progress on stderr, and how slow depends on the
    # machine's load, not on the model.
    proc = subprocess.run([paraxis] + argv[1:], cwd=root, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    return proc.returncode, proc.stdout + (proc.stderr if proc.returncode else "")


def main():
    args = [a for a in sys.argv[1:] if a != "--write"]
    write = "--write" in sys.argv[1:]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    paraxis, doc = os.path.abspath(args[0]), os.path.abspath(args[1])
    root = os.path.dirname(os.path.dirname(doc))
    lines = open(doc).readlines()
    found = blocks(lines)
    if not found:
        print("%s: no block starting with '%s'" % (doc, PREFIX.strip()), file=sys.stderr)
        return 2
    failed = 0
    for start, end in reversed(found):
        command = lines[start].rstrip("\n")
        rc, out = run(paraxis, root, command)
        if rc != 0:
            print("%s (line %d) exited %d:\n%s" % (command, start + 1, rc, out))
            failed += 1
            continue
        want = [l.rstrip("\n") for l in lines[start + 1:end]]
        got = out.rstrip("\n").split("\n")
        if write:
            lines[start + 1:end] = [g + "\n" for g in got]
        elif want != got:
            print("%s (line %d): docs/plan.md differs from the binary's output:" %
                  (command, start + 1))
            sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(
                want, got, "docs/plan.md", "paraxis", lineterm=""))
            failed += 1
        else:
            print("%s (line %d): %d lines match" % (command, start + 1, len(want)))
    if write and not failed:
        open(doc, "w").writelines(lines)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
