#include "kernels/schemes/fox/fox.hpp"

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/base/error.hpp"

namespace lcr::fox {
// Helpers sit in a named namespace, not an anonymous one: nvcc's rules for extended
// (device) lambdas are simplest to meet in functions with external linkage.
namespace detail {

using Range2 = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>;

// log sigmoid(x) = -softplus(-x), finite for every finite x.
template <class T>
KOKKOS_INLINE_FUNCTION double log_sigmoid(T x) {
  return -kmath::softplus(-double(x));
}

}  // namespace detail

using namespace detail;

template <class T>
void cumulative_log_gates(const View3<const T>& x, const View2<const T>& offset,
                          const View3<T>& c) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2);
  require(shape_of(c) == shape_of(x), "fox c has shape ", shape_string(shape_of(c)),
          ", expected the shape of the gate logits ", shape_string(shape_of(x)));
  const bool has_offset = offset.extent(0) > 0;
  require(!has_offset || shape_of(offset) == std::vector<int64_t>{B, H}, "fox offset has shape ",
          shape_string(shape_of(offset)), ", expected ", shape_string({B, H}), " or empty");
  Kokkos::parallel_for(
      "lcr::fox_cumulative", Range2({0, 0}, {B, H}), KOKKOS_LAMBDA(int b, int h) {
        double acc = has_offset ? double(offset(b, h)) : 0.0;
        for (int t = 0; t < L; ++t) {
          acc += log_sigmoid(x(b, t, h));
          c(b, t, h) = T(acc);
        }
      });
}

template <class T>
void cumulative_log_gates_backward(const View3<const T>& x, const View3<const T>& dc,
                                   const View3<T>& dx, const View2<T>& doffset) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2);
  require(shape_of(dc) == shape_of(x) && shape_of(dx) == shape_of(x),
          "fox gate gradients must have the shape of the gate logits ", shape_string(shape_of(x)));
  const bool has_offset = doffset.extent(0) > 0;
  Kokkos::parallel_for(
      "lcr::fox_cumulative_backward", Range2({0, 0}, {B, H}), KOKKOS_LAMBDA(int b, int h) {
        double acc = 0.0;
        for (int t = L - 1; t >= 0; --t) {
          acc += double(dc(b, t, h));
          dx(b, t, h) = T(acc * kmath::sigmoid(-double(x(b, t, h))));
        }
        if (has_offset) doffset(b, h) = T(acc);
      });
}

#define LCR_INSTANTIATE(T)                                                                     \
  template void cumulative_log_gates<T>(const View3<const T>&, const View2<const T>&,          \
                                        const View3<T>&);                                      \
  template void cumulative_log_gates_backward<T>(const View3<const T>&, const View3<const T>&, \
                                                 const View3<T>&, const View2<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr::fox
