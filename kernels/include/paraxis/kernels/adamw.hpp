// AdamW (Loshchilov & Hutter, decoupled weight decay), in the order PyTorch's torch.optim.AdamW
// applies it. For each element, with t = step (1-based) and all arithmetic in the master type M:
//   g      = grad_scale * grad
//   m      = beta1 * m + (1 - beta1) * g
//   v      = beta2 * v + (1 - beta2) * g^2
//   master = master - lr * weight_decay * master            (decay uses the pre-step value)
//   master = master - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// The bias corrections 1 - beta^t are computed once on the host in fp64. grad_scale folds in
// gradient clipping and loss-scale / micro-batch averaging.
//
// One fused pass, one thread per element. On a host space (row_lanes.hpp) each iteration takes
// a chunk of kAdamWChunk elements through restrict pointers in three vectorized loops
// (adamw_chunk: the square roots apart, through sqrt_inplace); the same formula, term by term,
// as the device path.
#pragma once

#include <cmath>
#include <sstream>

#include "paraxis/kernels/common.hpp"
#include "paraxis/kernels/math.hpp"
#include "paraxis/kernels/row_lanes.hpp"

// Host x86 builds: vector square roots for the host path (sqrt_inplace); never in a device pass.
#if (defined(__x86_64__) || defined(__i386__)) && defined(__AVX__) && !defined(__CUDA_ARCH__) && \
    !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
#include <immintrin.h>
#define PARAXIS_ADAMW_X86_SQRT 1
#else
#define PARAXIS_ADAMW_X86_SQRT 0
#endif

namespace paraxis::kernels {

struct AdamWHyper {
  double lr;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

namespace detail {

// Elements per iteration of the host path.
inline constexpr long long kAdamWChunk = 2048;

template <class M>
struct AdamWCoef {
  M b1, b2, one_b1, one_b2, inv_c1, inv_c2, lr, eps, decay, gs;
};

// sqrt of x[0..n) in place with vector instructions where the build targets AVX-512 or AVX:
// GCC leaves a loop over std::sqrt scalar (without -fno-math-errno a negative input must call
// the library to set errno). Correctly rounded either way, so the same bits as std::sqrt.
template <class M>
inline void sqrt_inplace(int n, M* KOKKOS_RESTRICT x) {
  int i = 0;
#if PARAXIS_ADAMW_X86_SQRT && defined(__AVX512F__)
  if constexpr (std::is_same_v<M, float>) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(x + i, _mm512_maskz_sqrt_ps(__mmask16(-1), _mm512_loadu_ps(x + i)));
  } else {
    for (; i + 8 <= n; i += 8)
      _mm512_storeu_pd(x + i, _mm512_maskz_sqrt_pd(__mmask8(-1), _mm512_loadu_pd(x + i)));
  }
#elif PARAXIS_ADAMW_X86_SQRT
  if constexpr (std::is_same_v<M, float>) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
  } else {
    for (; i + 4 <= n; i += 4) _mm256_storeu_pd(x + i, _mm256_sqrt_pd(_mm256_loadu_pd(x + i)));
  }
#endif
  for (; i < n; ++i) x[i] = std::sqrt(x[i]);
}

// The update of `count` <= kAdamWChunk consecutive elements (the device path's formula, element
// by element), in three loops so that the first and last vectorize and the square roots go
// through sqrt_inplace: m, v and d = v / c2; d = sqrt(d); master.
template <class M, class G>
inline void adamw_chunk(long long count, const AdamWCoef<M>& c, const G* KOKKOS_RESTRICT grad,
                        M* KOKKOS_RESTRICT m, M* KOKKOS_RESTRICT v, M* KOKKOS_RESTRICT master) {
  alignas(64) M d[kAdamWChunk];
  if (count > kAdamWChunk) count = kAdamWChunk;  // the caller's chunks never are (d's bound)
  for (long long i = 0; i < count; ++i) {
    const M g = c.gs * static_cast<M>(grad[i]);
    const M mi = c.b1 * m[i] + c.one_b1 * g;
    const M vi = c.b2 * v[i] + c.one_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    d[i] = vi * c.inv_c2;
  }
  sqrt_inplace(static_cast<int>(count), d);
  for (long long i = 0; i < count; ++i) {
    M p = master[i];
    p -= c.decay * p;
    p -= c.lr * (m[i] * c.inv_c1) / (d[i] + c.eps);
    master[i] = p;
  }
}

}  // namespace detail

template <class ExecSpace, class GV, class MV, class VV, class PV>
void adamw_update(const ExecSpace& space, const AdamWHyper& hp, int step, double grad_scale,
                  const GV& grad, const MV& m, const VV& v, const PV& master) {
  static_assert(GV::rank == 1 && MV::rank == 1 && VV::rank == 1 && PV::rank == 1,
                "adamw_update: grad[P], m[P], v[P], master[P]");
  using M = value_t<PV>;
  static_assert(std::is_same_v<value_t<MV>, M> && std::is_same_v<value_t<VV>, M>,
                "adamw_update: m, v and master share one type");
  static_assert(std::is_floating_point_v<M>, "adamw_update: master is float or double");
  assert_accessible<ExecSpace, GV, MV, VV, PV>();
  const char* k = "paraxis::adamw_update";
  const std::size_t P = master.extent(0);
  require_shape(k, "grad", grad, {P});
  require_shape(k, "m", m, {P});
  require_shape(k, "v", v, {P});
  if (step < 1) {
    std::ostringstream os;
    os << k << ": step = " << step << ", expected >= 1 (1-based)";
    throw std::invalid_argument(os.str());
  }
  const M b1 = static_cast<M>(hp.beta1), b2 = static_cast<M>(hp.beta2);
  const M one_b1 = static_cast<M>(1.0 - hp.beta1), one_b2 = static_cast<M>(1.0 - hp.beta2);
  const M inv_c1 = static_cast<M>(1.0 / (1.0 - std::pow(hp.beta1, step)));
  const M inv_c2 = static_cast<M>(1.0 / (1.0 - std::pow(hp.beta2, step)));
  const M lr = static_cast<M>(hp.lr), eps = static_cast<M>(hp.eps);
  const M decay = static_cast<M>(hp.lr * hp.weight_decay);
  const M gs = static_cast<M>(grad_scale);
  if constexpr (detail::host_exec_v<ExecSpace>) {
    if (detail::rows_contiguous(grad, m, v, master)) {
      const detail::AdamWCoef<M> c{b1, b2, one_b1, one_b2, inv_c1, inv_c2, lr, eps, decay, gs};
      constexpr long long C = detail::kAdamWChunk;
      const long long n = static_cast<long long>(P);
      Kokkos::parallel_for("paraxis::adamw_update_host",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, (n + C - 1) / C),
                           [=](const long long chunk) {
                             const long long b = chunk * C, count = n - b < C ? n - b : C;
                             detail::adamw_chunk(count, c, grad.data() + b, m.data() + b,
                                                 v.data() + b, master.data() + b);
                           });
      return;
    }
  }
  Kokkos::parallel_for(
      "paraxis::adamw_update", Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<long long>(P)),
      KOKKOS_LAMBDA(const long long i) {
        const M g = gs * static_cast<M>(grad(i));
        const M mi = b1 * m(i) + one_b1 * g;
        const M vi = b2 * v(i) + one_b2 * g * g;
        m(i) = mi;
        v(i) = vi;
        M p = master(i);
        p -= decay * p;
        p -= lr * (mi * inv_c1) / (math::sqrt(vi * inv_c2) + eps);
        master(i) = p;
      });
}

}  // namespace paraxis::kernels
