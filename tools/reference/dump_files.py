"""Reads what ctest/reference/reference_dump wrote (standard library only).

dump.json is the manifest: the run's configuration, each step's losses (`history`), the
tensors' names, shapes and offsets, and where the rest lies: the step-0 and final checkpoints
(paraxis's own format, read by paraxis_checkpoint.py), every step's tokens and targets (int32
little-endian [steps, global_batch, seq_len]), step 0's first micro-batch's logits and step 0's
gradients before clipping (f64 little-endian, tensor after tensor).
"""

import array
import json
import os
import sys

import paraxis_checkpoint


def _read(path, typecode):
    values = array.array(typecode)
    with open(path, "rb") as f:
        values.frombytes(f.read())
    if sys.byteorder != "little":
        values.byteswap()
    return values


class Dump:
    def __init__(self, folder):
        self.folder = folder
        with open(os.path.join(folder, "dump.json")) as f:
            self.manifest = json.load(f)
        if self.manifest.get("format") != "paraxis-reference-dump":
            raise ValueError(f"{folder}/dump.json: not a reference dump")

    def path(self, name):
        return os.path.join(self.folder, name)

    def batches(self):
        """(shape [steps, global_batch, seq_len], tokens, targets) as flat int32 arrays."""
        b = self.manifest["batches"]
        return b["shape"], _read(self.path(b["tokens"]), "i"), _read(self.path(b["targets"]), "i")

    def logits(self):
        logits = self.manifest["logits"]
        return logits["shape"], _read(self.path(logits["file"]), "d")

    def gradients(self):
        """{name: (shape, flat array)} of step 0's gradients, before clipping."""
        flat = _read(self.path(self.manifest["gradients"]), "d")
        out = {}
        for t in self.manifest["tensors"]:
            n = 1
            for d in t["shape"]:
                n *= d
            out[t["name"]] = (t["shape"], flat[t["offset"]:t["offset"] + n])
        return out

    def checkpoint(self, which):
        """`initial` or `final`: (index, {tensor: (shape, flat array)})."""
        return paraxis_checkpoint.read_checkpoint(self.path(self.manifest[which]))
