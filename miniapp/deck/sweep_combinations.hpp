// Which combinations of a sweep's lists are points, counted before any point is built (a few
// YAML anchors can ask for 10^10): every combination, or, when a grid degree is `auto`, only
// those that factorise the rank count (tp * pp * dp = world; ep | dp when ep is auto). The count
// saturates instead of overflowing; the list is built only once the count is known to be small.
// Header-only: plain integer work, used by the deck loader (deck.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <map>
#include <vector>

#include "config/checked_product.hpp"

namespace paraxis::driver {

using config::checked_product;
using config::saturating_add;
using config::saturating_mul;

struct SweepCombinations {
  std::vector<std::size_t> lengths;  // of each sweep entry's list, in the sweep's order
  int world = 0;
  bool auto_grid = false;  // tp, pp or dp is auto: keep tp * pp * dp = world
  bool auto_ep = false;    // ep is auto: keep ep | dp
  // With a filter: the sweep entry of tp, pp, dp, ep (-1: not swept), and each degree's value at
  // every position of its list (its one value when not swept). Degrees are >= 1.
  std::array<int, 4> grid_entry{-1, -1, -1, -1};
  std::array<std::vector<int>, 4> grid_values;

  bool filtered() const { return auto_grid || auto_ep; }
  bool is_grid_entry(std::size_t i) const {
    return filtered() &&
           std::find(grid_entry.begin(), grid_entry.end(), static_cast<int>(i)) != grid_entry.end();
  }

  // The number of points (LLONG_MAX when it does not fit).
  long long count() const {
    long long others = 1;
    for (std::size_t i = 0; i < lengths.size(); ++i)
      if (!is_grid_entry(i)) others = saturating_mul(others, static_cast<long long>(lengths[i]));
    if (!filtered()) return others;
    auto multiplicity = [](const std::vector<int>& v) {
      std::map<long long, long long> m;
      for (int x : v) ++m[x];
      return m;
    };
    const auto T = multiplicity(grid_values[0]), P = multiplicity(grid_values[1]),
               D = multiplicity(grid_values[2]), E = multiplicity(grid_values[3]);
    long long grid = 0;
    for (const auto& [d, dn] : D) {
      long long pairs = 0;  // the (tp, pp) that complete this dp
      if (!auto_grid) {
        pairs = saturating_mul(static_cast<long long>(grid_values[0].size()),
                               static_cast<long long>(grid_values[1].size()));
      } else if (world % d == 0) {
        const long long q = world / d;
        for (const auto& [t, tn] : T)
          if (q % t == 0)
            if (auto it = P.find(q / t); it != P.end())
              pairs = saturating_add(pairs, saturating_mul(tn, it->second));
      }
      long long eps = auto_ep ? 0 : static_cast<long long>(grid_values[3].size());
      for (const auto& [e, en] : E)
        if (auto_ep && d % e == 0) eps += en;  // at most the list's length
      grid = saturating_add(grid, saturating_mul(saturating_mul(pairs, dn), eps));
    }
    return saturating_mul(grid, others);
  }

  // Every point as one index per sweep entry, in the sweep's order (last entry fastest). Call
  // only once count() is known to be small: the grid search prunes on divisibility, so its work
  // is bounded by the points it finds times the lists' lengths.
  std::vector<std::vector<std::size_t>> list() const {
    std::vector<std::array<std::size_t, 4>> grid;  // the grid degrees' combinations that count
    if (!filtered()) grid.push_back({0, 0, 0, 0});
    const auto &T = grid_values[0], &P = grid_values[1], &D = grid_values[2], &E = grid_values[3];
    for (std::size_t it = 0; filtered() && it < T.size(); ++it) {
      if (auto_grid && world % T[it] != 0) continue;
      for (std::size_t ip = 0; ip < P.size(); ++ip) {
        const long long tp = static_cast<long long>(T[it]) * P[ip];  // < 2^62
        if (auto_grid && world % tp != 0) continue;
        for (std::size_t id = 0; id < D.size(); ++id) {
          if (auto_grid && tp * D[id] != world) continue;  // tp <= world here: no overflow
          for (std::size_t ie = 0; ie < E.size(); ++ie)
            if (!auto_ep || D[id] % E[ie] == 0) grid.push_back({it, ip, id, ie});
        }
      }
    }
    std::vector<std::vector<std::size_t>> out;
    std::vector<std::size_t> idx(lengths.size(), 0);
    while (true) {
      for (const auto& g : grid) {
        out.push_back(idx);
        for (int a = 0; a < 4; ++a)
          if (grid_entry[a] >= 0) out.back()[grid_entry[a]] = g[a];
      }
      std::size_t d = lengths.size();  // the next combination of the entries that are not grid
      while (d > 0 && (is_grid_entry(d - 1) || ++idx[d - 1] == lengths[d - 1])) idx[--d] = 0;
      if (d == 0) break;
    }
    if (filtered()) std::sort(out.begin(), out.end());  // back into the sweep's order
    return out;
  }
};

}  // namespace paraxis::driver
