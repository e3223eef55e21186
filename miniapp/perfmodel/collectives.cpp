// Alpha-beta-gamma collective costs, nccl-tests bandwidth factors, and the alpha-beta fit.
#include "perfmodel/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <stdexcept>

namespace paraxis::perfmodel {

namespace {

double ceil_lg(int p) {
  return p <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(p)));
}

// (p-1)/p: the share of the data a rank exchanges in a ring or recursive-halving step set.
double others(int p) {
  return p <= 1 ? 0.0 : static_cast<double>(p - 1) / p;
}

void require_ranks(int p, const char* what) {
  if (p < 1)
    throw std::invalid_argument(std::string(what) + ": p = " + std::to_string(p) +
                                " ranks, expected >= 1");
}

}  // namespace

const char* to_string(Collective op) {
  switch (op) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_gather:
      return "all_gather";
    case Collective::all_to_all:
      return "all_to_all";
    case Collective::broadcast:
      return "broadcast";
    case Collective::reduce:
      return "reduce";
    case Collective::point_to_point:
      return "point_to_point";
  }
  return "unknown";
}

double ring_all_gather_time(int p, double n, const LinkCost& l) {
  require_ranks(p, "ring_all_gather_time");
  return (p - 1) * l.alpha + n * others(p) * l.beta;
}

double ring_reduce_scatter_time(int p, double n, const LinkCost& l) {
  require_ranks(p, "ring_reduce_scatter_time");
  return (p - 1) * l.alpha + n * others(p) * (l.beta + l.gamma);
}

double ring_all_reduce_time(int p, double n, const LinkCost& l) {
  require_ranks(p, "ring_all_reduce_time");
  return 2.0 * (p - 1) * l.alpha + 2.0 * n * others(p) * l.beta + n * others(p) * l.gamma;
}

double rabenseifner_all_reduce_time(int p, double n, const LinkCost& l) {
  require_ranks(p, "rabenseifner_all_reduce_time");
  return 2.0 * ceil_lg(p) * l.alpha + 2.0 * n * others(p) * l.beta + n * others(p) * l.gamma;
}

double pairwise_all_to_all_time(int p, double n, const LinkCost& l) {
  require_ranks(p, "pairwise_all_to_all_time");
  if (p == 1) return 0.0;
  return (p - 1) * l.alpha + n * l.beta;
}

double point_to_point_time(double n, const LinkCost& l) {
  return l.alpha + n * l.beta;
}

double collective_time(Collective op, int p, double S, const LinkCost& l,
                       AllReduceAlgorithm all_reduce) {
  require_ranks(p, "collective_time");
  if (op != Collective::point_to_point && p == 1) return 0.0;
  switch (op) {
    case Collective::all_reduce:
      return all_reduce == AllReduceAlgorithm::ring ? ring_all_reduce_time(p, S, l)
                                                    : rabenseifner_all_reduce_time(p, S, l);
    case Collective::reduce_scatter:
      return ring_reduce_scatter_time(p, S, l);
    case Collective::all_gather:
      return ring_all_gather_time(p, S, l);
    case Collective::all_to_all:
      return pairwise_all_to_all_time(p, S, l);
    case Collective::broadcast:
      return (ceil_lg(p) + p - 1) * l.alpha + 2.0 * S * others(p) * l.beta;
    case Collective::reduce:
      return 2.0 * ceil_lg(p) * l.alpha + 2.0 * S * others(p) * l.beta + S * others(p) * l.gamma;
    case Collective::point_to_point:
      return point_to_point_time(S, l);
  }
  return 0.0;
}

double algbw(double S, double seconds) {
  if (!(seconds > 0))
    throw std::invalid_argument("algbw: time = " + std::to_string(seconds) + " s, expected > 0");
  return S / seconds;
}

double busbw_factor(Collective op, int p) {
  require_ranks(p, "busbw_factor");
  switch (op) {
    case Collective::all_reduce:
      return 2.0 * others(p);
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all:
      return others(p);
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::point_to_point:
      return 1.0;
  }
  return 1.0;
}

double busbw(Collective op, int p, double S, double seconds) {
  return algbw(S, seconds) * busbw_factor(op, p);
}

double latency_steps(Collective op, int p, AllReduceAlgorithm all_reduce) {
  require_ranks(p, "latency_steps");
  switch (op) {
    case Collective::all_reduce:
      return all_reduce == AllReduceAlgorithm::ring ? 2.0 * (p - 1) : 2.0 * ceil_lg(p);
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all:
      return p - 1;
    case Collective::broadcast:
      return ceil_lg(p) + p - 1;
    case Collective::reduce:
      return 2.0 * ceil_lg(p);
    case Collective::point_to_point:
      return 1.0;
  }
  return 1.0;
}

