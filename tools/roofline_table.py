#!/usr/bin/env python3
"""Each memory-bound kernel's bytes/s over its family's copy baseline from the same run.

Reads the JSON of paraxis-bench-kernels (--benchmark_out=FILE --benchmark_out_format=json, or
--benchmark_format=json on stdout) and prints one Markdown table: for every benchmark named
FAMILY/PASS.../[bf16/]SHAPE that has a bytes/s counter, the copy of the same shape and storage
type in the same family (FAMILY/baseline_copy/[bf16/]SHAPE) and, where the family registers
one, the copy of the pass's own bytes (FAMILY/baseline_copy/PASS_bytes/[bf16/]SHAPE; bwd passes
also match bwd_bytes), with the ratios. With repetitions, the medians are used. The issue-20
target is >= 0.5 of the copy, forward and backward, fp32 and bf16 (docs/performance.md).

Rows whose pass contains "floor" (FAMILY/PASS/floor/NAME/SHAPE, benchmarks/kernels/
bench_floors.hpp: a kernel's access pattern as the plainest loop) are set against the same
copies but listed after the kernels and not counted against the target.

With --cpu-time, each rate is rescaled from wall time to the process's CPU time (bytes/s x
real_time / cpu_time): on a shared machine where other work time-slices the benchmark (load
above the core count), the wall-time rates of a kernel and of its copy, measured seconds
apart, see different shares of a core, and their ratio says more about the load than about the
kernel. Single-threaded (Kokkos Serial) runs only: with threads, CPU time adds up over them.

Usage: roofline_table.py BENCH.json [--families layernorm,softmax,...] [--target 0.5] [--cpu-time]
Exit status: 0; 1 when --check is given and a kernel falls below the target; 2 on bad input.
"""
import argparse
import json
import statistics
import sys


def parse_name(name):
    """(family, pass, dtype, shape) of a benchmark name, or None for names without a shape."""
    parts = name.split("/")
    # Google Benchmark's suffixes: /real_time (UseRealTime), /threads:N, /min_time:..., ...
    while parts and (parts[-1] in ("real_time", "process_time") or ":" in parts[-1]):
        parts.pop()
    if len(parts) < 2:
        return None
    dtype = "bf16" if "bf16" in parts[1:-1] else "fp32"
    middle = [p for p in parts[1:-1] if p != "bf16"]
    return parts[0], "/".join(middle), dtype, parts[-1]


def rates(doc, cpu_time=False):
    """{benchmark name: median bytes/s} over the iterations (or the median aggregates); per
    second of CPU time instead of wall time with cpu_time."""
    samples = {}
    for b in doc.get("benchmarks", []):
        if "bytes/s" not in b:
            continue
        kind = b.get("run_type", "iteration")
        if kind == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        rate = float(b["bytes/s"])
        if cpu_time and float(b.get("cpu_time", 0)) > 0:
            rate *= float(b["real_time"]) / float(b["cpu_time"])
        samples.setdefault(name, []).append(rate)
    return {k: statistics.median(v) for k, v in samples.items()}


def table(doc, families=None, cpu_time=False):
    """Rows (kernel, dtype, shape, GB/s, copy GB/s, ratio, own-bytes copy GB/s, ratio).

    A copy FAM/baseline_copy/[OWN/][bf16/]SHAPE serves the kernels named FAM/.../SHAPE of the same
    storage type, FAM being one or more name parts ("layernorm", "softmax/rows"); the longest
    FAM with a copy wins."""
    r = rates(doc, cpu_time)
    parsed = {n: parse_name(n) for n in r}
    copies = {}
    for n, p in parsed.items():
        if not p:
            continue
        parts = n.split("/")
        if "baseline_copy" in parts:
            i = parts.index("baseline_copy")
            own = p[1].split("baseline_copy")[1].strip("/") if "baseline_copy" in p[1] else ""
            copies[("/".join(parts[:i]), own, p[2], p[3])] = r[n]
    rows = []
    g = 1024.0**3
    for n, p in sorted(parsed.items()):
        if not p or "baseline_copy" in n.split("/"):
            continue
        fam0, pas0, dt, shape = p
        if families and fam0 not in families:
            continue
        names = [fam0] + ([x for x in pas0.split("/")] if pas0 else [])
        for k in range(len(names), 0, -1):
            fam, pas = "/".join(names[:k]), "/".join(names[k:])
            base = copies.get((fam, "", dt, shape))
            if base is not None:
                break
        if base is None:
            continue
        own = None
        if pas:
            for key in (pas.split("/")[0] + "_bytes", pas.replace("/", "_") + "_bytes"):
                own = copies.get((fam, key, dt, shape), own)
        kernel = fam + ("/" + pas if pas else "")
        rows.append((kernel, dt, shape, r[n] / g, base / g, r[n] / base,
                     own / g if own else None, r[n] / own if own else None))
    return rows


def is_floor(kernel):
    """Whether a row of table() is a floor (a pass part named "floor")."""
    return "floor" in kernel.split("/")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("--families", default="")
    ap.add_argument("--target", type=float, default=0.5)
    ap.add_argument("--cpu-time", action="store_true",
                    help="rates per second of CPU time (single-threaded runs on a loaded machine)")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if a kernel's best ratio is below --target")
    a = ap.parse_args(argv)
    try:
        with open(a.json) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"roofline_table.py: cannot read {a.json}: {e}", file=sys.stderr)
        return 2
    fams = set(filter(None, a.families.split(",")))
    rows = table(doc, fams or None, a.cpu_time)
    if not rows:
        print(f"roofline_table.py: {a.json} holds no kernel with a bytes/s counter and a "
              "baseline_copy of the same family, shape and storage type", file=sys.stderr)
        return 2
    print("| kernel | storage | shape | GB/s | copy GB/s | / copy | own-bytes copy GB/s | / own |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    below = 0
    kernels = [r for r in rows if not is_floor(r[0])]
    floors = [r for r in rows if is_floor(r[0])]
    for kernel, dt, shape, gbs, base, ratio, own, oratio in kernels + floors:
        below += max(ratio, oratio or 0.0) < a.target and not is_floor(kernel)
        o = f"{own:.1f} | {oratio:.2f}" if own else "– | –"
        print(f"| {kernel} | {dt} | {shape} | {gbs:.2f} | {base:.1f} | {ratio:.2f} | {o} |")
    print(f"\n{len(kernels)} kernels, {below} below {a.target} of copy (the better of the two "
          f"ratios); {len(floors)} floor rows (not counted)")
    return 1 if a.check and below else 0


if __name__ == "__main__":
    sys.exit(main())
