#!/usr/bin/env bash
# End-to-end diagnosis (issue 17, docs/diagnosis.md "End to end"): one fault kind injected into
# 4-rank runs of inputs/tiny.yaml on each grid of the issue — tp2 x pp2, pp2 x dp2, tp2 x dp2
# and dp4 x ep2 — on two emulated nodes of 2 ranks (100 us between them), then `paraxis report`
# and a check of report.json: the top finding has the right kind, axis, group and ranks, and no
# other fault finding (slow_rank, slow_link, dead_rank, hang) is there; `clean` injects nothing
# and expects no fault finding at all.
# Usage: test_diagnosis_runs.sh PARAXIS MPIEXEC INPUTS KIND [GRID ...]
# With PARAXIS_RESULTS_SCHEMA (paraxis-results-schema) set, each folder's output is also checked
# strictly against the results schema (analysis/results_schema.hpp).
# KIND: clean, slow_rank, slow_link, dead_rank, hang, expert_imbalance, and the issue's limits:
# slow_rank_2x (a rank 2x slower, on 2 ranks, grid dp2: one core each) and slow_link_quarter
# (a link at a quarter of its bandwidth: emulated 0.1 GB/s links, so its bytes matter). Faults
# without peers, found against the calibrated model (issue 30, docs/diagnosis.md "Against the
# model"; the point calibrates first): model_slow_stage (pp2 on 2 ranks, stage 0 8x slower),
# model_slow_link (dp2 on 2 ranks, the only dp group's link 20 ms a message), model_slow_axis
# (tp2 x dp2, fault.slow_axis 64x on tp), and model_clean (those three grids, calibrated, no
# fault). GRIDs (default: every grid the kind applies to): tp2pp2 pp2dp2 tp2dp2 dp4ep2 dp2 pp2.
# The other injected faults are large (8x compute, 20 ms a message) because 4 ranks time-share
# this machine's 2 cores: the report scales its slow-rank threshold by the oversubscription
# (docs/diagnosis.md).
# Exit status: 0 passed; 1 a verdict no load can move failed (the run's exit code, the top
# finding's kind, axis, group and ranks); 3 only a verdict that rests on measured time failed (a
# fault finding in a clean run, a second fault finding beside the injected one: noise on a busy
# machine can make either) in a run and in its one repeat, which ctest/timing_guard.py
# --timing-exit 3 skips on a busy machine.
set -euo pipefail
paraxis=$1 mpiexec=$2 inputs=$3 kind=$4
shift 4
grids=("$@")
if [ ${#grids[@]} -eq 0 ]; then
  case $kind in
    expert_imbalance) grids=(dp4ep2) ;;
    slow_rank_2x) grids=(dp2) ;;
    slow_link_quarter) grids=(pp2dp2 tp2dp2) ;;
    model_clean) grids=(pp2 dp2 tp2dp2) ;;
    model_slow_stage) grids=(pp2) ;;
    model_slow_link) grids=(dp2) ;;
    model_slow_axis) grids=(tp2dp2) ;;
    *) grids=(tp2pp2 pp2dp2 tp2dp2 dp4ep2) ;;
  esac
fi
# One BLAS thread per rank: OpenBLAS would start one per core in every rank, on cores the ranks
# already time-share (docs/sensitivity.md).
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--set train.steps=8 --set train.micro_batch=1 --set hardware.calibrate=false
        --set output.trace=false --set hardware.ranks_per_node=2
        --set hardware.emulate.latency_us=100)
