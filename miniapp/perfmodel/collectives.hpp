// Alpha-beta(-gamma) costs of the collectives paraxis calls, nccl-tests' bandwidth figures, and
// a least-squares fit of alpha and beta from measured (size, time) samples.
//
// Costs (Thakur, Rabenseifner and Gropp 2005, "Optimization of Collective Communication
// Operations in MPICH"; the cost comments of MPICH's src/mpi/coll/ algorithms), p ranks, n
// bytes, alpha per message, beta per byte sent, gamma per byte reduced:
//   ring all-gather             (p-1) a + n (p-1)/p b
//   ring reduce-scatter         (p-1) a + n (p-1)/p (b + g)
//   ring all-reduce             2 (p-1) a + 2 n (p-1)/p b + n (p-1)/p g   (= the two above)
//   Rabenseifner all-reduce     2 lg(p) a + 2 n (p-1)/p b + n (p-1)/p g
//   pairwise all-to-all         (p-1) a + n b       (n: bytes each rank sends in all)
//   point-to-point              a + n b
// n is nccl-tests' S for the operation (doc/PERFORMANCE.md): all-reduce the buffer;
// reduce-scatter the whole input; all-gather the whole gathered output; all-to-all what a rank
// sends. It is also what paraxis logs as an event's bytes, so measured and modelled figures
// line up. A group of one rank moves nothing and costs 0 (paraxis records no event for it).
#pragma once

#include <utility>
#include <vector>

namespace paraxis::perfmodel {

enum class Collective {
  all_reduce,
  reduce_scatter,
  all_gather,
  all_to_all,
  broadcast,
  reduce,
  point_to_point
};
const char* to_string(Collective op);

enum class AllReduceAlgorithm { ring, rabenseifner };

// Seconds per message (alpha), per byte on the wire (beta) and per byte reduced (gamma).
struct LinkCost {
  double alpha = 0, beta = 0, gamma = 0;
};

double ring_all_gather_time(int p, double n, const LinkCost& l);
double ring_reduce_scatter_time(int p, double n, const LinkCost& l);
double ring_all_reduce_time(int p, double n, const LinkCost& l);
// lg(p) rounded up: for p not a power of two MPICH first folds the extra ranks in, one more
// step each way.
double rabenseifner_all_reduce_time(int p, double n, const LinkCost& l);
double pairwise_all_to_all_time(int p, double n, const LinkCost& l);
double point_to_point_time(double n, const LinkCost& l);

// The time of `op` on p ranks for nccl-tests size S with the algorithms above; broadcast as
// scatter + ring all-gather, (lg p + p - 1) a + 2 n (p-1)/p b, and reduce as reduce-scatter +
// binomial gather, 2 lg p a + 2 n (p-1)/p b + n (p-1)/p g (Thakur et al. 2005, long messages;
// paraxis's training step calls neither).
double collective_time(Collective op, int p, double S, const LinkCost& l,
                       AllReduceAlgorithm all_reduce = AllReduceAlgorithm::ring);

// nccl-tests: algbw = S / t; busbw = algbw * factor, factor 2(p-1)/p for all-reduce, (p-1)/p
// for reduce-scatter, all-gather and all-to-all, 1 for broadcast, reduce and point-to-point.
double algbw(double S, double seconds);
double busbw_factor(Collective op, int p);
double busbw(Collective op, int p, double S, double seconds);

// The model written as t = latency_steps * alpha + S * bytes_factor * beta (gamma folded into
// beta): latency_steps is the number of sequential messages (2(p-1) ring all-reduce,
// 2 lg p Rabenseifner, p-1 reduce-scatter, all-gather, all-to-all, 1 point-to-point) and
// bytes_factor what multiplies S (2(p-1)/p all-reduce, (p-1)/p reduce-scatter and all-gather,
// 1 all-to-all and point-to-point).
double latency_steps(Collective op, int p,
                     AllReduceAlgorithm all_reduce = AllReduceAlgorithm::ring);
double bytes_factor(Collective op, int p, AllReduceAlgorithm all_reduce = AllReduceAlgorithm::ring);

// Least-squares fit of t = latency + S * beta_eff to (S, t) samples, each sample's residual
// relative to its time (weights 1 / t^2: small and large messages fitted alike), constrained to
// latency >= 0 and beta_eff >= 0 (if the unconstrained optimum has a negative coefficient, the
// best fit with that coefficient at 0). alpha = latency / latency_steps and
// beta = beta_eff / bytes_factor map the fit back to the algorithm's per-message and per-byte
// costs (gamma cannot be told apart from beta by timing one operation, so it is folded in).
struct AlphaBetaFit {
  double latency = 0;       // s: the intercept
  double beta_eff = 0;      // s per byte of S: the slope
  double alpha = 0;         // s per message
  double beta = 0;          // s per byte on the wire
  double rms_residual = 0;  // s: the unweighted root mean square of the residuals
  int samples = 0;
};
// Throws std::invalid_argument when fewer than 2 distinct sizes are given (a line needs two),
// when a size or time is negative, or when p < 2.
AlphaBetaFit fit_alpha_beta(Collective op, int p,
                            const std::vector<std::pair<double, double>>& size_time,
                            AllReduceAlgorithm all_reduce = AllReduceAlgorithm::ring);

}  // namespace paraxis::perfmodel
