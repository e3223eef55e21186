#!/usr/bin/env python3
"""paraxis against the PyTorch reference of its model (docs/model.md, "Checked against PyTorch").

Reads a dump of ctest/reference/reference_dump (paraxis on one rank, fp64): the reference takes
its initial parameters and AdamW moments from the dump's step-0 checkpoint (paraxis's own
format, read by paraxis_checkpoint.py) and its batches from the dump, recomputes step 0's
logits, losses and every gradient with torch autograd, then trains the dump's steps with
torch.optim.AdamW, and compares: logits, loss, lm_loss, aux_loss, dropped assignments, every
gradient, each step's losses and gradient norm, the final parameters and moments.

Usage: compare.py DUMP [--start CHECKPOINT] [--golden FILE | --write-golden FILE]
  --start CHECKPOINT  take the initial state from another step-0 checkpoint (e.g. one saved on
                      several ranks under another layout) instead of the dump's own
  --golden FILE       also check that the committed golden (golden.py) is the reference's own
                      summary: fails when the goldens are stale
  --write-golden FILE write the reference's summary there (regenerating a golden)
Exit status: 0 agree, 1 a difference beyond its tolerance, 2 usage, 77 torch missing.
"""

import argparse
import json
import sys

try:
    import torch
except ImportError:
    print("compare.py: torch is not installed for", sys.executable, "- skipped")
    sys.exit(77)

import golden
import gpt_reference as ref
import paraxis_checkpoint
from dump_files import Dump

# Relative tolerances: max |paraxis - reference| / max |reference| per tensor (a scalar: its
# own magnitude). docs/model.md, "Checked against PyTorch", gives the measured differences.
TOL_STEP0 = 1e-10  # logits, losses, gradients of step 0
TOL_TRAINED = 1e-10  # each step's losses, the final parameters and moments after AdamW
# A tensor whose reference is below ZERO times the largest element of its kind (every gradient,
# parameter, moment) is zero in exact arithmetic plus rounding (the key bias: softmax ignores a
# constant added to a query's scores, so d loss / d bk = 0): a relative difference of two
# roundings means nothing, so paraxis's must be as small, below ZERO times that largest element.
ZERO = 1e-12


def as_tensor(shape, values):
    return torch.tensor(values, dtype=torch.float64).reshape(shape)


def load_state(folder):
    """(completed steps, config, {name: parameter}, {name: (m, v)}) of a checkpoint."""
    index, tensors = paraxis_checkpoint.read_checkpoint(folder)
    params, moments = {}, {}
    for name, (shape, values) in tensors.items():
        kind, _, tensor = name.partition("/")
        if kind == "master":
            params[tensor] = as_tensor(shape, values)
    for tensor in params:
        moments[tensor] = tuple(as_tensor(*tensors[f"{k}/{tensor}"]) for k in ("adam_m", "adam_v"))
    return index["step"], index["meta"]["config"], params, moments


def batches(dump):
    shape, tokens, targets = dump.batches()
    as_long = lambda v: torch.tensor(v, dtype=torch.long).reshape(shape)  # noqa: E731
    return as_long(tokens), as_long(targets)


def reference_step0(params, model, train, tokens, targets):
    """Step 0's logits (first micro-batch), losses and gradients, before clipping."""
    p = {n: t.clone().requires_grad_(True) for n, t in params.items()}
    logits, _, _, _ = ref.forward(p, model, tokens[0][:train["micro_batch"]],
                                  targets[0][:train["micro_batch"]])
    loss, lm, aux, dropped = ref.step_loss(p, model, train, tokens[0], targets[0])
    grads = torch.autograd.grad(loss, list(p.values()), allow_unused=True)
    grads = {n: g if g is not None else torch.zeros_like(p[n]) for n, g in zip(p, grads)}
    return {"logits": logits.detach(), "loss": loss.item(), "lm_loss": float(lm),
            "aux_loss": float(aux), "dropped": dropped, "gradients": grads}


def reference_training(params, moments, step, model, train, tokens, targets, steps):
    """`steps` steps from the state after `step` steps: history, parameters, moments."""
    p = {n: t.clone().requires_grad_(True) for n, t in params.items()}
    opt = ref.make_optimizer(p, train, moments, step)
    history = [ref.train_step(p, opt, model, train, tokens[t], targets[t])
               for t in range(step, step + steps)]
    state = {n: (opt.state[t]["exp_avg"], opt.state[t]["exp_avg_sq"]) for n, t in p.items()}
    return history, {n: t.detach() for n, t in p.items()}, state


def rel(got, want):
    """max |got - want| / max |want| (a scalar: |got - want| / |want|)."""
    got = torch.as_tensor(got, dtype=torch.float64)
    want = torch.as_tensor(want, dtype=torch.float64)
    scale = want.abs().max().item() or 1.0
    return (got - want).abs().max().item() / scale


