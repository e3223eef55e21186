// Floors of kernel rows that miss half a copy (docs/perf-log/2026-12-05-kernels-round4.md):
// the kernel's access pattern as the plainest loop that produces a checkable result, timed in
// the same run as the kernel and its copy. Registered as "FAMILY/PASS/floor/NAME/SHAPE", so
// tools/roofline_table.py sets them against the family's copy and lists them apart from the
// kernels (not counted against the target). Host execution spaces only: raw row pointers into
// LayoutRight Views, one parallel_for over rows (or row blocks) like the kernels' host paths.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstring>
#include <type_traits>

namespace paraxis::bench::floors {

template <class Exec>
inline constexpr bool host_v =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible;

// dst row i = src row index(i) (index < 0: untouched), whole rows by memcpy: a gather of rows.
template <class Exec, class T>
void gather_rows(
    const Kokkos::View<const T**, Kokkos::LayoutRight, typename Exec::memory_space>& src,
    const Kokkos::View<const int*, Kokkos::LayoutRight, typename Exec::memory_space>& index,
    const Kokkos::View<T**, Kokkos::LayoutRight, typename Exec::memory_space>& dst) {
  const std::size_t h = src.extent(1);
  Kokkos::parallel_for(Kokkos::RangePolicy<Exec>(0, static_cast<int>(dst.extent(0))),
                       [=](const int i) {
                         const int from = index(i);
                         if (from >= 0) std::memcpy(&dst(i, 0), &src(from, 0), h * sizeof(T));
                       });
}

// dst row index(i) += src row i for i in order, one thread (rows may repeat: a scatter-add in
// source order, the embedding gradient's order of terms).
template <class Exec, class T, class G>
void scatter_add_rows(
    const Kokkos::View<const T**, Kokkos::LayoutRight, typename Exec::memory_space>& src,
    const Kokkos::View<const int*, Kokkos::LayoutRight, typename Exec::memory_space>& index,
    const Kokkos::View<G**, Kokkos::LayoutRight, typename Exec::memory_space>& dst) {
  const int h = static_cast<int>(src.extent(1)), n = static_cast<int>(src.extent(0));
  Kokkos::parallel_for(Kokkos::RangePolicy<Exec>(0, 1), [=](const int) {
    for (int i = 0; i < n; ++i) {
      G* KOKKOS_RESTRICT d = &dst(index(i), 0);
      const T* KOKKOS_RESTRICT s = &src(i, 0);
      for (int j = 0; j < h; ++j) d[j] += static_cast<G>(s[j]);
    }
  });
}

// m += g, v += g, p += g over n values: AdamW's four read and three written streams with one
// add each (no square root, no division).
template <class Exec, class T>
void three_adds(const Kokkos::View<const T*, Kokkos::LayoutRight, typename Exec::memory_space>& g,
                const Kokkos::View<float*, Kokkos::LayoutRight, typename Exec::memory_space>& m,
                const Kokkos::View<float*, Kokkos::LayoutRight, typename Exec::memory_space>& v,
                const Kokkos::View<float*, Kokkos::LayoutRight, typename Exec::memory_space>& p) {
  constexpr long long C = 4096;
  const long long n = static_cast<long long>(g.extent(0));
  Kokkos::parallel_for(Kokkos::RangePolicy<Exec>(0, (n + C - 1) / C), [=](const long long c) {
    const long long b = c * C, e = n - b < C ? n : b + C;
    const T* KOKKOS_RESTRICT gp = g.data();
    float* KOKKOS_RESTRICT mp = m.data();
    float* KOKKOS_RESTRICT vp = v.data();
    float* KOKKOS_RESTRICT pp = p.data();
    for (long long i = b; i < e; ++i) {
      const float x = static_cast<float>(gp[i]);
      mp[i] += x, vp[i] += x, pp[i] += x;
    }
  });
}

// db(j) += sum_i dY(i, j) with the rows walked once, front to back, each whole row added into
// an array of kMax column sums (L1) and every column still summed from row 0 in order: the
// bias gradient's sums streaming dY once, in `blocks` column blocks (one per thread).
template <class Exec, class T, class A>
void column_sums_by_rows(
    const Kokkos::View<const T**, Kokkos::LayoutRight, typename Exec::memory_space>& dY,
    const Kokkos::View<A*, Kokkos::LayoutRight, typename Exec::memory_space>& db, int blocks) {
  constexpr int kMax = 2048;
  const int n = static_cast<int>(dY.extent(0)), m = static_cast<int>(dY.extent(1));
  const int per = ((m + blocks - 1) / blocks + 15) / 16 * 16, w_max = per < kMax ? per : kMax;
  Kokkos::parallel_for(Kokkos::RangePolicy<Exec>(0, (m + w_max - 1) / w_max), [=](const int blk) {
    const int j0 = blk * w_max, w = m - j0 < w_max ? m - j0 : w_max;
    alignas(64) A s[kMax];
    for (int c = 0; c < w; ++c) s[c] = A(0);
    for (int i = 0; i < n; ++i) {
      const T* KOKKOS_RESTRICT d = &dY(i, j0);
      for (int c = 0; c < w; ++c) s[c] += static_cast<A>(d[c]);
    }
    for (int c = 0; c < w; ++c) db(j0 + c) += s[c];
  });
}

}  // namespace paraxis::bench::floors
