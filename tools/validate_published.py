#!/usr/bin/env python3
"""Planner against published runs (issue 18): `paraxis plan --layout` on every row of
Narayanan et al. 2021 (SC21), Table 1, against the step time its achieved TFLOP/s imply.

Published step time = F / (GPUs x TFLOP/s per GPU), with the paper's FLOP count per step
(its section 5.1, formula 3), F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)), which counts the
recomputed forward pass: the TFLOP/s in Table 1 are hardware FLOPs, so the predicted step time
(which includes the recomputation cost too) is compared with a step time, like with like.

Figures and their sources are in each deck's header (inputs/published/) and in
docs/performance.md, section "Planner against published runs (issue 18)".
With --calibrate, fits the machine file's two work-dependent efficiencies (gemm_efficiency,
memory_efficiency: docs/perfmodel.md, "Compute efficiency") once on all rows by least mean
absolute error over a grid, and reports each row's leave-one-out error (the pair fitted on the
other rows, the held-out row predicted with it).
Python 3 standard library only. Exit 0 when every row was evaluated; 1 when a row could not be
(paraxis failed, the layout was refused, or a deck disagrees with the table below); 2 bad usage.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

SEQ = 2048
VOCAB = 51200

# name, heads, hidden, layers, tp, pp, GPUs, global batch, TFLOP/s per GPU, % of peak,
# micro-batch, schedule, virtual stages. TFLOP/s, % of peak, hidden, layers, GPUs, batch:
# Megatron-LM README at commit 9ec547c9ff, images/cases_april2021.png. Heads, tp, pp,
# micro-batch, virtual stages (layers / (pp x --num-layers-per-virtual-pipeline-stage)):
# Megatron-LM examples/academic_paper_scripts/sc21/run_table_1.sh.
ROWS = [
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


def paper_flops(batch, layers, hidden):
    """FLOPs per step by the paper's count (forward, backward and recomputed forward)."""
    return (96.0 * batch * SEQ * layers * hidden**2 *
            (1.0 + SEQ / (6.0 * hidden) + VOCAB / (16.0 * layers * hidden)))


def check_deck(path, heads, hidden, layers, batch):
    """The deck must describe the row's model: a drifted deck would validate another model."""
    text = open(path).read()
    want = {"heads": heads, "hidden": hidden, "layers": layers, "global_batch": batch,
            "seq_len": SEQ, "vocab": VOCAB}
    for key, value in want.items():
        m = re.search(r"\b%s:\s*(\d+)" % key, text)
        if not m or int(m.group(1)) != value:
            raise ValueError("%s: %s is %s, expected %d (Table 1)" %
                             (path, key, m.group(1) if m else "missing", value))


TERMS = ("compute", "bubble", "tp (exposed)", "ep (exposed)", "pp (fill, drain)", "dp (exposed)",
         "optimizer")


def predicted_step(paraxis, deck, machine, layout):
    """The predicted step time (s) and its terms (s each, by TERMS' names)."""
    cmd = [paraxis, "plan", deck, machine, "--layout", layout]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    if proc.returncode != 0:
        raise ValueError("%s exited %d:\n%s" % (" ".join(cmd), proc.returncode, proc.stdout))
    m = re.search(r"^\s*step time\s+([0-9.eE+-]+) s", proc.stdout, re.M)
    if not m:
        raise ValueError("%s: no 'step time' line in its output:\n%s" %
                         (" ".join(cmd), proc.stdout))
    terms = {}
    for term in TERMS:
        t = re.search(r"^\s*%s\s+([0-9.eE+-]+) s" % re.escape(term), proc.stdout, re.M)
        terms[term] = float(t.group(1)) if t else float("nan")
    return float(m.group(1)), terms


def machine_fraction(path):
    """The machine file's achievable_fraction (for the --terms analysis only); None when the
    file times compute by the work-dependent model (memory_bandwidth_gbs)."""
    text = open(path).read()
    if re.search(r"^memory_bandwidth_gbs:", text, re.M):
        return None
    m = re.search(r"^achievable_fraction:\s*([0-9.eE+-]+)", text, re.M)
    return float(m.group(1)) if m else 0.5


def with_efficiencies(path, gemm, memory):
    """A temporary copy of machine file `path` with gemm_efficiency and memory_efficiency set."""
    text = open(path).read()
    for key, value in (("gemm_efficiency", gemm), ("memory_efficiency", memory)):
        line = "%s: %.4f" % (key, value)
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


def evaluate_rows(args, machine):
    """Per row: (name, gpus, layout, published s, predicted s, error %, TFLOP/s, F, terms), or
    (name, error message) for a row that could not be evaluated."""
    out = []
    for (name, heads, hidden, layers, tp, pp, gpus, batch, tflops, _pct, mb, sched,
         v) in ROWS:
        dp = gpus // (tp * pp)
        layout = "tp=%d,pp=%d,dp=%d,mb=%d,schedule=%s,v=%d,recompute=full" % (tp, pp, dp, mb,
                                                                             sched, v)
        deck = os.path.join(args.decks, "megatron-%s.yaml" % name)
        flops = paper_flops(batch, layers, hidden)
        published = flops / (gpus * tflops * 1e12)
        try:
            check_deck(deck, heads, hidden, layers, batch)
            predicted, terms = predicted_step(args.paraxis, deck, machine, layout)
        except (OSError, ValueError) as e:
            out.append((name, str(e)))
            continue
        short = "tp%d pp%d dp%d mb%d %s%s" % (tp, pp, dp, mb, sched, " v%d" % v if v > 1 else "")
        out.append((name, gpus, short, published, predicted,
                    100.0 * (predicted - published) / published, tflops, flops, terms))
    return out


