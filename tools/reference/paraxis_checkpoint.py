"""Reads a paraxis checkpoint folder without paraxis (docs/checkpoint.md, "Format").

A third party's reader, standard library only: index.json says, for every tensor, its shape,
dtype and shards; each shard is a box of the tensor (offset, extent per dimension) and, in the
box's own row-major order, the flat element range [begin, end), stored as raw little-endian
bytes at byte_offset in rank-<R>.bin. read_checkpoint assembles every tensor from its shards,
whatever layout (tensor, pipeline, data, expert parallelism, ZeRO) wrote them, and checks that
the shards cover each tensor exactly once and that every file holds the bytes the index names.
What it does not check: the shards' XXH3 checksums (no XXH3 in Python's standard library).
"""

import array
import json
import os
import sys

FORMAT = "paraxis-checkpoint"
VERSIONS = (1, 2)  # 2 added the run lineage, which a reader of the tensors does not need
TYPECODES = {"f64": "d", "f32": "f", "i64": "q", "u64": "Q"}


def _elements(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _strides(shape):
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return list(reversed(out))


def _runs(shape, offset, extent, begin, end):
    """(first global element, first shard element, length) of each contiguous run."""
    if not shape:
        return [(0, 0, end - begin)] if end > begin else []
    gstride, bstride = _strides(shape), _strides(extent)
    last = extent[-1]
    runs, i = [], begin
    while i < end:
        col = i % last
        n = min(last - col, end - i)
        rem, g = i, 0
        for d in range(len(shape)):
            idx, rem = divmod(rem, bstride[d])
            g += (offset[d] + idx) * gstride[d]
        runs.append((g, i - begin, n))
        i += n
    return runs


def read_index(folder):
    with open(os.path.join(folder, "index.json")) as f:
        index = json.load(f)
    if index.get("format") != FORMAT or index.get("version") not in VERSIONS:
        raise ValueError(f"{folder}: not a {FORMAT} index of version "
                         f"{' or '.join(map(str, VERSIONS))}")
    return index


def _shard_values(folder, tensor, shard, sizes):
    path = os.path.join(folder, shard["file"])
    if path not in sizes:
        sizes[path] = os.path.getsize(path)
    if shard["byte_offset"] + shard["bytes"] > sizes[path]:
        raise ValueError(f"{path}: shorter than the index says (tensor {tensor['name']})")
    values = array.array(TYPECODES[tensor["dtype"]])
    with open(path, "rb") as f:
        f.seek(shard["byte_offset"])
        values.frombytes(f.read(shard["bytes"]))
    if sys.byteorder != "little":
        values.byteswap()
    if len(values) != shard["end"] - shard["begin"]:
        raise ValueError(f"{path}: tensor {tensor['name']}: shard of the wrong size")
    return values


def read_tensor(folder, tensor, sizes=None):
    """One tensor of the index, assembled: (shape, flat array of its elements, row-major)."""
    sizes = {} if sizes is None else sizes
    shape = tensor["shape"]
    n = _elements(shape)
    out = array.array(TYPECODES[tensor["dtype"]], [0]) * n
    written = bytearray(n)
    for shard in tensor["shards"]:
        values = _shard_values(folder, tensor, shard, sizes)
        for g, s, k in _runs(shape, shard["offset"], shard["extent"], shard["begin"], shard["end"]):
            if any(written[g:g + k]):
                raise ValueError(f"tensor {tensor['name']}: elements {g}.. written twice")
            out[g:g + k] = values[s:s + k]
            written[g:g + k] = b"\x01" * k
    if not all(written):
        raise ValueError(f"tensor {tensor['name']}: element {written.index(0)} missing")
    return shape, out


def read_checkpoint(folder):
    """(index, {name: (shape, flat array)}) of every tensor of the checkpoint folder."""
    index = read_index(folder)
    sizes = {}
    return index, {t["name"]: read_tensor(folder, t, sizes) for t in index["tensors"]}
