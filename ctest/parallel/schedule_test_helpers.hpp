// Helpers of the schedule tests (test_pipeline_schedule.cpp, test_zb_h1_schedule.cpp): short
// names for the action kinds and the edits that break a generated schedule by hand.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "schedule/pipeline_schedule.hpp"

namespace schedule_test {

using paraxis::schedule::Action;
using paraxis::schedule::ActionKind;

constexpr ActionKind F = ActionKind::forward;
constexpr ActionKind B = ActionKind::backward;
constexpr ActionKind W = ActionKind::backward_weight;
constexpr ActionKind SA = ActionKind::send_activation;
constexpr ActionKind RA = ActionKind::recv_activation;
constexpr ActionKind SG = ActionKind::send_gradient;
constexpr ActionKind RG = ActionKind::recv_gradient;

inline bool is_compute(const Action& a) {
  return a.kind == F || a.kind == B || a.kind == W;
}

// Position of `a` in `list`; fails the test (and returns -1) when absent.
inline int position(const std::vector<Action>& list, const Action& a) {
  const auto it = std::find(list.begin(), list.end(), a);
  EXPECT_NE(it, list.end()) << to_string(a.kind) << "(" << a.micro_batch << ", " << a.chunk
                            << ") not in the list";
  return it == list.end() ? -1 : static_cast<int>(it - list.begin());
}

inline void erase(std::vector<Action>& list, const Action& a) {
  const int i = position(list, a);
  if (i >= 0) list.erase(list.begin() + i);
}

// Moves `a` to just before `before` (both on the same list).
inline void move_before(std::vector<Action>& list, const Action& a, const Action& before) {
  erase(list, a);
  const int i = position(list, before);
  if (i >= 0) list.insert(list.begin() + i, a);
}

inline void move_after(std::vector<Action>& list, const Action& a, const Action& after) {
  erase(list, a);
  const int i = position(list, after);
  if (i >= 0) list.insert(list.begin() + i + 1, a);
}

inline std::vector<Action> computes(const std::vector<Action>& list) {
  std::vector<Action> out;
  for (const Action& a : list)
    if (is_compute(a)) out.push_back(a);
  return out;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace schedule_test
