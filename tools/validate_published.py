#!/usr/bin/env python3
"""Planner against published runs (issues 18, 33): `paraxis plan --layout` on every row of every
published source in inputs/published/, against the step time the source measured or implies,
with the machine-type parameters fitted leave-one-source-out.

Sources (each deck's header cites its figures; docs/perfmodel.md, "Validation", the table):
  narayanan2021  Narayanan et al. 2021 (SC21) Table 1, 10 rows, A100 (Selene), Megatron-LM
  mtnlg530b      Smith et al. 2022 section 2.4, 3 rows, A100 (Selene), DeepSpeed + Megatron:
                 measured step times
  bloom176b      BLOOM 176B, 1 row, A100 (Jean Zay), Megatron-DeepSpeed: measured step time
  mixtral8x7b    Megatron-Core MoE README, Mixtral 8x7B, 1 row, H100, expert parallelism
  nemo175b       NVIDIA DGX Cloud Benchmarking v24.11.1, GPT-3 175B on NeMo Megatron 24.11, BF16,
                 5 rows (128 to 2,048 GPUs), H100: measured step times
Published step time: measured where the source gives it, else the source's FLOPs per step by its
own convention / (GPUs x its achieved FLOP/s per GPU) (`published_step` of each source).
Software stack: what the deck cannot say is a machine-file key (pipeline_transfers: blocking for
DeepSpeed's pipeline engine); a source whose machine also ran another stack sets it over the
machine file (Source.stack: MT-NLG on Selene, which Narayanan et al. ran with Megatron-LM).

Fit: per GPU type, the machine file's gemm_efficiency and memory_efficiency (docs/perfmodel.md,
"Compute efficiency"): 2 parameters, over a grid, minimising the mean over training sources of
each source's mean absolute error. A training source is one whose publication gives every figure
of its layout; a source whose deck assumes one (Source.unstated: MT-NLG's micro-batch size) is
predicted and reported like the others but never fitted on. Every other machine figure is a datasheet's (the machine
files say which). Leave-one-source-out: each source is predicted with the parameters fitted on
the other sources of its GPU type; with one training row only gemm_efficiency is fitted
(memory_efficiency at the model's default 0.8); with none (a GPU type's only source) the
efficiencies fitted on every source of the other GPU types are carried over, which tests
whether the fit transfers across GPU generations.

Modes: default, every row with the committed machine files; --loso, the leave-one-source-out
table with each held-out row, exit 1 when a held-out source misses the targets (mean <= 5 %,
max <= 10 %; the CTest planner_published_validation); --fit, the all-sources fit per GPU type
(the A100 and H100 figures the machine files carry); --decompose, a source whose rows differ only in dp as pipeline slots and a per-step
rest. --no-accumulation (a diagnostic) leaves out the stacks' gradient accumulation pass, which
the machine files charge (gradient_accumulation_bytes): the model of rounds 1-5.
Python 3 standard library only. Exit 0 on success; 1 when a row could not be evaluated or
(--loso) a target is missed; 2 bad usage.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

TARGET_MEAN = 5.0
TARGET_MAX = 10.0
# Held-out sources that miss the targets today, with the figures measured when this list was
# last updated (held-out mean %, max %) and the measured reason (docs/perfmodel.md,
# "Validation"). --known-misses (the CTest) lets them pass while they get no worse than that by
# more than SLACK points, and fails once one meets the targets (then remove it here): a model
# change that helps one table and hurts another shows up either way.
KNOWN_MISSES = {
    # Narayanan's 530B shape on the same Selene, 13-18 % slower than the fit predicts with
    # micro-batch 1, which the paper does not state (the deck assumes it). --decompose: the rows'
    # own dp dependence gives the per-micro-batch slot within 3 % of the model's at mb 1 or 2;
    # at mb 1 they need 6.0 +- 1.6 s more per step than any modelled per-step cost (0.24 s), at
    # mb 2 none (-0.7 +- 1.8 s against -0.02 s); adopting mb 2 would fit the deck to the rows.
    # Its bf16 stack predates public DeepSpeed's bf16 (round 5 log): its per-step work is not
    # documented either. Since round 6 the machine files charge each stack's gradient
    # accumulation pass, and the A100 fit rises (0.62 -> 0.68): 13.3 / 15.3 % before.
    "mtnlg530b": (15.6, 17.6),
}
SLACK = 0.5
FIT_UNSTATED = [False]  # --fit-unstated (a diagnostic): fit on every source
DEFAULT_MEMORY_EFFICIENCY = 0.8  # compute_efficiency.hpp's default: the one-row fit keeps it


class Row:
    """One published measurement: a deck, a layout for `paraxis plan --layout`, the published
    step time (s)."""

    def __init__(self, name, deck, layout, published, note=""):
        self.name, self.deck, self.layout, self.published, self.note = (name, deck, layout,
                                                                          published, note)


class Source:
    """stack: machine-file keys of the source's software stack set over its machine file (the
    file describes the hardware and, where only one stack ran on it, that stack). unstated: the
    layout figures the publication does not give (the deck assumes them): such a source is
    validated but never fitted on, since a fit to it would fit the assumption."""

    def __init__(self, key, cite, gpu, machine, rows, stack=None, unstated=()):
        self.key, self.cite, self.gpu, self.machine, self.rows = key, cite, gpu, machine, rows
        self.stack = stack or {}
        self.unstated = tuple(unstated)

    def trains(self):
        return not self.unstated or FIT_UNSTATED[0]


# --- Narayanan et al. 2021, Table 1 -------------------------------------------------------------
SEQ = 2048
VOCAB = 51200
# name, heads, hidden, layers, tp, pp, GPUs, global batch, TFLOP/s per GPU, % of peak,
# micro-batch, schedule, virtual stages. TFLOP/s, % of peak, hidden, layers, GPUs, batch:
# Megatron-LM README at commit 9ec547c9ff, images/cases_april2021.png. Heads, tp, pp,
# micro-batch, virtual stages (layers / (pp x --num-layers-per-virtual-pipeline-stage)):
# Megatron-LM examples/academic_paper_scripts/sc21/run_table_1.sh.
NARAYANAN = [
    ("1.7b", 24, 2304, 24, 1, 1, 32, 512, 137, 44, 16, "1f1b", 1),
    ("3.6b", 32, 3072, 30, 2, 1, 64, 512, 138, 44, 16, "1f1b", 1),
    ("7.5b", 32, 4096, 36, 4, 1, 128, 512, 142, 46, 16, "1f1b", 1),
    ("18b", 48, 6144, 40, 8, 1, 256, 1024, 135, 43, 8, "1f1b", 1),
    ("39b", 64, 8192, 48, 8, 2, 512, 1536, 138, 44, 4, "1f1b", 1),
    ("76b", 80, 10240, 60, 8, 4, 1024, 1792, 140, 45, 2, "interleaved", 3),
    ("145b", 96, 12288, 80, 8, 8, 1536, 2304, 148, 47, 2, "interleaved", 2),
    ("310b", 128, 16384, 96, 8, 16, 1920, 2160, 155, 50, 1, "interleaved", 2),
    ("530b", 128, 20480, 105, 8, 35, 2520, 2520, 163, 52, 1, "interleaved", 3),
    ("1t", 160, 25600, 128, 8, 64, 3072, 3072, 163, 52, 1, "1f1b", 1),
]


def narayanan_flops(batch, layers, hidden):
    """FLOPs per step by the paper's count (section 5.1, formula 3: forward, backward and the
    recomputed forward): Table 1's TFLOP/s are hardware FLOPs."""
    return (96.0 * batch * SEQ * layers * hidden**2 *
            (1.0 + SEQ / (6.0 * hidden) + VOCAB / (16.0 * layers * hidden)))


