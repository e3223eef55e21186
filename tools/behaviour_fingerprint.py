#!/usr/bin/env python3
"""behaviour_fingerprint.py RESULTS_DIR... > fingerprint.json

The behaviour of `paraxis run`, extracted from summary.json files (docs/results.md), so that two
builds (before and after a refactor) can be compared with tools/behaviour_diff.py. Issue 15's
"behaviour is unchanged" check; docs/architecture.md "Checking a refactor changes no behaviour".

Exit status 2 on an unreadable or non-paraxis summary.json (named).
Output: {"schema": "paraxis.behaviour/1", "runs": {<basename of RESULTS_DIR>: [point, ...]}}.
Runs are keyed by the folder's basename (not its path) so that the same deck set run into two
different folders compares equal.

KEPT (behaviour: determined by the code and the deck, bitwise reproducible on one machine):
  per point: index, settings, status, grid, config (the diff compares only the keys present on
  both sides: a refactor may add deck keys), model, corpus, final, memory, memory_per_rank,
  verify (every figure), steps[] (step, measured, loss, lm_loss, aux_loss, grad_norm and the whole
  moe record: tokens/drops per expert, imbalance), time.comm.<axis>.{bytes,calls},
  time.ranks.{forward_actions, backward_actions, peak_live_activations, comm.<axis>.bytes,
  comm.<axis>.calls}, time.bubble_fraction_ideal (a formula of p, m, v), pipeline.{stages,
  micro_batches, virtual_stages, schedule, peak_live_activations_per_stage},
  throughput.model_flops_per_step (a formula of the model), and any field not named below
  (new fields are behaviour until shown otherwise: the diff names them).
DROPPED (not behaviour: measured, or about the machine/run rather than the code's results):
  top level: provenance (versions, hosts, date, command line), deck (the deck's path);
  any key ending in "_s" or containing "_s_" (time_s, step_median_s, exposed_s,
  forward_action_s_per_stage, ...), time.bubble_fraction, time.bubble_fraction_model,
  time.bubble_fraction_per_rank, time.ranks.bubble_fraction (measured or derived from measured
  times), throughput.{tokens_per_s, model_flops_per_s, mfu}, calibration (timings), any key
  naming a trace file (trace files are not behaviour: summary.json holds none today).
  bubble_fraction_model_per_stage, bubble_fraction_formula (the zero-bubble formula of the
  measured T_F, T_B, T_W), checkpoint_to_baseline_write (a ratio of write speeds); a lineage's
  run ids (lineage.id, lineage.run, lineage.parent.run: new in every run; parent.step is kept).
REDUCED: a "folder" (a checkpoint written or resumed from) keeps its last path component
  (step-<N>): where the run's scratch folder was is not behaviour.
"""
import json
import os
import sys

SCHEMA = "paraxis.behaviour/1"
MEASURED_KEYS = {
    "bubble_fraction", "bubble_fraction_model", "bubble_fraction_per_rank", "tokens_per_s",
    "model_flops_per_s", "mfu", "calibration", "provenance", "deck", "trace_file", "trace_files",
    # from measured stage times or write speeds:
    "bubble_fraction_model_per_stage", "bubble_fraction_formula", "checkpoint_to_baseline_write"
}
# Run identities (docs/checkpoint.md, "Runs, lineages and the lock"): new in every run.
RUN_ID_KEYS = {"id", "run"}


def fail(message):
    sys.stderr.write(message + "\n")
    sys.exit(2)


def is_timing(key):
    # "comm.dp.time_s", "step_s", "forward_action_s_per_stage", "alpha_s": seconds, measured.
    return key.endswith("_s") or "_s_" in key


def keep(key, parent_path):
    if parent_path == "config" or parent_path.startswith("config."):
        return True  # deck values, never measured (comm.timeout_s is a setting)
    if key == "bubble_fraction_ideal":
        return True
    if key in MEASURED_KEYS or is_timing(key):
        return False
    if key in RUN_ID_KEYS and parent_path.split(".")[-1] in ("lineage", "parent"):
        return False
    if key.startswith("trace-"):
        return False
    return True


def strip(value, path=""):
    """The value with every non-behaviour key removed, recursively."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if keep(k, path):
                out[k] = strip(v, (path + "." + k) if path else k)
        return out
    if isinstance(value, list):
        return [strip(v, path) for v in value]
    if path.split(".")[-1] == "folder" and isinstance(value, str):
        return os.path.basename(os.path.normpath(value))
    return value


def fingerprint(dirs):
    runs = {}
    for d in dirs:
        name = os.path.basename(os.path.normpath(d))
        if name in runs:
            fail("behaviour_fingerprint: two result folders named '%s' (%s): "
                             "their basenames key the fingerprint, use distinct names" % (name, d))
        path = os.path.join(d, "summary.json")
        try:
            with open(path) as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            fail("behaviour_fingerprint: cannot read '%s': %s" % (path, e))
        # Version 2 changed no point field (docs/results.md, "Schema versions"), so a run of
        # either version fingerprints the same: before/after a schema bump compares.
        if summary.get("schema") not in ("paraxis.summary/1", "paraxis.summary/2"):
            fail("behaviour_fingerprint: '%s' has schema %r, expected "
                             "'paraxis.summary/1' or '/2'" % (path, summary.get("schema")))
        points = summary.get("points")
        if not isinstance(points, list) or not points:
            fail("behaviour_fingerprint: '%s' has no points" % path)
        runs[name] = [strip(p) for p in points]
    return {"schema": SCHEMA, "runs": runs}


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    json.dump(fingerprint(argv[1:]), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
