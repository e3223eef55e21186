#!/usr/bin/env python3
"""tools/roofline_table.py on a synthetic benchmark JSON: pairing kernels with the copy of the
same family, shape and storage type (and the pass's own-bytes copy), medians over repetitions,
the --check verdict and bad input."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]
spec = importlib.util.spec_from_file_location("roofline_table", script)
rt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rt)

G = 1024.0**3


def bench(name, gbs, run_type="iteration", agg=None):
    b = {"name": name, "run_name": name, "run_type": run_type, "bytes/s": gbs * G}
    if agg:
        b["aggregate_name"] = agg
        b["name"] = name + "_" + agg
    return b


doc = {"benchmarks": [
    bench("layernorm/fwd/4096x512", 10.0), bench("layernorm/fwd/4096x512", 30.0),
    bench("layernorm/fwd/4096x512", 20.0),  # median 20
    bench("layernorm/baseline_copy/4096x512/real_time", 40.0),  # UseRealTime's suffix
    bench("layernorm/bwd/bf16/4096x512", 6.0),
    bench("layernorm/baseline_copy/bf16/4096x512", 30.0),
    bench("layernorm/baseline_copy/bwd_bytes/bf16/4096x512", 10.0),
    bench("softmax/rows/fwd/256x8192", 1.0, "aggregate", "mean"),  # not a median: ignored
    bench("softmax/rows/fwd/256x8192", 3.0, "aggregate", "median"),
    bench("softmax/rows/baseline_copy/256x8192", 12.0, "aggregate", "median"),  # two-part family
    bench("softmax/causal/fwd/256x8192", 99.0),  # no softmax/causal copy: not a row
    bench("gemm/portable/512", 1.0),  # no copy in its family: not a row
    bench("scale/4096x512", 8.0), bench("scale/baseline_copy/4096x512", 32.0),  # no pass name
    bench("scale/floor/plain/4096x512", 4.0),  # a floor row: listed, not counted
    {"name": "attention/fwd/b1", "run_type": "iteration"},  # no bytes/s
]}
rows = {(r[0].split("/")[0], "/".join(r[0].split("/")[1:]), r[1]): (None,) + r for r in rt.table(doc)}
assert set(rows) == {("layernorm", "fwd", "fp32"), ("layernorm", "bwd", "bf16"),
                     ("softmax", "rows/fwd", "fp32"), ("scale", "", "fp32"),
                     ("scale", "floor/plain", "fp32")}, rows
assert abs(rows[("scale", "floor/plain", "fp32")][6] - 0.125) < 1e-9
assert rt.is_floor("scale/floor/plain") and not rt.is_floor("softmax/rows/fwd")
assert abs(rows[("scale", "", "fp32")][6] - 0.25) < 1e-9
r = rows[("layernorm", "fwd", "fp32")]
assert abs(r[4] - 20.0) < 1e-9 and abs(r[6] - 0.5) < 1e-9 and r[7] is None, r
r = rows[("layernorm", "bwd", "bf16")]
assert abs(r[6] - 0.2) < 1e-9 and abs(r[8] - 0.6) < 1e-9, r  # own-bytes copy: 6 / 10
r = rows[("softmax", "rows/fwd", "fp32")]
assert abs(r[6] - 0.25) < 1e-9, r

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "b.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    run = lambda *a: subprocess.run([sys.executable, script, *a], capture_output=True, text=True)
    p = run(path, "--check", "--target", "0.5")
    # softmax and scale at 0.25; the floor at 0.125 is listed last and not counted
    assert p.returncode == 1 and "2 below 0.5" in p.stdout and "1 floor rows" in p.stdout, p
    assert p.stdout.index("scale/floor/plain") > p.stdout.index("| softmax/rows/fwd"), p
    p = run(path, "--check", "--target", "0.2")
    assert p.returncode == 0 and "0 below 0.2" in p.stdout, p
    p = run(path, "--families", "layernorm")
    assert p.returncode == 0 and "softmax" not in p.stdout and "2 kernels" in p.stdout, p
    p = run(os.path.join(d, "missing.json"))
    assert p.returncode == 2 and "cannot read" in p.stderr, p
    with open(path, "w") as f:
        json.dump({"benchmarks": [bench("gemm/portable/512", 1.0)]}, f)
    p = run(path)
    assert p.returncode == 2 and "no kernel" in p.stderr, p
print("roofline_table: ok")
