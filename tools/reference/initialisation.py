#!/usr/bin/env python3
"""docs/model.md's initialisation, written again from its text, against a step-0 checkpoint.

Standard library only. For every parameter of the checkpoint (paraxis_checkpoint.py reads it),
the value docs/model.md, "Initialisation", gives element i of tensor `name` for `train.seed`:
key = splitmix64(FNV-1a-64(name) ^ splitmix64(seed)); u_c = ((r >> 11) + 0.5) 2^-53 with
r = splitmix64(key ^ splitmix64(c)); N(0, 1) = sqrt(-2 ln u_2i) cos(2 pi u_2i+1) (Box-Muller);
the table's standard deviations, ones, zeros and the router bias -skew ln(e + 1). The AdamW
moments must be 0. A third party can thus regenerate paraxis's initial parameters, and a change
of the initialisation that the page does not describe fails here.

Usage: initialisation.py STEP0_CHECKPOINT_FOLDER
"""

import math
import sys

import paraxis_checkpoint

MASK = (1 << 64) - 1
TOLERANCE = 1e-14  # relative per element: the same formula, libm's log and cos (1 ulp apart)


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def normal(name, seed, count):
    key = splitmix64(fnv1a64(name) ^ splitmix64(seed))

    def uniform(c):
        return ((splitmix64(key ^ splitmix64(c)) >> 11) + 0.5) * 2.0 ** -53

    return [math.sqrt(-2.0 * math.log(uniform(2 * i))) * math.cos(2 * math.pi * uniform(2 * i + 1))
            for i in range(count)]


def expected(name, count, model, seed):
    """docs/model.md's table for tensor `name` of `count` elements."""
    last = name.rsplit(".", 1)[-1]
    if last == "gamma":
        return [1.0] * count
    if last == "router_bias":
        return [-model["moe"]["router_skew"] * math.log(e + 1) for e in range(count)]
    if last in ("beta", "bq", "bk", "bv", "bo", "b1", "b2"):
        return [0.0] * count
    residual = name.endswith(("attn.wo", "mlp.w2")) or (".experts." in name and last == "w2")
    std = 0.02 / math.sqrt(2 * model["layers"]) if residual else 0.02
    return [std * z for z in normal(name, seed, count)]


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    index, tensors = paraxis_checkpoint.read_checkpoint(argv[1])
    config = index["meta"]["config"]
    bad, count = [], 0
    for full, (_, values) in sorted(tensors.items()):
        kind, _, name = full.partition("/")
        want = (expected(name, len(values), config["model"], config["train"]["seed"])
                if kind == "master" else [0.0] * len(values))
        worst = max((abs(g - w) / max(abs(w), 1e-300) if w else abs(g)
                     for g, w in zip(values, want)), default=0.0)
        count += len(values)
        if worst > TOLERANCE:
            bad.append(f"{full}: {worst:.2e} from docs/model.md's initialisation")
    for line in bad:
        print("MISMATCH", line)
    print(f"{argv[1]}: {len(tensors)} tensors, {count} elements: "
          f"{'FAILED' if bad else 'the documented initialisation'} (relative {TOLERANCE:g})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
