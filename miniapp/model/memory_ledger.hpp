// Bytes actually allocated by a model instance, per category, with high-water marks. Every
// View the model allocates goes through `track`, so memory figures in summary.json are
// measured allocations, not formulas.
#pragma once

#include <array>
#include <cstddef>

namespace paraxis::model {

enum class MemCategory { params, grads, optimizer, activations, count };

class MemoryLedger {
 public:
  template <class ViewT>
  ViewT track(MemCategory c, ViewT v) {
    add(c, v.span() * sizeof(typename ViewT::value_type));
    return v;
  }
  void add(MemCategory c, std::size_t bytes) {
    current_[idx(c)] += bytes;
    if (current_[idx(c)] > peak_[idx(c)]) peak_[idx(c)] = current_[idx(c)];
    std::size_t total = 0;
    for (auto b : current_) total += b;
    if (total > peak_total_) peak_total_ = total;
  }
  void release(MemCategory c, std::size_t bytes) { current_[idx(c)] -= bytes; }
  std::size_t current(MemCategory c) const { return current_[idx(c)]; }
  std::size_t peak(MemCategory c) const { return peak_[idx(c)]; }
  std::size_t peak_total() const { return peak_total_; }

 private:
  static constexpr std::size_t idx(MemCategory c) { return static_cast<std::size_t>(c); }
  std::array<std::size_t, static_cast<std::size_t>(MemCategory::count)> current_{}, peak_{};
  std::size_t peak_total_ = 0;
};

}  // namespace paraxis::model