failed=0 timing=0
# One grid's run, report and verdict: returns 0 passed, 1 failed, 3 a timing verdict failed.
check_grid() {
  local grid=$1 attempt=$2
  ranks=4
  case $grid in
    dp2) layout=(--set parallel.dp=2) ranks=2 ;;
    pp2) layout=(--set parallel.pp=2) ranks=2 ;;
    tp2pp2) layout=(--set parallel.tp=2 --set parallel.pp=2) ;;
    pp2dp2) layout=(--set parallel.pp=2 --set parallel.dp=2) ;;
    tp2dp2) layout=(--set parallel.tp=2 --set parallel.dp=2) ;;
    dp4ep2) layout=(--set parallel.dp=4 --set parallel.ep=2) ;;
    *) echo "unknown grid $grid" >&2; exit 2 ;;
  esac
  # Rank 3's place: its pipeline stage; the slow link: a pair of ranks one group of an axis
  # holds and no other (pp: ranks 1 3 are a pipeline; dp: 1 3 a replica pair; ep: 2 3).
  case $grid in tp2pp2|pp2dp2|pp2) stage=1 ;; *) stage=0 ;; esac
  case $grid in
    tp2pp2) link='[1,3]' link_want='"axis": "pp", "group": 1, "ranks": [1, 3]' ;;
    pp2dp2|tp2dp2) link='[1,3]' link_want='"axis": "dp", "group": 1, "ranks": [1, 3]' ;;
    dp4ep2) link='[2,3]' link_want='"axis": "ep", "group": 1, "ranks": [2, 3]' ;;
    dp2) link='[0,1]' link_want='"axis": "dp", "group": 0, "ranks": [0, 1]' ;;
    pp2) link='[0,1]' link_want='"axis": "pp", "group": 0, "ranks": [0, 1]' ;;
  esac
  rc_want=0
  case $kind in
    clean) inject=() want='null' ;;
    slow_rank)
      inject=(--set fault.slow_rank.rank=3 --set fault.slow_rank.factor=8
              --set fault.slow_rank.from_step=2)
      want="{\"kind\": \"slow_rank\", \"axis\": \"compute\", \"group\": $stage, \"ranks\": [3]}" ;;
    slow_link)
      inject=(--set "fault.slow_link.ranks=$link" --set fault.slow_link.latency_us=20000)
      want="{\"kind\": \"slow_link\", $link_want}" ;;
    slow_rank_2x)
      # Longer steps (4 sequences a micro-batch, 12 steps): 2x of a few milliseconds would be
      # within a busy machine's scheduling noise.
      inject=(--set fault.slow_rank.rank=1 --set fault.slow_rank.factor=2
              --set fault.slow_rank.from_step=2 --set train.micro_batch=4 --set train.steps=12)
      want='{"kind": "slow_rank", "axis": "compute", "group": 0, "ranks": [1]}' ;;
    slow_link_quarter)
      inject=(--set hardware.emulate.bandwidth_gbs=0.1 --set "fault.slow_link.ranks=$link"
              --set fault.slow_link.bandwidth_factor=0.25)
      want="{\"kind\": \"slow_link\", $link_want}" ;;
    dead_rank)
      inject=(--set fault.dead_rank.rank=3 --set fault.dead_rank.step=2) rc_want=3
      want="{\"kind\": \"dead_rank\", \"axis\": \"compute\", \"group\": $stage, \"ranks\": [3]}" ;;
    hang)
      # The axis is the one of the wait that expired first (timing decides between rank 3's
      # groups): its group must hold rank 3 (checked below).
      inject=(--set fault.hang.rank=3 --set fault.hang.step=2 --set comm.timeout_s=2) rc_want=5
      want='{"kind": "hang", "ranks": [3]}' ;;
    expert_imbalance)
      # A Zipf(3) router prior: experts 0-1, held by ep rank 0 (ranks 0 2), get nearly every token.
      inject=(--set model.moe.router_skew=3)
      want='{"kind": "expert_imbalance", "axis": "ep", "group": 0, "ranks": [0, 2]}' ;;
    # Against the calibrated model: the point calibrates (the other kinds skip it for time).
    model_clean) inject=(--set hardware.calibrate=true) want='null' ;;
    model_slow_stage)
      inject=(--set hardware.calibrate=true --set fault.slow_rank.rank=0
              --set fault.slow_rank.factor=8 --set fault.slow_rank.from_step=2)
      want='{"kind": "slow_rank", "axis": "compute", "group": 0, "ranks": [0]}' ;;
    model_slow_link)
      inject=(--set hardware.calibrate=true --set "fault.slow_link.ranks=$link"
              --set fault.slow_link.latency_us=20000)
      want="{\"kind\": \"slow_link\", $link_want}" ;;
    model_slow_axis)
      # 64x: the factor multiplies the tp link measured when the communicator is made (some
      # 6 us a round here, 2 ms once on a loaded machine), and 8x of it (~6 ms a step) was
      # within the noise of 4 ranks time-sharing 2 cores (a clean run's tp: 7-80 ms a step).
      # One rank per emulated node: tp crosses the emulated links (100 us a message), so the
      # injected factor multiplies an emulated latency, not a few measured us (within one node
      # half of the quiet runs found nothing; across nodes 6 of 6 found 44-50x).
      inject=(--set hardware.calibrate=true --set fault.slow_axis.axis=tp
              --set fault.slow_axis.factor=64 --set hardware.ranks_per_node=1)
      want='{"kind": "slow_axis", "axis": "tp", "group": -1, "ranks": [0, 1, 2, 3]}' ;;
    *) echo "unknown kind $kind" >&2; exit 2 ;;
  esac
  dir=$out/$grid.$attempt
  set +e
  "$mpiexec" -n $ranks "$paraxis" run "$inputs/tiny.yaml" "${common[@]}" "${layout[@]}" "${inject[@]}" \
    --out "$dir" > "$out/$grid.log" 2>&1
  rc=$?
  set -e
  # mpiexec may report a job one rank ended with its own non-zero code.
  if { [ "$rc_want" = 0 ] && [ "$rc" != 0 ]; } || { [ "$rc_want" != 0 ] && [ "$rc" = 0 ]; }; then
    echo "$grid: paraxis run exited $rc, expected $rc_want"; cat "$out/$grid.log"; return 1
  fi
  if ! "$paraxis" report "$dir" > "$out/$grid.report.log" 2>&1; then
    echo "$grid: paraxis report failed"; cat "$out/$grid.report.log"; return 1
  fi
  # Its summary.json and report.json (findings and all) against the results schema (issue 31);
  # a job a dead or hung rank ended wrote no summary.json: its report.json alone.
  if [ -n "${PARAXIS_RESULTS_SCHEMA:-}" ]; then
    what=(check "$dir")
    [ -f "$dir/summary.json" ] || what=(check-report "$dir/report.json")
    if ! "$PARAXIS_RESULTS_SCHEMA" "${what[@]}"; then
      echo "$grid: the output does not conform to the results schema"; return 1
    fi
  fi
  if python3 - "$dir/report.json" "$want" "$grid" "$kind" <<'PY'
