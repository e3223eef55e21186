#!/usr/bin/env python3
"""Golden summaries of the PyTorch reference, and paraxis checked against them without torch.

A summary (a few KB per deck) is what tools/reference/compare.py computed with torch: each
step's loss, lm_loss, aux_loss, gradient norm and dropped assignments, and, for step 0's
logits, every step-0 gradient and every final parameter, its L2 norm, a projection on fixed
weights w_i = frac(i * 0.6180339887...) - 0.5 (a change of sign or a permutation changes it
where a norm would not) and its element count. Standard library only, so a machine without
torch still checks paraxis (ctest label `reference`); compare.py --golden keeps the committed
summaries current when torch is present.

Usage: golden.py DUMP GOLDEN   (paraxis's dump, ctest/reference/reference_dump, against it)
"""

import json
import math
import os
import sys

from dump_files import Dump

TOLERANCE = 1e-9  # relative: |a - b| / scale (scale: docs/model.md, "Checked against PyTorch")
# A tensor's scale is its own norm, but at least FLOOR times the largest norm of its kind: a
# tensor that is zero in exact arithmetic (the key bias's gradient) holds rounding noise only.
FLOOR = 1e-3
GOLDEN_RATIO = (math.sqrt(5) - 1) / 2


def summary(values):
    """[L2 norm, projection, elements] of a flat sequence of floats."""
    norm = math.sqrt(math.fsum(v * v for v in values))
    proj = math.fsum(v * ((i * GOLDEN_RATIO) % 1.0 - 0.5) for i, v in enumerate(values))
    return [norm, proj, len(values)]


def summarize(history, logits, gradients, final, manifest):
    """The golden record: history [{loss, lm_loss, aux_loss, grad_norm, dropped}], logits
    (flat), gradients and final {name: flat}."""
    keys = ("loss", "lm_loss", "aux_loss", "grad_norm", "dropped")
    return {"deck": os.path.basename(manifest["deck"]), "sets": manifest["sets"],
            "steps": manifest["steps"],
            "history": [{k: h[k] for k in keys} for h in history],
            "logits": summary(logits),
            "gradients": {n: summary(g) for n, g in sorted(gradients.items())},
            "final": {n: summary(p) for n, p in sorted(final.items())}}


def of_dump(dump):
    """The same record from paraxis's own dump."""
    _, final = dump.checkpoint("final")
    params = {n[len("master/"):]: v for n, (_, v) in final.items() if n.startswith("master/")}
    grads = {n: v for n, (_, v) in dump.gradients().items()}
    return summarize(dump.manifest["history"], dump.logits()[1], grads, params, dump.manifest)


def _close(a, b, scale):
    return abs(a - b) <= TOLERANCE * scale


def differences(got, want):
    """Messages for every figure of `got` outside the tolerance of `want` (empty: they agree)."""
    bad = []
    if len(got["history"]) != len(want["history"]):
        return [f"{len(got['history'])} steps, the golden has {len(want['history'])}"]
    for t, (g, w) in enumerate(zip(got["history"], want["history"])):
        for k in ("loss", "lm_loss", "aux_loss", "grad_norm"):
            if not _close(g[k], w[k], abs(w[k]) or 1.0):
                bad.append(f"step {t} {k}: {g[k]!r}, golden {w[k]!r}")
        if g["dropped"] != w["dropped"]:
            bad.append(f"step {t} dropped: {g['dropped']}, golden {w['dropped']}")
    pairs = [("logits", got["logits"], want["logits"], want["logits"][0])]
    for part in ("gradients", "final"):
        if sorted(got[part]) != sorted(want[part]):
            bad.append(f"{part}: tensors differ from the golden's")
            continue
        floor = FLOOR * max(s[0] for s in want[part].values())
        pairs += [(f"{part} {n}", got[part][n], want[part][n], floor) for n in want[part]]
    for what, (gn, gp, gc), (wn, wp, wc), floor in pairs:
        # The projection's weights are at most 1/2: |projection| <= norm * sqrt(n) / 2.
        scale = max(wn, floor) or 1.0
        if gc != wc or not _close(gn, wn, scale) or not _close(gp, wp, scale * math.sqrt(wc) / 2):
            bad.append(f"{what}: norm {gn!r} projection {gp!r} of {gc}, "
                       f"golden {wn!r} {wp!r} of {wc}")
    return bad


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    with open(argv[2]) as f:
        want = json.load(f)
    bad = differences(of_dump(Dump(argv[1])), want)
    for line in bad:
        print("MISMATCH", line)
    print(f"paraxis against the golden {argv[2]}: {'FAILED' if bad else 'agrees'} "
          f"(relative tolerance {TOLERANCE:g})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
