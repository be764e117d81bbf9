#include "core/model/runner.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace lcr {

template <class T>
void local_segment_carry(const std::vector<RowSegment>& segs, const View3<const T>& totals,
                         const View3<T>& carry, bool reverse) {
  const int64_t B = totals.extent(0), S = totals.extent(1), H = totals.extent(2);
  require(S == int64_t(segs.size()) && shape_of(carry) == shape_of(totals),
          "segment_carry: totals ", shape_string(shape_of(totals)), " and carry ",
          shape_string(shape_of(carry)), " must be [B, ", segs.size(), ", H]");
  // Segment order along the sequence (reverse: from the end), as a device array.
  std::vector<int> order(static_cast<size_t>(S));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return segs[size_t(a)].pos0 < segs[size_t(b)].pos0; });
  if (reverse) std::reverse(order.begin(), order.end());
  View1<int> d_order("lcr::segment_order", size_t(S));
  auto h_order = Kokkos::create_mirror_view(d_order);
  for (int64_t s = 0; s < S; ++s) h_order(s) = order[size_t(s)];
  Kokkos::deep_copy(d_order, h_order);
  Kokkos::parallel_for(
      "lcr::local_segment_carry", Kokkos::RangePolicy<ExecSpace>(0, B * H),
      KOKKOS_LAMBDA(int64_t t) {
        const int64_t b = t / H, h = t % H;
        T acc = 0;
        for (int64_t s = 0; s < S; ++s) {
          const int seg = d_order(s);
          carry(b, seg, h) = acc;
          acc += totals(b, seg, h);
        }
      });
}

template <class T>
void LocalAttention<T>::segment_carry(const std::vector<RowSegment>& segs,
                                      const View3<const T>& totals, const View3<T>& carry,
                                      bool reverse) {
  local_segment_carry<T>(segs, totals, carry, reverse);
}

template class LocalAttention<float>;
template class LocalAttention<double>;
template void local_segment_carry<float>(const std::vector<RowSegment>&, const View3<const float>&,
                                         const View3<float>&, bool);
template void local_segment_carry<double>(const std::vector<RowSegment>&,
                                          const View3<const double>&, const View3<double>&, bool);

}  // namespace lcr
