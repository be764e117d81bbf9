#include "core/model/loss.hpp"

#include "kernels/attention/kokkos/math.hpp"

namespace lcr {

using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>;

template <class T>
void cross_entropy_forward(const View2<const T>& logits, const View1<const int32_t>& labels,
                           const View1<T>& lse, const View1<T>& row_loss) {
  const int64_t V = logits.extent(1);
  Kokkos::parallel_for(
      "lcr::cross_entropy_forward", Range(0, logits.extent(0)), KOKKOS_LAMBDA(int64_t r) {
        T m = logits(r, 0);
        for (int64_t v = 1; v < V; ++v) m = logits(r, v) > m ? logits(r, v) : m;
        T s = 0;
        for (int64_t v = 0; v < V; ++v) s += kmath::exp(logits(r, v) - m);
        const T l = m + kmath::log(s);
        lse(r) = l;
        const int32_t y = labels(r);
        row_loss(r) = y >= 0 ? l - logits(r, y) : T(0);
      });
}

template <class T>
void cross_entropy_backward(const View2<const T>& logits, const View1<const int32_t>& labels,
                            const View1<const T>& lse, T scale, const View2<T>& dlogits) {
  const int64_t V = logits.extent(1);
  Kokkos::parallel_for(
      "lcr::cross_entropy_backward", Range(0, logits.extent(0) * V), KOKKOS_LAMBDA(int64_t t) {
        const int64_t r = t / V, v = t % V;
        const int32_t y = labels(r);
        const T p = kmath::exp(logits(r, v) - lse(r));
        dlogits(r, v) = y >= 0 ? scale * (p - (v == y ? T(1) : T(0))) : T(0);
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