class Report:
    def __init__(self):
        self.rows = []

    def add(self, what, diff, tol):
        self.rows.append((what, diff, tol))

    def group(self, what, diffs, tol):
        """One line for many tensors: the largest difference, and which."""
        name, worst = max(diffs.items(), key=lambda kv: kv[1])
        self.add(f"{what} ({len(diffs)} tensors; worst {name})", worst, tol)

    def tensors(self, what, got, want, tol):
        """{name: tensor} against the reference's: relative per tensor, or, for the tensors the
        reference holds at rounding level (ZERO), paraxis's largest element over the kind's."""
        largest = max(t.abs().max().item() for t in want.values())
        zero = sorted(n for n, t in want.items() if t.abs().max().item() <= ZERO * largest)
        self.group(what, {n: rel(got[n], want[n]) for n in want if n not in zero}, tol)
        if zero:
            worst = max(max(got[n].abs().max().item(), want[n].abs().max().item()) for n in zero)
            self.add(f"{what}, zero in exact arithmetic: largest |x| over the largest of all "
                     f"({', '.join(zero)})", worst / largest, ZERO)

    def print(self):
        for what, diff, tol in self.rows:
            print(f"{'ok  ' if diff <= tol else 'FAIL'} {diff:9.2e} <= {tol:.0e}  {what}")
        return all(diff <= tol for _, diff, tol in self.rows)


def compare_step0(dump, r, rep):
    shape, logits = dump.logits()
    rep.add("step 0 logits, first micro-batch", rel(as_tensor(shape, logits), r["logits"]),
            TOL_STEP0)
    h0 = dump.manifest["history"][0]
    for k in ("loss", "lm_loss", "aux_loss"):
        rep.add(f"step 0 {k}", rel(h0[k], r[k]), TOL_STEP0)
    rep.add("step 0 dropped assignments (count)", abs(h0["dropped"] - r["dropped"]), 0)
    grads = {n: as_tensor(*g) for n, g in dump.gradients().items()}
    rep.tensors("step 0 gradients", grads, r["gradients"], TOL_STEP0)
    norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in r["gradients"].values()]))
    rep.add("step 0 gradient norm", rel(h0["grad_norm"], norm.item()), TOL_STEP0)


def compare_training(dump, first, history, params, state, rep):
    """The reference's steps first.. against the dump's, and the final state."""
    mine = dump.manifest["history"][first:]
    for k in ("loss", "lm_loss", "aux_loss", "grad_norm"):
        rep.add(f"{k} of steps {first}-{len(mine) + first - 1}",
                max(rel(h[k], r[k]) for h, r in zip(mine, history)), TOL_TRAINED)
    rep.add(f"dropped assignments of steps {first}-{len(mine) + first - 1} (count)",
            max(abs(h["dropped"] - r["dropped"]) for h, r in zip(mine, history)), 0)
    _, final = dump.checkpoint("final")
    for kind, of in (("master", lambda n: params[n]), ("adam_m", lambda n: state[n][0]),
                     ("adam_v", lambda n: state[n][1])):
        rep.tensors(f"final {kind}", {n: as_tensor(*final[f"{kind}/{n}"]) for n in params},
                    {n: of(n) for n in params}, TOL_TRAINED)


def check_golden(a, dump, r0, history, final):
    """Writes (--write-golden) or checks (--golden) the reference's summary; False: stale."""
    mine = golden.summarize(history, r0["logits"].flatten().tolist(),
                            {n: g.flatten().tolist() for n, g in r0["gradients"].items()},
                            {n: t.flatten().tolist() for n, t in final.items()}, dump.manifest)
    if a.write_golden:
        with open(a.write_golden, "w") as f:
            json.dump(mine, f, indent=None, separators=(",", ":"))
            f.write("\n")
    if not a.golden:
        return True
    with open(a.golden) as f:
        stale = golden.differences(mine, json.load(f))
    for line in stale:
        print("STALE GOLDEN", line)
    print(f"the committed golden {a.golden} is {'STALE: regenerate it' if stale else 'current'}"
          " (compare.py DUMP --write-golden FILE)")
    return not stale


def same_run(config, dump):
    """What must match between a start checkpoint and the dump: the model and what decides the
    steps (the rest of the configuration, the layout above all, may differ)."""
    mine = dump.manifest["config"]
    keys = ("global_batch", "micro_batch", "lr", "beta1", "beta2", "adam_eps", "weight_decay",
            "grad_clip", "seed", "corpus_branching", "precision")
    bad = [k for k in keys if config["train"][k] != mine["train"][k]]
    bad += ["model"] if config["model"] != mine["model"] else []
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dump")
    ap.add_argument("--start")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--golden")
    g.add_argument("--write-golden")
    a = ap.parse_args()
    dump = Dump(a.dump)
    step, config, params, moments = load_state(a.start or dump.path(dump.manifest["initial"]))
    bad = same_run(config, dump)
    if bad or (a.start and (a.golden or a.write_golden)) or step >= dump.manifest["steps"]:
        print(f"compare.py: {a.start} does not continue the dump's run ({', '.join(bad)}; "
              f"step {step}), or --start was given with a golden")
        return 2
    model, train = config["model"], config["train"]
    tokens, targets = batches(dump)
    rep, ok = Report(), True
    if step == 0:
        r0 = reference_step0(params, model, train, tokens, targets)
        compare_step0(dump, r0, rep)
    history, final, state = reference_training(params, moments, step, model, train, tokens,
                                               targets, dump.manifest["steps"] - step)
    compare_training(dump, step, history, final, state, rep)
    ok = rep.print()
    if not a.start:
        ok = check_golden(a, dump, r0, history, final) and ok
    print(f"paraxis against the PyTorch reference (torch {torch.__version__}, fp64), from "
          f"{a.start or 'its step-0 checkpoint'}: {'agrees' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