def narayanan_rows(decks):
    rows = []
    for (name, heads, hidden, layers, tp, pp, gpus, batch, tflops, _pct, mb, sched,
         v) in NARAYANAN:
        deck = os.path.join(decks, "megatron-%s.yaml" % name)
        check_deck(deck, {"heads": heads, "hidden": hidden, "layers": layers,
                          "global_batch": batch, "seq_len": SEQ, "vocab": VOCAB})
        layout = "tp=%d,pp=%d,dp=%d,mb=%d,schedule=%s,v=%d,recompute=full" % (
            tp, pp, gpus // (tp * pp), mb, sched, v)
        published = narayanan_flops(batch, layers, hidden) / (gpus * tflops * 1e12)
        rows.append(Row(name, deck, layout, published, "%d TFLOP/s x %d GPUs" % (tflops, gpus)))
    return rows


# --- BLOOM 176B ---------------------------------------------------------------------------------
def bloom_rows(decks):
    """The measured iteration time of the log line at iteration 85376 (bloom-176b.yaml)."""
    deck = os.path.join(decks, "bloom-176b.yaml")
    check_deck(deck, {"heads": 112, "hidden": 14336, "layers": 70, "global_batch": 2048,
                      "seq_len": 2048, "vocab": 250880})
    return [Row("176b", deck, "tp=4,pp=12,dp=8,mb=2,zero=1,schedule=1f1b,recompute=full", 104.70,
                "measured s/iteration, 384 GPUs")]


# --- Megatron-Turing NLG 530B -------------------------------------------------------------------
MTNLG = [(280, 8, 60.1), (350, 10, 50.2), (420, 12, 44.4)]  # DGX A100 servers, dp, s/iteration


def mtnlg_rows(decks):
    """Smith et al. 2022, section 2.4: measured seconds per iteration (mtnlg-530b.yaml)."""
    deck = os.path.join(decks, "mtnlg-530b.yaml")
    check_deck(deck, {"heads": 128, "hidden": 20480, "layers": 105, "global_batch": 1920,
                      "seq_len": 2048, "vocab": 51200})
    return [Row("%dn" % nodes, deck,
                "tp=8,pp=35,dp=%d,mb=1,zero=1,schedule=1f1b,recompute=full" % dp, step,
                "measured s/iteration, %d GPUs" % (8 * nodes)) for nodes, dp, step in MTNLG]


# --- Mixtral 8x7B, Megatron-Core MoE ------------------------------------------------------------
def megatron_core_flops(B, s, l, h, a, g, f, k, V, swiglu=True):
    """Megatron-LM's model FLOPs per step (training.py, num_floating_point_operations, MCore
    0.9): 12 B s l h^2 ((1 + g/a + s/h) + (f/h) k (3/2 with SwiGLU) + V / (2 l h))."""
    gated = 1.5 if swiglu else 1.0
    return 12.0 * B * s * l * h * h * ((1 + g / a + s / h) + (f / h) * k * gated +
                                       V / (2.0 * l * h))


def mixtral_rows(decks):
    deck = os.path.join(decks, "mixtral-8x7b.yaml")
    check_deck(deck, {"heads": 32, "hidden": 4096, "layers": 32, "global_batch": 256,
                      "seq_len": 4096, "vocab": 32000, "ffn": 21504})
    flops = megatron_core_flops(256, 4096, 32, 4096, 32, 8, 14336, 2, 32000)
    return [Row("8x7b", deck, "tp=1,pp=4,dp=16,ep=8,mb=1,zero=1,schedule=interleaved,v=8",
                flops / (64 * 468e12), "468 TFLOP/s x 64 GPUs")]


# --- GPT-3 175B, NeMo Megatron 24.11 on H100 (DGX Cloud Benchmarking v24.11.1) ---------------
NEMO175B = [(128, 8.91), (256, 8.95), (512, 9.09), (1024, 9.01), (2048, 9.02)]  # GPUs, s/step


def nemo175b_rows(decks):
    """The recipe's measured training step times (gpt3-175b-h100-128.yaml); weak scaling, two
    sequences per GPU."""
    rows = []
    for gpus, step in NEMO175B:
        deck = os.path.join(decks, "gpt3-175b-h100-%d.yaml" % gpus)
        check_deck(deck, {"heads": 96, "hidden": 12288, "layers": 96, "global_batch": 2 * gpus,
                          "seq_len": 2048, "vocab": 50688})
        rows.append(Row("%dg" % gpus, deck, "tp=4,pp=8,dp=%d,mb=1,zero=1,schedule=interleaved,"
                        "v=12,sp=1" % (gpus // 32), step, "measured s/step, %d GPUs" % gpus))
    return rows


def sources(root, decks):
    machines = os.path.join(root, "inputs", "machines")
    return [
        Source("narayanan2021", "Narayanan et al. 2021, Table 1 (Megatron-LM, Selene)", "A100",
               os.path.join(machines, "selene.yaml"), narayanan_rows(decks)),
        # Selene also ran Megatron-LM (narayanan2021): DeepSpeed's pipeline engine, which
        # waits on each transfer, is this source's (mtnlg-530b.yaml; docs/perfmodel.md).
        # The paper gives tp, pp, dp, the global batch and the sequence, not the micro-batch
        # size (the deck assumes 1, as Narayanan et al.'s 530B run).
        Source("mtnlg530b", "Smith et al. 2022, MT-NLG 530B (DeepSpeed + Megatron, Selene)",
               "A100", os.path.join(machines, "selene.yaml"), mtnlg_rows(decks),
               {"pipeline_transfers": "blocking"}, unstated=("micro-batch",)),
        Source("bloom176b", "BLOOM 176B (Megatron-DeepSpeed, Jean Zay)", "A100",
               os.path.join(machines, "jean-zay-a100.yaml"), bloom_rows(decks)),
        Source("mixtral8x7b", "Megatron-Core MoE README, Mixtral 8x7B (DGX H100)", "H100",
               os.path.join(machines, "dgx-h100.yaml"), mixtral_rows(decks)),
        Source("nemo175b", "DGX Cloud Benchmarking v24.11.1, GPT-3 175B (NeMo 24.11, H100)",
               "H100", os.path.join(machines, "dgx-h100.yaml"), nemo175b_rows(decks)),
    ]


# --- evaluation ---------------------------------------------------------------------------------
def check_all_decks_used(srcs, decks):
    """Every deck in the decks folder is a row of some source: a source dropped from sources()
    would otherwise leave the validation, and its CTest, silently."""
    used = {os.path.abspath(r.deck) for s in srcs for r in s.rows}
    for name in sorted(os.listdir(decks)):
        path = os.path.abspath(os.path.join(decks, name))
        if name.endswith(".yaml") and path not in used:
            raise ValueError("%s: a published deck no source validates (sources())" % path)


def check_deck(path, want):
    """The deck must describe the row's model: a drifted deck would validate another model."""
    text = open(path).read()
    for key, value in want.items():
        m = re.search(r"\b%s:\s*(\d+)" % key, text)
        if not m or int(m.group(1)) != value:
            raise ValueError("%s: %s is %s, expected %d (its source)" %
                             (path, key, m.group(1) if m else "missing", value))


# The pp term's label: "pp (fill, drain)", or "pp (transfer waits)" with a blocking engine.
TERMS = ("compute", "bubble", "tp (exposed)", "ep (exposed)", "pp", "dp (exposed)", "optimizer")
PP_LABEL = r"pp \((?:fill, drain|transfer waits)\)"


def predicted_step(paraxis, deck, machine, layout):
    """The predicted step time (s) and its terms. `plan --layout` exits 1 for a layout that does
    not fit in memory but still prints its figures: those are used (the row ran; the memory
    model's disagreement is reported in docs/perfmodel.md, not here)."""
    cmd = [paraxis, "plan", deck, machine, "--layout", layout]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    m = re.search(r"^\s*step time\s+([0-9.eE+-]+) s", proc.stdout, re.M)
    fits = proc.returncode == 0
    if not m or not (fits or (proc.returncode == 1 and "does not fit: memory" in proc.stdout)):
        raise ValueError("%s exited %d:\n%s" % (" ".join(cmd), proc.returncode, proc.stdout))
    terms = {}
    for term in TERMS:
        label = PP_LABEL if term == "pp" else re.escape(term)
        t = re.search(r"^\s*%s\s+([0-9.eE+-]+) s" % label, proc.stdout, re.M)
        terms[term] = float(t.group(1)) if t else float("nan")
    return float(m.group(1)), terms, fits


def machine_copy(src, gemm=None, memory=None):
    """A temporary copy of the source's machine file with its stack's keys and, when given,
    gemm_efficiency and memory_efficiency set."""
    text = open(src.machine).read()
    keys = list(src.stack.items())
    if gemm is not None:
        keys += [("gemm_efficiency", "%.4f" % gemm), ("memory_efficiency", "%.4f" % memory)]
    for key, value in keys:
        line = "%s: %s" % (key, value)
        text, n = re.subn(r"^%s:.*$" % key, line, text, flags=re.M)
        if n == 0:
            text += "\n" + line + "\n"
    f = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    f.write(text)
    f.close()
    return f.name


def grid(spec):
    """'lo:hi:step' -> [lo, lo + step, ..., hi]."""
    lo, hi, step = (float(x) for x in spec.split(":"))
    n = int(round((hi - lo) / step))
    return [round(lo + i * step, 6) for i in range(n + 1)]


class Evaluator:
    """Predicted step time of (source, row, gemm, memory), each computed once."""

    def __init__(self, paraxis, jobs):
        self.paraxis, self.jobs, self.cache = paraxis, jobs, {}

    def fill(self, wanted):
        """Evaluate every (source, row index, gemm, memory) of `wanted` not yet known."""
        todo = sorted({w for w in wanted if (w[0].key,) + w[1:] not in self.cache},
                      key=lambda w: (w[0].key,) + w[1:])

        def one(item):
            src, i, g, m = item
            path = machine_copy(src, g, m)
            try:
                row = src.rows[i]
                return item, predicted_step(self.paraxis, row.deck, path, row.layout)[0]
            finally:
                os.unlink(path)

        with concurrent.futures.ThreadPoolExecutor(self.jobs) as pool:
            for (src, i, g, m), t in pool.map(one, todo):
                self.cache[(src.key, i, g, m)] = t

    def error(self, src, i, g, m):
        pub = src.rows[i].published
        return 100.0 * (self.cache[(src.key, i, g, m)] - pub) / pub


def fit(ev, train, gemm_grid, memory_grid):
    """(gemm, memory) on the grids minimising the mean over `train` sources of each one's mean
    absolute error, by pattern search (from the grids' middle, move to the best of the 8
    neighbours until none is better); with one training row, memory stays at
    DEFAULT_MEMORY_EFFICIENCY."""
    rows = sum(len(s.rows) for s in train)
    memories = memory_grid if rows >= 2 else [DEFAULT_MEMORY_EFFICIENCY]

    def cost(pair):
        return sum(sum(abs(ev.error(s, i, *pair)) for i in range(len(s.rows))) / len(s.rows)
                   for s in train) / len(train)

    at = (len(gemm_grid) // 2, len(memories) // 2)
    while True:
        near = [(at[0] + a, at[1] + b) for a in (-1, 0, 1) for b in (-1, 0, 1)
                if 0 <= at[0] + a < len(gemm_grid) and 0 <= at[1] + b < len(memories)]
        pairs = {ij: (gemm_grid[ij[0]], memories[ij[1]]) for ij in near}
        ev.fill([(s, i, g, m) for s in train for i in range(len(s.rows))
                 for g, m in pairs.values()])
        best = min(near, key=lambda ij: (cost(pairs[ij]), ij != at))
        if best == at:
            return pairs[at]
        at = best


def loso(args, srcs):
    """Leave-one-source-out: every held-out row, per-source mean and max; 1 when a target is
    missed."""
    ev = Evaluator(args.paraxis, args.jobs)
    gg, mg = grid(args.gemm_grid), grid(args.memory_grid)
    print("%-14s %-5s %-6s %6s %6s %10s %10s %8s  %s" % (
        "held out", "GPU", "row", "gemm", "memory", "published", "predicted", "error", "fitted on"))
    missed = []
    for held in srcs:
        train = [s for s in srcs if s is not held and s.gpu == held.gpu and s.trains()]
        if train:
            how = "+".join(s.key for s in train)
        else:  # the GPU type's only training source: carry over the other types' fit
            train = [s for s in srcs if s.gpu != held.gpu and s.trains()]
            how = "+".join(s.key for s in train) + " (other GPU types)"
        g, m = fit(ev, train, gg, mg)
        ev.fill([(held, i, g, m) for i in range(len(held.rows))])
        errs = []
        for i, row in enumerate(held.rows):
            e = ev.error(held, i, g, m)
            errs.append(e)
            print("%-14s %-5s %-6s %6.2f %6.2f %10.3f %10.3f %+7.1f%%  %s" % (
                held.key, held.gpu, row.name, g, m, row.published,
                ev.cache[(held.key, i, g, m)], e, how))
        mean = sum(abs(e) for e in errs) / len(errs)
        worst = max(abs(e) for e in errs)
        verdict = judge(held.key, mean, worst, args.known_misses)
        print("%-14s %d rows: mean %.1f %%, max %.1f %%: %s%s" % (
            held.key, len(errs), mean, worst, verdict,
            "" if held.trains() else " (never a training source: %s not published)" %
            ", ".join(held.unstated)))
        if verdict != "ok" and not verdict.startswith("known miss"):
            missed.append(held.key)
    print("targets per held-out source: mean <= %g %%, max <= %g %%; %s" % (
        TARGET_MEAN, TARGET_MAX, "no failure" if not missed else "failed: " + ", ".join(missed)))
    return 1 if missed else 0


def judge(key, mean, worst, allow_known):
    """'ok' when the targets are met; with allow_known, 'known miss ...' for a KNOWN_MISSES
    source no worse than recorded; else why it fails."""
    met = mean <= TARGET_MEAN and worst <= TARGET_MAX
    if not allow_known or key not in KNOWN_MISSES:
        return "ok" if met else "MISSES the targets"
    rec_mean, rec_max = KNOWN_MISSES[key]
    if met:
        return "meets the targets now: remove it from KNOWN_MISSES"
    if mean > rec_mean + SLACK or worst > rec_max + SLACK:
        return "known miss, WORSE than recorded (%.1f %% / %.1f %%)" % (rec_mean, rec_max)
    return "known miss (recorded %.1f %% / %.1f %%)" % (rec_mean, rec_max)


def fit_all(args, srcs):
    """The all-sources fit per GPU type (what the machine files carry)."""
    ev = Evaluator(args.paraxis, args.jobs)
    gg, mg = grid(args.gemm_grid), grid(args.memory_grid)
    for gpu in sorted({s.gpu for s in srcs}):
        train = [s for s in srcs if s.gpu == gpu and s.trains()]
        if not train:
            print("%s: no training source" % gpu)
            continue
        g, m = fit(ev, train, gg, mg)
        print("%s: gemm_efficiency %.2f, memory_efficiency %.2f (fitted on %s)" % (
            gpu, g, m, "+".join(s.key for s in train)))
    return 0


def layout_figure(layout, key):
    """The integer `key=` of a --layout string."""
    return int(re.search(r"\b%s=(\d+)" % key, layout).group(1))


def line_fit(xs, ys):
    """Least squares y = a + b x: (a, b, the residuals' standard deviation, sum of squares of
    x about its mean, mean of x)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    sd = (sum((y - a - b * x) ** 2 for x, y in zip(xs, ys)) / max(n - 2, 1)) ** 0.5
    return a, b, sd, sxx, mx


def decompose(args, srcs):
    """For a source whose rows differ only in dp (MT-NLG): a 1F1B step is (m + p - 1) slots of
    one micro-batch's forward and backward plus a per-step rest c (reductions, optimizer), with
    m = global batch / (dp mb). The published times, fitted as a + S/dp, give per micro-batch
    size mb the slot t = S mb / B and c = a - (p - 1) t (its standard error from the fit's
    residuals); the model's own t and c at that mb, from its predictions, beside them."""
    for src in srcs:
        lays = [re.sub(r"\bdp=\d+,?", "", r.layout) for r in src.rows]
        if len(src.rows) < 3 or len(set(lays)) != 1 or "schedule=1f1b" not in lays[0]:
            continue  # the slot count m + p - 1 is 1F1B's
        dps = [layout_figure(r.layout, "dp") for r in src.rows]
        p = layout_figure(src.rows[0].layout, "pp")
        batch = int(re.search(r"global_batch:\s*(\d+)", open(src.rows[0].deck).read()).group(1))
        xs = [1.0 / d for d in dps]
        a, b, sd, sxx, mx = line_fit(xs, [r.published for r in src.rows])
        print("%s: published = %.3f + %.2f / dp (residual sd %.2f s)" % (src.key, a, b, sd))
        path = machine_copy(src)
        try:
            for mb in (1, 2):
                t = b * mb / batch
                c = a - (p - 1) * t
                x0 = -(p - 1) * mb / batch  # c is the line's value at this x
                se = sd * (1.0 / len(xs) + (x0 - mx) ** 2 / sxx) ** 0.5
                pred = [predicted_step(args.paraxis, r.deck, path,
                                       re.sub(r"\bmb=\d+", "mb=%d" % mb, r.layout))[0]
                        for r in src.rows]
                pa, pb = line_fit(xs, pred)[:2]
                pt = pb * mb / batch
                print("  mb %d: slot %.4f s (model %.4f s, %+.1f %%), per-step rest c %.2f s "
                      "+- %.2f (model %.2f s)" % (mb, t, pt, 100 * (t - pt) / pt, c, se,
                                                  pa - (p - 1) * pt))
        finally:
            os.unlink(path)
    return 0


def committed(args, srcs):
    """Every row with the machine files as committed."""
    print("%-14s %-6s %-48s %10s %10s %8s" % ("source", "row", "layout", "published",
                                              "predicted", "error"))
    failed = 0
    for src in srcs:
        errs = []
        for row in src.rows:
            path = machine_copy(src)
            try:
                t, terms, fits = predicted_step(args.paraxis, row.deck, path, row.layout)
            except (OSError, ValueError) as e:
                print("%-14s %-6s error: %s" % (src.key, row.name, e), file=sys.stderr)
                failed += 1
                continue
            finally:
                os.unlink(path)
            e = 100.0 * (t - row.published) / row.published
            errs.append(e)
            print("%-14s %-6s %-48s %10.3f %10.3f %+7.1f%%%s" % (
                src.key, row.name, row.layout, row.published, t, e,
                "" if fits else "  (over the device's memory by paraxis's model)"))
            if args.terms:
                print("    " + "  ".join("%s %.3f" % (k.split(" ")[0], terms[k]) for k in TERMS))
        if errs:
            print("%-14s mean %.1f %%, max %.1f %% (%d rows)" % (
                src.key, sum(abs(e) for e in errs) / len(errs), max(abs(e) for e in errs),
                len(errs)))
    return 1 if failed else 0


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paraxis", default=os.path.join(root, "build", "bin", "paraxis"))
    ap.add_argument("--decks", default=os.path.join(root, "inputs", "published"))
    ap.add_argument("--terms", action="store_true", help="also print each row's terms")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--loso", action="store_true",
                      help="leave-one-source-out validation; exit 1 when a target is missed")
    mode.add_argument("--decompose", action="store_true",
                      help="for a source whose rows differ only in dp: the published and the "
                           "predicted steps as pipeline slots and a per-step rest, per mb")
    mode.add_argument("--fit", "--calibrate", action="store_true",
                      help="the all-sources fit per GPU type (--calibrate: its former name)")
    ap.add_argument("--machine", help="one machine file for every source (default: each "
                    "source's own, inputs/machines/)")
    ap.add_argument("--known-misses", action="store_true",
                    help="with --loso: a source in KNOWN_MISSES passes while its mean and max "
                         "stay within %.1f points of the recorded figures (the CTest)" % SLACK)
    ap.add_argument("--fit-unstated", action="store_true",
                    help="a diagnostic: also fit on sources whose layout the publication leaves "
                         "partly unstated (Source.unstated)")
    ap.add_argument("--no-accumulation", action="store_true",
                    help="a diagnostic: gradient_accumulation_bytes 0 over every machine file "
                         "(the stacks' accumulation pass left out, as before round 6)")
    ap.add_argument("--gemm-grid", default="0.50:0.90:0.02", help="lo:hi:step")
    ap.add_argument("--memory-grid", default="0.30:0.90:0.10", help="lo:hi:step")
    ap.add_argument("--jobs", type=int, default=2, help="paraxis processes at once")
    args = ap.parse_args()
    FIT_UNSTATED[0] = args.fit_unstated
    try:
        srcs = sources(root, args.decks)
        check_all_decks_used(srcs, args.decks)
        for src in srcs:
            if args.machine:
                src.machine = args.machine
            if args.no_accumulation:
                src.stack["gradient_accumulation_bytes"] = 0
        if args.loso:
            return loso(args, srcs)
        if args.fit:
            return fit_all(args, srcs)
        if args.decompose:
            return decompose(args, srcs)
        return committed(args, srcs)
    except (OSError, ValueError) as e:
        print("validate_published: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