import json, sys
def timing_fail(message):  # a verdict that rests on measured time (exit 3, see the header)
    print(message)
    sys.exit(3)
report = json.load(open(sys.argv[1]))
findings, want, grid, kind = report["diagnosis"], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
fault_kinds = ("slow_rank", "slow_link", "slow_axis", "dead_rank", "hang")
faults = [f for f in findings if f["kind"] in fault_kinds]
def show(fs):
    return "\n".join("  %s %s group %s ranks %s: %s" % (f["kind"], f["axis"], f["group"],
                     f["ranks"], f["text"]) for f in fs) or "  (none)"
# The report lists, per axis, the groups that span the two emulated nodes.
spans = {"tp2pp2": "tp 0/2, pp 2/2", "pp2dp2": "pp 0/2, dp 2/2", "tp2dp2": "tp 0/2, dp 2/2",
         "dp4ep2": "dp 1/1, ep 0/2", "dp2": "dp 0/1", "pp2": "pp 0/1"}[grid]
nodes = ("2", "1")
if kind == "model_slow_axis":  # one rank per node: every group spans nodes
    spans, nodes = "tp 2/2, dp 2/2", ("4",)
if report["points"]:
    md = open(sys.argv[1].replace("report.json", "report.md")).read()
    if not any("| %s (emulated) | %s |" % (n, spans) in md for n in nodes):
        sys.exit("%s: report.md's Nodes table lacks '%s':\n%s" % (grid, spans, md[md.find("## Nodes"):][:600]))
if want is None:
    if faults:
        timing_fail("%s: a clean run has fault findings:\n%s" % (grid, show(faults)))
    print("%s: clean, no fault finding (%d other findings)" % (grid, len(findings)))
    sys.exit(0)
if not findings:
    sys.exit("%s: no finding at all" % grid)
top = findings[0]
if kind == "model_slow_axis":  # the placement advice (tp across nodes, by design here) may lead
    top = next((f for f in findings if f["kind"] in fault_kinds), top)
got = {k: top[k] for k in want}
if got != want:
    sys.exit("%s: expected the top finding %s, got %s; all findings:\n%s"
             % (grid, want, got, show(findings)))
if top["kind"] == "hang":  # its group, on its axis, holds the stalled rank (order tp-pp-dp)
    tp, pp, dp, ep = {"tp2pp2": (2, 2, 1, 1), "pp2dp2": (1, 2, 2, 1), "tp2dp2": (2, 1, 2, 1),
                      "dp4ep2": (1, 1, 4, 2), "dp2": (1, 1, 2, 1), "pp2": (1, 2, 1, 1)}[grid]
    def coords(r):
        d = r // (tp * pp)
        return {"tp": r % tp, "pp": (r // tp) % pp, "dp": d, "edp": d // ep}
    keys = {"tp": ("pp", "dp"), "pp": ("tp", "dp"), "dp": ("tp", "pp"), "ep": ("tp", "pp", "edp")}
    rank = top["ranks"][0]
    if top["axis"] == "compute":
        ok = top["group"] == coords(rank)["pp"]
    else:
        key = lambda r: tuple(coords(r)[k] for k in keys[top["axis"]])
        groups = sorted({key(r) for r in range(tp * pp * dp)},
                        key=lambda g: min(r for r in range(tp * pp * dp) if key(r) == g))
        ok = 0 <= top["group"] < len(groups) and groups[top["group"]] == key(rank)
    if not ok:
        sys.exit("%s: the hang's %s group %d does not hold rank %d" %
                 (grid, top["axis"], top["group"], rank))
others = [f for f in faults if f is not top]
if others:
    timing_fail("%s: more than one fault finding:\n%s" % (grid, show(faults)))
print("%s: %s (reference: %s)" % (grid, top["text"], top["evidence"].get("reference", "-")))
PY
  then return 0; else return $?; fi
}
# A verdict that rests on measured time (exit 3) holds only if a repeat of the run gives it
# again: a finding the machine's noise made once (a scheduler slice on 4 ranks time-sharing 2
# cores) does not come back, a fault the model or the report got wrong does.
for grid in "${grids[@]}"; do
  if check_grid "$grid" 1; then rc=0; else rc=$?; fi
  if [ $rc = 3 ]; then
    echo "$grid: a verdict that rests on measured time failed; repeating the run once"
    if check_grid "$grid" 2; then rc=0; else rc=$?; fi
  fi
  case $rc in 0) ;; 3) timing=1 ;; *) failed=1 ;; esac
done
if [ $failed = 1 ]; then exit 1; fi
if [ $timing = 1 ]; then exit 3; fi
exit 0