double bytes_factor(Collective op, int p, AllReduceAlgorithm) {
  require_ranks(p, "bytes_factor");
  switch (op) {
    case Collective::all_reduce:
    case Collective::broadcast:
    case Collective::reduce:
      return 2.0 * others(p);
    case Collective::reduce_scatter:
    case Collective::all_gather:
      return others(p);
    case Collective::all_to_all:
      return p == 1 ? 0.0 : 1.0;
    case Collective::point_to_point:
      return 1.0;
  }
  return 1.0;
}

namespace {

using SizeTimes = std::vector<std::pair<double, double>>;

void check_fit_samples(Collective op, int p, const SizeTimes& size_time) {
  if (p < 2 && op != Collective::point_to_point)
    throw std::invalid_argument("fit_alpha_beta: " + std::string(to_string(op)) + " on p = " +
                                std::to_string(p) + " ranks moves nothing; expected p >= 2");
  std::set<double> sizes;
  for (const auto& [S, t] : size_time) {
    if (S < 0 || t < 0 || !std::isfinite(S) || !std::isfinite(t)) {
      std::ostringstream os;
      os << "fit_alpha_beta: sample (S = " << S << " B, t = " << t
         << " s), expected finite non-negative values";
      throw std::invalid_argument(os.str());
    }
    sizes.insert(S);
  }
  if (sizes.size() < 2)
    throw std::invalid_argument("fit_alpha_beta: " + std::to_string(sizes.size()) +
                                " distinct message size(s) in " + std::to_string(size_time.size()) +
                                " samples; a latency and a bandwidth need at least 2 sizes");
}

struct Line {
  double slope, intercept;
};

// Relative least squares: minimise sum ((latency + S beta_eff - t) / t)^2, weights 1 / t^2.
// Unweighted, the 4 MiB samples (milliseconds) decide the line and the intercept misses the
// small messages (microseconds) by 2-3x, yet a training step's tensor-parallel collectives are
// mostly small (docs/perfmodel.md, "Fit"). A time of 0 is weighted as a millionth of the largest
// (never an infinite weight). Neither term negative.
Line relative_least_squares(const SizeTimes& size_time) {
  double t_max = 0;
  for (const auto& st : size_time) t_max = std::max(t_max, st.second);
  const double t_floor = t_max > 0 ? 1e-6 * t_max : 1.0;
  auto weight = [&](double t) {
    const double u = std::max(t, t_floor);
    return 1.0 / (u * u);
  };
  // Weighted centred sums keep the normal equations well conditioned when S spans decades.
  double w_sum = 0, mean_s = 0, mean_t = 0;
  for (const auto& [S, t] : size_time) {
    const double w = weight(t);
    w_sum += w;
    mean_s += w * S;
    mean_t += w * t;
  }
  mean_s /= w_sum;
  mean_t /= w_sum;
  double sxx = 0, sxy = 0;
  for (const auto& [S, t] : size_time) {
    const double w = weight(t);
    sxx += w * (S - mean_s) * (S - mean_s);
    sxy += w * (S - mean_s) * (t - mean_t);
  }
  const double slope = sxy / sxx, intercept = mean_t - slope * mean_s;
  // No bandwidth term: the weighted mean time.
  if (slope < 0) return {0, mean_t};
  if (!(intercept < 0)) return {slope, intercept};
  // Through the origin.
  double ss = 0, st = 0;
  for (const auto& [S, t] : size_time) {
    const double w = weight(t);
    ss += w * S * S;
    st += w * S * t;
  }
  return {st / ss, 0};
}

}  // namespace

AlphaBetaFit fit_alpha_beta(Collective op, int p, const SizeTimes& size_time,
                            AllReduceAlgorithm all_reduce) {
  check_fit_samples(op, p, size_time);
  const Line line = relative_least_squares(size_time);
  const double slope = line.slope, intercept = line.intercept;
  AlphaBetaFit f;
  f.latency = intercept;
  f.beta_eff = slope;
  f.alpha = intercept / latency_steps(op, p, all_reduce);
  f.beta = slope / bytes_factor(op, p, all_reduce);
  f.samples = static_cast<int>(size_time.size());
  double rss = 0;
  for (const auto& [S, t] : size_time) {
    const double r = t - (intercept + slope * S);
    rss += r * r;
  }
  f.rms_residual = std::sqrt(rss / static_cast<double>(size_time.size()));
  return f;
}

}  // namespace paraxis::perfmodel
