#!/usr/bin/env python3
"""The reference checks can fail (label reference): errors planted in memory, never committed.

- golden.py (standard library): paraxis's dump with the largest element of one gradient changed
  by 1e-5 of itself, and with one step's loss changed by 1e-8, is refused against the committed
  golden (a summary: a one-element change is seen once it moves its tensor's norm or projection
  by more than 1e-9 of their scale).
- compare.py (torch; else this part is skipped): the reference with LayerNorm eps 1e-6, and
  with capacity applied in expert-major order, disagrees with paraxis's MoE dump; unchanged,
  it agrees (so the comparison is neither vacuous nor broken).

Usage: test_compare_catches.py TOOLS_REFERENCE DUMP GOLDEN
"""

import array
import contextlib
import copy
import io
import sys

sys.path.insert(0, sys.argv[1])
import golden  # noqa: E402
from dump_files import Dump  # noqa: E402


def golden_catches(dump_dir, golden_file):
    import json
    with open(golden_file) as f:
        want = json.load(f)
    dump = Dump(dump_dir)
    assert not golden.differences(golden.of_dump(dump), want), "the unchanged dump must agree"
    grads = dump.gradients()
    name = sorted(grads)[len(grads) // 2]
    shape, values = grads[name]
    values = array.array("d", values)
    at = max(range(len(values)), key=lambda i: abs(values[i]))
    values[at] *= 1 + 1e-5
    dump.gradients = lambda: {**grads, name: (shape, values)}
    bad = golden.differences(golden.of_dump(dump), want)
    assert any(name in line for line in bad), f"a changed element of {name} passed: {bad}"
    changed = copy.deepcopy(want)
    changed["history"][4]["loss"] *= 1 + 1e-8
    bad = golden.differences(golden.of_dump(Dump(dump_dir)), changed)
    assert any("step 4 loss" in line for line in bad), bad
    print(f"golden.py refuses a gradient of {name} changed by 1e-5 and a loss changed by 1e-8")


def compare_verdict(dump_dir, plant):
    """compare.py's exit status with `plant` applied to the reference module."""
    import compare
    import gpt_reference as ref
    saved = dict(vars(ref))
    plant(ref)
    sys.argv = ["compare.py", dump_dir]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return compare.main()
    finally:
        vars(ref).update(saved)


def expert_major(ref):
    def kept(choice, experts, capacity):
        kept = [[] for _ in range(experts)]
        rows = choice.tolist()
        for j in range(len(rows[0])):
            for n, row in enumerate(rows):
                if capacity is None or len(kept[row[j]]) < capacity:
                    kept[row[j]].append((n, j))
        return kept
    ref.kept_assignments = kept


def compare_catches(dump_dir):
    try:
        import torch  # noqa: F401  (only whether it imports)
    except ImportError:
        print("no torch: compare.py's planted errors skipped")
        return
    assert compare_verdict(dump_dir, lambda ref: None) == 0, "the unchanged reference must agree"
    assert compare_verdict(dump_dir, lambda ref: setattr(ref, "LN_EPS", 1e-6)) == 1
    assert compare_verdict(dump_dir, expert_major) == 1
    print("compare.py refuses LayerNorm eps 1e-6 and capacity in expert-major order")


if __name__ == "__main__":
    golden_catches(sys.argv[2], sys.argv[3])
    compare_catches(sys.argv[2])
