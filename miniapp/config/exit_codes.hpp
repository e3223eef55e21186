// The exit status of every paraxis command, declared once: the driver returns them, the
// watchdog and the checkpoint writer end a job with them, slurm/restart.sbatch decides from them
// whether another attempt can help, and docs/results.md lists them ("Exit status").
#pragma once

namespace paraxis::exit_code {

inline constexpr int ok = 0;
// A point diverged or failed --verify (the other points ran); plan --layout: the layout
// breaks a rule or does not fit.
inline constexpr int not_ok = 1;
// Bad input: a deck, a command line (CLI parse errors included), an output folder, a
// checkpoint that --resume refuses, a summary.json or machine file that report/plan refuse.
inline constexpr int bad_input = 2;
// A rank failed (an exception, fault.dead_rank): the job was ended.
inline constexpr int rank_failed = 3;
// A result file or a checkpoint could not be written.
inline constexpr int write_failed = 4;
// The watchdog ended a hang (comm.timeout_s expired).
inline constexpr int hang = 5;
// The user interrupted the run (SIGINT, Ctrl-C): 128 + 2, as shells report it.
inline constexpr int interrupted = 130;

}  // namespace paraxis::exit_code
