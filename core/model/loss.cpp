#include "core/model/loss.hpp"

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/attention/kokkos/tile.hpp"

namespace lcr {

using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>;

// A row's exps go in chunks of tile::kRowChunk (vectorised on a SIMD CPU; terms below
// 2^-64 of the largest are dropped, which changes the sum by less than V 2^-64 of it).
template <class T>
void cross_entropy_forward(const View2<const T>& logits, const View1<const int32_t>& labels,
                           const View1<T>& lse, const View1<T>& row_loss) {
  constexpr int C = tile::kRowChunk;
  const int V = int(logits.extent(1));
  Kokkos::parallel_for(
      "lcr::cross_entropy_forward", Range(0, logits.extent(0)), KOKKOS_LAMBDA(int64_t r) {
        const T* x = &logits(r, 0);
        const T m = tile::max_of(x, V, x[0]);
        T s = 0;
        for (int v0 = 0; v0 < V; v0 += C) {
          const int n = V - v0 < C ? V - v0 : C;
          T e[C];
          for (int k = 0; k < n; ++k) e[k] = x[v0 + k] - m;
          tile::exp_or_zero(e, n);
          s += tile::sum_of(e, n);
        }
        const T l = m + kmath::log(s);
        lse(r) = l;
        const int32_t y = labels(r);
        row_loss(r) = y >= 0 ? l - x[y] : T(0);
      });
}

template <class T>
void cross_entropy_backward(const View2<const T>& logits, const View1<const int32_t>& labels,
                            const View1<const T>& lse, T scale, const View2<T>& dlogits) {
  constexpr int C = tile::kRowChunk;
  const int64_t V = logits.extent(1), nc = (V + C - 1) / C;
  Kokkos::parallel_for(
      "lcr::cross_entropy_backward", Range(0, logits.extent(0) * nc), KOKKOS_LAMBDA(int64_t t) {
        const int64_t r = t / nc, v0 = (t % nc) * C;
        const int n = V - v0 < C ? int(V - v0) : C;
        const int32_t y = labels(r);
        T p[C];
        for (int k = 0; k < n; ++k) p[k] = logits(r, v0 + k) - lse(r);
        tile::exp_or_zero(p, n);
        for (int k = 0; k < n; ++k)
          dlogits(r, v0 + k) = y >= 0 ? scale * (p[k] - (v0 + k == y ? T(1) : T(0))) : T(0);
      });
}

template void cross_entropy_forward<float>(const View2<const float>&, const View1<const int32_t>&,
                                           const View1<float>&, const View1<float>&);
template void cross_entropy_forward<double>(const View2<const double>&, const View1<const int32_t>&,
                                            const View1<double>&, const View1<double>&);
template void cross_entropy_backward<float>(const View2<const float>&, const View1<const int32_t>&,
                                            const View1<const float>&, float, const View2<float>&);
template void cross_entropy_backward<double>(const View2<const double>&,
                                             const View1<const int32_t>&,
                                             const View1<const double>&, double,
                                             const View2<double>&);

}  // namespace lcr
