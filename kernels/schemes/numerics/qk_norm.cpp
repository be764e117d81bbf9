#include "kernels/schemes/numerics/qk_norm.hpp"

#include "kernels/attention/kokkos/math.hpp"

namespace lcr {

template <class T>
void rms_norm_heads_forward(const View4<const T>& x, const View1<const T>& gain, T eps,
                            const View4<T>& y) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2), d = x.extent(3);
  Kokkos::parallel_for(
      "lcr::rms_norm_heads_forward",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, L, H}),
      KOKKOS_LAMBDA(int b, int i, int h) {
        T ss = T(0);
        for (int c = 0; c < d; ++c) ss += x(b, i, h, c) * x(b, i, h, c);
        const T inv = T(1) / kmath::sqrt(ss / T(d) + eps);
        for (int c = 0; c < d; ++c) y(b, i, h, c) = x(b, i, h, c) * inv * gain(c);
      });
}

template <class T>
void rms_norm_heads_backward(const View4<const T>& x, const View1<const T>& gain, T eps,
                             const View4<const T>& dy, const View4<T>& dx, const View1<T>& dgain) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2), d = x.extent(3);
  View3<T> inv_rms("lcr::inv_rms", B, L, H);
  // dx = gain dy / r - x <gain dy, x> / (d r^3),  r = sqrt(mean(x^2) + eps)
  Kokkos::parallel_for(
      "lcr::rms_norm_heads_backward_x",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, L, H}),
      KOKKOS_LAMBDA(int b, int i, int h) {
        T ss = T(0), gdx = T(0);
        for (int c = 0; c < d; ++c) {
          ss += x(b, i, h, c) * x(b, i, h, c);
          gdx += gain(c) * dy(b, i, h, c) * x(b, i, h, c);
        }
        const T inv = T(1) / kmath::sqrt(ss / T(d) + eps);
        inv_rms(b, i, h) = inv;
        const T k3 = gdx * inv * inv * inv / T(d);
        for (int c = 0; c < d; ++c)
          dx(b, i, h, c) = gain(c) * dy(b, i, h, c) * inv - x(b, i, h, c) * k3;
      });
  // dgain[c] += sum over rows of dy x / r; one thread per channel keeps it deterministic.
  Kokkos::parallel_for(
      "lcr::rms_norm_heads_backward_gain", Kokkos::RangePolicy<ExecSpace>(0, d),
      KOKKOS_LAMBDA(int c) {
        T g = T(0);
        for (int b = 0; b < B; ++b)
          for (int i = 0; i < L; ++i)
            for (int h = 0; h < H; ++h) g += dy(b, i, h, c) * x(b, i, h, c) * inv_rms(b, i, h);
        dgain(c) += g;
      });
}

template void rms_norm_heads_forward<float>(const View4<const float>&, const View1<const float>&,
                                            float, const View4<float>&);
template void rms_norm_heads_forward<double>(const View4<const double>&, const View1<const double>&,
                                             double, const View4<double>&);
template void rms_norm_heads_backward<float>(const View4<const float>&, const View1<const float>&,
                                             float, const View4<const float>&, const View4<float>&,
                                             const View1<float>&);
template void rms_norm_heads_backward<double>(const View4<const double>&,
                                              const View1<const double>&, double,
                                              const View4<const double>&, const View4<double>&,
                                              const View1<double>&);

}  // namespace lcr
