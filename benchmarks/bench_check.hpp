// The result check every benchmark row makes (RAJAPerf's checksum of every variant,
// nccl-tests' #wrong): once per run of the benchmark function, outside the timed loop, the
// row's outputs are compared element by element with a host reference of the same inputs
// (fp64 loops in the benchmark's file, or a copy's source). The row gets a counter `wrong`,
// the number of elements outside the tolerance (0 on a good row), and a mismatch fails the
// row with a message (SkipWithError; bench_main then exits non-zero).
//
// The rule, stated once (kCheckRule is the benchmark context's "checked" entry): element i is
// wrong when |got_i - ref_i| > tol * (|ref_i| + rms(ref)), or when got_i is not a number. rms
// (the root mean square of the reference output) scales elements that cancel to about zero
// by their output's size. tol depends on the type the output is stored in (check_tolerance):
//   - fp32 1e-4 (about 800 fp32 unit roundoffs): the worst fp32 element of any row measured
//     reaches 0.21 of it (bias_grad's column sums of 4,096 rows), most rows below 0.02;
//   - bf16 2^-4 (16 bf16 unit roundoffs): the unfused attention backward keeps its
//     probabilities and their gradient in bf16 and reaches 0.6 of it (dK), every other bf16
//     row 0.2 or less. The bf16 rows run the same kernel templates as the fp32 rows, whose
//     check is the sharp one; theirs catches what the storage type changes;
//   - exact (tol 0) for copies, gathers and conversions into fp32.
#pragma once

#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "paraxis/kernels/bf16.hpp"

namespace paraxis::bench {

inline constexpr const char* kCheckRule =
    "every row: counter 'wrong' = output elements with |got - ref| > tol * (|ref| + rms(ref)) "
    "against a host fp64 reference of the same inputs (checked outside the timed loop); tol "
    "fp32 1e-4, bf16 2^-4, copies exact; a row with wrong > 0 fails";

// The tolerance of an output stored as T (see the file comment).
template <class T>
constexpr double check_tolerance() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, paraxis::bf16>)
    return 1.0 / 16;
  else if constexpr (std::is_same_v<U, float>)
    return 1e-4;
  else if constexpr (std::is_same_v<U, double>)
    return 1e-12;
  else
    return 0.0;  // integers
}
inline constexpr double kExact = 0.0;

// The elements of v (any rank, contiguous) in memory order, as doubles on the host, after
// the work queued before it has finished (so a benchmark's timed loop then starts fenced).
template <class V>
std::vector<double> host_values(const V& v) {
  Kokkos::fence();
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<double> out(h.span());
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = static_cast<double>(h.data()[k]);
  return out;
}

// Compares got with ref by the rule above; adds the wrong elements to the row's `wrong`
// counter and, if there are any, fails the row with a message naming `output`, the count and
// the worst element. Returns the number of wrong elements.
std::size_t check_values(benchmark::State& state, const std::string& output,
                         std::vector<double> got, const std::vector<double>& ref, double tol);

// Test hook (bench_main's --corrupt-for-test): from now on every check first moves the first
// element it is given by 1 + |value|, outside any tolerance, so every checked row must fail
// and the binary exit 1 (the ctest bench_kernels_detects_wrong_result).
void corrupt_checks_for_test();

// check_values for a View, with the tolerance of its storage type unless given.
template <class V>
std::size_t check_output(benchmark::State& state, const std::string& output, const V& got,
                         const std::vector<double>& ref,
                         double tol = check_tolerance<typename V::non_const_value_type>()) {
  return check_values(state, output, host_values(got), ref, tol);
}

}  // namespace paraxis::bench
