// The exit status of every paraxis command, declared once: the driver returns them, the
// watchdog and the checkpoint writer end a job with them, slurm/restart.sbatch decides from them
// whether another attempt can help, and docs/results.md lists them ("Exit status"; the CTest
// exit_codes_declared_once checks that table, the script and the code against this list).
//
// One enumeration, unscoped on purpose: an exit status is an int wherever it goes (main's
// return, MPI_Abort, _exit, a command's int result, CheckpointError::exit_code), so each code
// converts to int implicitly while `exit_code::Code` names the set and `exit_code::bad_input`
// reads as before. An enum class would need a cast at every one of those calls and buy nothing:
// no arithmetic is done on codes, and the namespace already keeps the names out of the way.
#pragma once

namespace paraxis::exit_code {

enum Code : int {
  ok = 0,
  // A point diverged or failed --verify (the other points ran); plan --layout: the layout
  // breaks a rule or does not fit.
  not_ok = 1,
  // Bad input: a deck, a command line (CLI parse errors included), an output folder, a
  // checkpoint that --resume refuses, a summary.json or machine file that report/plan refuse.
  bad_input = 2,
  // A rank failed (an exception, fault.dead_rank): the job was ended.
  rank_failed = 3,
  // A result file or a checkpoint could not be written.
  write_failed = 4,
  // The watchdog ended a hang (comm.timeout_s expired).
  hang = 5,
  // The user interrupted the run (SIGINT, Ctrl-C): 128 + 2, as shells report it.
  interrupted = 130,
};

}  // namespace paraxis::exit_code
