// Ctrl-C is not bad input: a run interrupted by SIGINT (the user, or a launcher forwarding it)
// ends with its own exit status, exit_code::interrupted (130, as shells report 128 + SIGINT),
// after one line on stderr, so that scripts (slurm/restart.sbatch) tell it from every other
// ending. docs/results.md, "Exit status".
#pragma once

namespace paraxis::driver {

// Installs the SIGINT handler for this process (rank: named in its line).
void exit_on_interrupt(int rank);

}  // namespace paraxis::driver
