// `paraxis plan`'s evaluation (plan.cpp): a deck's model on a machine description, every
// configuration ranked by predicted step time, or one layout term by term. Pure: files in, text
// and a JSON file out, no MPI (driver/plan_command.cpp runs it on rank 0).
#pragma once

#include <string>
#include <vector>

namespace paraxis::driver {

struct PlanOptions {
  std::string model_deck, machine;
  std::vector<std::string> overrides;  // --set: model and train keys (parallel.*: refused)
  int top = 20;
  std::string json_out;
  std::string layout;  // --layout: evaluate this one layout (plan.cpp's grammar)
};

// The plan of opt (plan.cpp's header comment): prints it, writes --json; returns the exit code
// (config/exit_codes.hpp).
int evaluate_plan(const PlanOptions& opt);

}  // namespace paraxis::driver
