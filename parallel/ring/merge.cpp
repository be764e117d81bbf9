#include "parallel/ring/merge.hpp"

#include <limits>

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/base/error.hpp"

namespace lcr {

template <class T>
void ring_merge(const View4<T>& o_acc, const View3<T>& lse_acc, const View4<const T>& o_blk,
                const View3<const T>& lse_blk) {
  require(shape_of(o_acc) == shape_of(o_blk) && shape_of(lse_acc) == shape_of(lse_blk),
          "ring_merge: partial results differ in shape: o ", shape_string(shape_of(o_acc)), " vs ",
          shape_string(shape_of(o_blk)), ", lse ", shape_string(shape_of(lse_acc)), " vs ",
          shape_string(shape_of(lse_blk)));
  const int B = o_acc.extent(0), L = o_acc.extent(1), H = o_acc.extent(2), Dv = o_acc.extent(3);
  const T ninf = -std::numeric_limits<T>::infinity();
  Kokkos::parallel_for(
      "lcr::ring_merge", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, H, L}),
      KOKKOS_LAMBDA(int b, int h, int i) {
        const T l1 = lse_acc(b, h, i), l2 = lse_blk(b, h, i);
        if (l2 == ninf) return;  // the block added nothing to this row
        if (l1 == ninf) {        // first block this row sees: take it as is
          lse_acc(b, h, i) = l2;
          for (int d = 0; d < Dv; ++d) o_acc(b, i, h, d) = o_blk(b, i, h, d);
          return;
        }
        const T m = l1 > l2 ? l1 : l2;
        const T l = m + kmath::log(kmath::exp(l1 - m) + kmath::exp(l2 - m));
        const T w1 = kmath::exp(l1 - l), w2 = kmath::exp(l2 - l);
        for (int d = 0; d < Dv; ++d)
          o_acc(b, i, h, d) = w1 * o_acc(b, i, h, d) + w2 * o_blk(b, i, h, d);
        lse_acc(b, h, i) = l;
      });
}

template <class T>
void accumulate(T* dst, const T* src, int64_t n) {
  if (n <= 0) return;
  Kokkos::parallel_for(
      "lcr::ring_accumulate", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(0, n),
      KOKKOS_LAMBDA(int64_t i) { dst[i] += src[i]; });
}

template <class T>
void reset_partial(const View4<T>& o, const View3<T>& lse) {
  Kokkos::deep_copy(o, T(0));
  Kokkos::deep_copy(lse, -std::numeric_limits<T>::infinity());
}

#define LCR_INSTANTIATE(T)                                                             \
  template void ring_merge<T>(const View4<T>&, const View3<T>&, const View4<const T>&, \
                              const View3<const T>&);                                  \
  template void accumulate<T>(T*, const T*, int64_t);                                  \
  template void reset_partial<T>(const View4<T>&, const View3<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