def calibrate(args):
    """Grid fit of (gemm_efficiency, memory_efficiency) on all rows, and leave-one-out."""
    table = {}
    for g in grid(args.gemm_grid):
        for m in grid(args.memory_grid):
            path = with_efficiencies(args.machine, g, m)
            try:
                rows = evaluate_rows(args, path)
            finally:
                os.unlink(path)
            bad = [r for r in rows if len(r) == 2]
            if bad:
                print("%s error: %s" % bad[0], file=sys.stderr)
                return 1
            table[(g, m)] = [r[5] for r in rows]

    def fit(skip):
        def mae(key):
            e = [x for i, x in enumerate(table[key]) if i != skip]
            return sum(abs(x) for x in e) / len(e)
        return min(table, key=mae)

    key = fit(-1)
    errs = table[key]
    print("calibrated on all %d rows: gemm_efficiency %.2f, memory_efficiency %.2f: "
          "mean absolute error %.1f %%, max %.1f %%" %
          (len(errs), key[0], key[1], sum(abs(e) for e in errs) / len(errs),
           max(abs(e) for e in errs)))
    print("%-6s %8s %8s %10s %10s" % ("held", "gemm", "memory", "all-rows", "held-out"))
    print("%-6s %8s %8s %10s %10s" % ("out", "eff.", "eff.", "error %", "error %"))
    loo = []
    for i, row in enumerate(ROWS):
        k = fit(i)
        loo.append(table[k][i])
        print("%-6s %8.2f %8.2f %+9.1f%% %+9.1f%%" % (row[0], k[0], k[1], errs[i], table[k][i]))
    print("leave-one-out: mean absolute error %.1f %%, max %.1f %% (grid gemm %s, memory %s)" %
          (sum(abs(e) for e in loo) / len(loo), max(abs(e) for e in loo), args.gemm_grid,
           args.memory_grid))
    return 0


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paraxis", default=os.path.join(root, "build", "bin", "paraxis"))
    ap.add_argument("--machine", default=os.path.join(root, "inputs", "machines", "selene.yaml"))
    ap.add_argument("--decks", default=os.path.join(root, "inputs", "published"))
    ap.add_argument("--terms", action="store_true",
                    help="also print each row's predicted step-time terms")
    ap.add_argument("--calibrate", action="store_true",
                    help="fit gemm_efficiency and memory_efficiency on all rows over a grid "
                         "and report leave-one-out errors")
    ap.add_argument("--gemm-grid", default="0.60:0.74:0.01", help="lo:hi:step (--calibrate)")
    ap.add_argument("--memory-grid", default="0.30:0.80:0.05", help="lo:hi:step (--calibrate)")
    args = ap.parse_args()
    args.fraction = machine_fraction(args.machine)

    if args.calibrate:
        return calibrate(args)
    print("%-6s %5s %-34s %10s %10s %8s %9s %9s" %
          ("row", "GPUs", "layout", "published", "predicted", "error", "pub TF/s", "pred TF/s"))
    print("%-6s %5s %-34s %10s %10s %8s %9s %9s" % ("", "", "", "step s", "step s", "%", "per GPU",
                                                    "per GPU"))
    errors = []
    all_terms = []
    failed = 0
    for row in evaluate_rows(args, args.machine):
        if len(row) == 2:
            print("%-6s error: %s" % row, file=sys.stderr)
            failed += 1
            continue
        name, gpus, short, published, predicted, err, tflops, flops, terms = row
        errors.append(err)
        all_terms.append((name, published, terms))
        print("%-6s %5d %-34s %10.3f %10.3f %+7.1f%% %9.0f %9.1f" %
              (name, gpus, short, published, predicted, err, tflops,
               flops / (gpus * predicted * 1e12)))
    if errors:
        mae = sum(abs(e) for e in errors) / len(errors)
        worst = max(errors, key=abs)
        print("mean absolute error %.1f %%, max %.1f %% (%d rows); target <= 5 %% mean, <= 10 %% max"
              % (mae, abs(worst), len(errors)))
    if args.terms and all_terms:
        print("\npredicted terms, s (the pipeline stage that finishes last). compute/pub: the compute "
              "term over the published step;\nfraction: the flat achievable_fraction that would make "
              "the row exact if compute and bubble scale as 1/fraction and the rest stays")
        print("%-6s " % "row" + " ".join("%9s" % t.split(" ")[0] for t in TERMS) +
              " %11s %8s" % ("compute/pub", "fraction"))
        for name, published, terms in all_terms:
            scaled = terms["compute"] + terms["bubble"]
            rest = sum(terms[t] for t in TERMS) - scaled
            fraction = (args.fraction * scaled / (published - rest)
                        if published > rest and args.fraction else float("nan"))
            print("%-6s " % name + " ".join("%9.3f" % terms[t] for t in TERMS) +
                  " %11.3f %8.3f" % (terms["compute"] / published, fraction))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
