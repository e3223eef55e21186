#!/usr/bin/env python3
"""Runs a test whose verdict rests on measured time, and keeps the machine's load out of it.

    timing_guard.py [--max-load F] [--timing-exit N] -- COMMAND [ARG ...]

A timing test (a fault at the limit of what the diagnosis detects, the model's accuracy
against measured step times) is only meaningful on a quiet machine: on a shared login node or
beside another build its figures measure the other jobs. This wrapper runs COMMAND and measures,
over exactly the time it ran, how much of the machine's CPU went elsewhere:

    load = (CPU time the whole machine was busy - CPU time of COMMAND and its descendants,
            steal included) / (cores x wall time)

from /proc/stat and the rusage of COMMAND's reaped process tree (mpiexec reaps its ranks).
  - COMMAND passed: pass (exit 0), whatever the load.
  - COMMAND failed and load > F (default 0.10): exit 77, which CTest shows as Skipped, with a
    line saying how busy the machine was: the verdict would be the load's.
  - COMMAND failed on a quiet machine: its failure stands (its exit code).
With --timing-exit N only exit code N is a timing verdict: a COMMAND that checks both kinds
(test_diagnosis_runs.sh: the injected fault's finding, which no load moves, and the absence of
other findings, which noise can break) fails with any other code whatever the load.
Measuring during the run, not before it, also catches a job that starts half-way through.
docs/architecture.md, "Timing tests".
"""
import os
import resource
import subprocess
import sys
import time

SKIPPED = 77


def machine_busy_seconds():
    """CPU seconds all cores spent busy since boot (steal included), and the core count."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    ticks = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq + steal) / ticks, os.cpu_count() or 1


def children_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv):
    max_load, timing_exit = 0.10, None
    while argv[:1] in (["--max-load"], ["--timing-exit"]) and len(argv) > 1:
        if argv[0] == "--max-load":
            max_load = float(argv[1])
        else:
            timing_exit = int(argv[1])
        argv = argv[2:]
    if argv[:1] != ["--"] or len(argv) < 2:
        sys.exit("usage: timing_guard.py [--max-load F] [--timing-exit N] -- COMMAND [ARG ...]")
    command = argv[1:]
    busy0, cores = machine_busy_seconds()
    own0, wall0 = children_seconds(), time.monotonic()
    rc = subprocess.call(command)
    busy1, _ = machine_busy_seconds()
    own, wall = children_seconds() - own0, time.monotonic() - wall0
    others = max(0.0, (busy1 - busy0) - own)
    load = others / (cores * wall) if wall > 0 else 0.0
    verdict = "passed" if rc == 0 else "failed"
    print("timing_guard: the test %s in %.1f s; other work used %.0f %% of the %d cores "
          "meanwhile (quiet: at most %.0f %%)" % (verdict, wall, 100 * load, cores,
                                                   100 * max_load))
    timed = rc != 0 and (timing_exit is None or rc == timing_exit)
    if timed and load > max_load:
        print("timing_guard: SKIPPED: the machine was busy while this timing test ran, so its "
              "failure measured the load, not paraxis; rerun it on a quiet machine")
        return SKIPPED
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
