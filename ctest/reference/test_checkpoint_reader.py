#!/usr/bin/env python3
"""tools/reference/paraxis_checkpoint.py, the third party's reader (label reference): a shard's
runs against brute-force enumeration (boxes, ranges, 1-3 dimensions, a scalar), and a
checkpoint written here by hand in docs/checkpoint.md's format (a column box, a ZeRO range of a
row box, a scalar) read back; a gap and an overlap refused.

Usage: test_checkpoint_reader.py TOOLS_REFERENCE_DIR
"""

import array
import itertools
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
import paraxis_checkpoint as pc  # noqa: E402


def brute_force(shape, offset, extent, begin, end):
    cells = list(itertools.product(*[range(x) for x in extent]))
    strides = pc._strides(shape)
    return [sum((o + x) * s for o, x, s in zip(offset, cells[i], strides))
            for i in range(begin, end)]


def test_runs():
    rng = random.Random(7)
    for _ in range(500):
        shape = [rng.randint(1, 5) for _ in range(rng.randint(1, 3))]
        extent = [rng.randint(1, s) for s in shape]
        offset = [rng.randint(0, s - x) for s, x in zip(shape, extent)]
        n = 1
        for x in extent:
            n *= x
        begin = rng.randint(0, n)
        end = rng.randint(begin, n)
        got = [g + i for g, _, k in pc._runs(shape, offset, extent, begin, end) for i in range(k)]
        assert got == brute_force(shape, offset, extent, begin, end), (shape, offset, extent)
    assert pc._runs([], [], [], 0, 1) == [(0, 0, 1)]


def write_checkpoint(folder, shards):
    """shards: [(tensor, shape, offset, extent, begin, end, values)], all in rank-0.bin."""
    data, tensors = bytearray(), {}
    for name, shape, offset, extent, begin, end, values in shards:
        b = array.array("d", values).tobytes()
        tensors.setdefault(name, {"name": name, "shape": shape, "dtype": "f64", "shards": []})
        tensors[name]["shards"].append(
            {"rank": 0, "file": "rank-0.bin", "offset": offset, "extent": extent, "begin": begin,
             "end": end, "byte_offset": len(data), "bytes": len(b), "checksum": "0" * 16})
        data += b
    with open(os.path.join(folder, "rank-0.bin"), "wb") as f:
        f.write(data)
    index = {"format": "paraxis-checkpoint", "version": 1, "checksum": "XXH3_64bits", "step": 0,
             "ranks": 1, "meta": {},
             "files": [{"name": "rank-0.bin", "rank": 0, "bytes": len(data)}],
             "tensors": sorted(tensors.values(), key=lambda t: t["name"])}
    with open(os.path.join(folder, "index.json"), "w") as f:
        json.dump(index, f)


def expect_refused(folder, shards, words):
    write_checkpoint(folder, shards)
    try:
        pc.read_checkpoint(folder)
    except ValueError as e:
        assert words in str(e), str(e)
        return
    raise AssertionError(f"accepted a checkpoint with {words}")


def test_round_trip():
    m = [float(i) for i in range(12)]  # a 3 x 4 matrix
    with tempfile.TemporaryDirectory() as d:
        write_checkpoint(d, [
            ("m", [3, 4], [0, 0], [3, 2], 0, 6, [m[r * 4 + c] for r in range(3) for c in (0, 1)]),
            ("m", [3, 4], [0, 2], [3, 2], 0, 3, [m[r * 4 + c] for r in (0, 1) for c in (2, 3)][:3]),
            ("m", [3, 4], [0, 2], [3, 2], 3, 6, [m[7], m[10], m[11]]),
            ("s", [], [], [], 0, 1, [2.5])])
        _, tensors = pc.read_checkpoint(d)
        assert list(tensors["m"][1]) == m and tensors["m"][0] == [3, 4], tensors["m"]
        assert list(tensors["s"][1]) == [2.5]
        expect_refused(d, [("m", [3, 4], [0, 0], [3, 2], 0, 6, m[:6])], "missing")
        expect_refused(d, [("m", [1, 4], [0, 0], [1, 4], 0, 4, m[:4]),
                           ("m", [1, 4], [0, 2], [1, 2], 0, 2, m[:2])], "twice")


if __name__ == "__main__":
    test_runs()
    test_round_trip()
    print("paraxis_checkpoint.py: runs, round trip, gap and overlap refused")
