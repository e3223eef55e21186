// The deck's checks of the checkpoint keys (deck_checkpoint.hpp).
#include "deck/deck_checkpoint.hpp"

namespace paraxis::driver {

std::vector<std::pair<std::string, std::string>> checkpoint_errors(const RunConfig& c) {
  std::vector<std::pair<std::string, std::string>> e;
  const auto& k = c.checkpoint;
  if (k.every > c.train.steps)
    e.push_back({"checkpoint.every", "checkpoint.every = " + std::to_string(k.every) +
                                         " exceeds train.steps = " + std::to_string(c.train.steps) +
                                         ": no checkpoint would be written"});
  if (c.fault.dead_rank.rank >= 0 && c.fault.dead_rank.at == DeadAt::checkpoint &&
      k.every != kCheckpointAuto) {  // auto saves after the first step
    if (k.every <= 0)
      e.push_back({"fault.dead_rank.at",
                   "at: checkpoint kills the rank during a checkpoint, and checkpoint.every = 0 "
                   "writes none"});
    else if ((c.fault.dead_rank.step + k.every - 1) / k.every * k.every > c.train.steps)
      e.push_back({"fault.dead_rank.step", "no checkpoint is written at or after step " +
                                               std::to_string(c.fault.dead_rank.step) +
                                               " (checkpoint.every = " + std::to_string(k.every) +
                                               ", train.steps = " + std::to_string(c.train.steps) +
                                               "): the rank would not die"});
  }
  return e;
}

}  // namespace paraxis::driver
