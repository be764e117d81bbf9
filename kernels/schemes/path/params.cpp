#include "kernels/schemes/path/params.hpp"

#include <cmath>

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/attention/kokkos/tile.hpp"
#include "kernels/base/error.hpp"

namespace lcr::path {
// Helpers sit in a named namespace, not an anonymous one: nvcc's rules for extended
// (device) lambdas are simplest to meet in functions with external linkage.
namespace params_detail {

using Range3 = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>;

void check_conv_shapes(int64_t B, int64_t L, int64_t Hkv, int64_t d,
                       const std::vector<int64_t>& weight, const std::vector<int64_t>& prefix) {
  require(weight == std::vector<int64_t>{Hkv, d, 3}, "path w conv weight has shape ",
          shape_string(weight), ", expected ", shape_string({Hkv, d, 3}),
          " (per KV head and channel, 3 taps)");
  require(prefix.empty() || prefix[0] == 0 || prefix == std::vector<int64_t>{B, 2, Hkv, d},
          "path w conv prefix has shape ", shape_string(prefix), ", expected ",
          shape_string({B, 2, Hkv, d}), " (u at the two positions before the span) or empty");
  (void)L;
}

// u at time t (t may be -1 or -2: then the prefix, or zero).
template <class T>
struct Taps {
  View4<const T> u, prefix;
  bool has_prefix;
  KOKKOS_INLINE_FUNCTION T operator()(int b, int t, int h, int c) const {
    if (t >= 0) return u(b, t, h, c);
    return has_prefix ? prefix(b, t + 2, h, c) : T(0);
  }
};

// Pre-activation z_t = sum_k weight[h, c, k] u_{t-2+k}.
template <class T>
KOKKOS_INLINE_FUNCTION T conv_at(const Taps<T>& x, const View3<const T>& wt, int b, int t, int h,
                                 int c) {
  return wt(h, c, 0) * x(b, t - 2, h, c) + wt(h, c, 1) * x(b, t - 1, h, c) +
         wt(h, c, 2) * x(b, t, h, c);
}

}  // namespace params_detail

using namespace params_detail;

template <class T>
void beta_forward(const View3<const T>& x, const View3<T>& beta) {
  require(shape_of(beta) == shape_of(x), "beta has shape ", shape_string(shape_of(beta)),
          ", expected the shape of its logits ", shape_string(shape_of(x)));
  const T cap = T(kBetaMax);
  Kokkos::parallel_for(
      "lcr::path_beta",
      Range3({0, 0, 0}, {int64_t(x.extent(0)), int64_t(x.extent(1)), int64_t(x.extent(2))}),
      KOKKOS_LAMBDA(int b, int t, int h) {
        const T v = T(2) * kmath::sigmoid(x(b, t, h));
        beta(b, t, h) = v < cap ? v : cap;
      });
}

template <class T>
void beta_backward(const View3<const T>& x, const View3<const T>& dbeta, const View3<T>& dx) {
  const T cap = T(kBetaMax);
  Kokkos::parallel_for(
      "lcr::path_beta_backward",
      Range3({0, 0, 0}, {int64_t(x.extent(0)), int64_t(x.extent(1)), int64_t(x.extent(2))}),
      KOKKOS_LAMBDA(int b, int t, int h) {
        const T s = kmath::sigmoid(x(b, t, h));
        dx(b, t, h) = T(2) * s < cap ? dbeta(b, t, h) * T(2) * s * (T(1) - s) : T(0);
      });
}

template <class T>
void w_forward(const WConv& opt, const View4<const T>& u, const View3<const T>& weight,
               const View4<const T>& prefix, const View4<T>& w) {
  const int B = u.extent(0), L = u.extent(1), Hkv = u.extent(2), d = u.extent(3);
  check_conv_shapes(B, L, Hkv, d, shape_of(weight), shape_of(prefix));
  require(shape_of(w) == shape_of(u), "path_w has shape ", shape_string(shape_of(w)),
          ", expected the shape of u ", shape_string(shape_of(u)));
  const Taps<T> x{u, prefix, prefix.extent(0) > 0};
  const bool silu = opt.silu;
  View3<T> norm("lcr::path_w_norm", B, L, Hkv);
  Kokkos::parallel_for(
      "lcr::path_w", Range3({0, 0, 0}, {B, L, Hkv}), KOKKOS_LAMBDA(int b, int t, int h) {
        // The row's pre-activations first (in w), then y = SiLU(z) in chunks whose exps
        // vectorise on a SIMD CPU.
        T* wr = &w(b, t, h, 0);
        for (int c = 0; c < d; ++c) wr[c] = conv_at(x, weight, b, t, h, c);
        T ss = T(0);
        for (int c0 = 0; c0 < d; c0 += tile::kRowChunk) {
          const int n = d - c0 < tile::kRowChunk ? d - c0 : tile::kRowChunk;
          T e[tile::kRowChunk];
          if (silu) tile::exp_neg_abs(wr + c0, n, e);
          for (int k = 0; k < n; ++k) {
            const T z = wr[c0 + k], y = silu ? z * tile::sigmoid_from(z, e[k]) : z;
            wr[c0 + k] = y;
            ss += y * y;
          }
        }
        const T r = kmath::sqrt(ss);
        norm(b, t, h) = r;
        if (r > T(kMinWNorm))
          for (int c = 0; c < d; ++c) w(b, t, h, c) /= r;
      });
  int64_t first = int64_t(B) * L * Hkv;
  Kokkos::parallel_reduce(
      "lcr::path_w_check", Kokkos::RangePolicy<ExecSpace>(0, first),
      KOKKOS_LAMBDA(int64_t i, int64_t & m) {
        const T r = norm.data()[i];
        if (!(r > T(kMinWNorm) && r - r == T(0)) && i < m) m = i;
      },
      Kokkos::Min<int64_t>(first));
  if (first < int64_t(B) * L * Hkv) {
    T r;
    Kokkos::deep_copy(r, Kokkos::subview(norm, first / (L * Hkv), first / Hkv % L, first % Hkv));
    throw_error("path w: the convolution output at [", first / (L * Hkv), ", ", first / Hkv % L,
                ", ", first % Hkv, "] has norm ", r,
                " (zero, tiny or not finite), so w = y / |y| has no direction; check the w "
                "projection and conv weights (a zero initialisation gives this)");
  }
}

template <class T>
void w_backward(const WConv& opt, const View4<const T>& u, const View3<const T>& weight,
                const View4<const T>& prefix, const View4<const T>& dw, const View4<T>& du,
                const View3<T>& dweight, const View4<T>& dprefix) {
  const int B = u.extent(0), L = u.extent(1), Hkv = u.extent(2), d = u.extent(3);
  check_conv_shapes(B, L, Hkv, d, shape_of(weight), shape_of(prefix));
  const Taps<T> x{u, prefix, prefix.extent(0) > 0};
  const bool silu = opt.silu;
  // dz_t: through w = y / |y| (dy = (dw - w <w, dw>) / |y|) and the optional SiLU.
  View4<T> dz(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::path_w_dz"), B, L, Hkv, d);
  Kokkos::parallel_for(
      "lcr::path_w_backward", Range3({0, 0, 0}, {B, L, Hkv}), KOKKOS_LAMBDA(int b, int t, int h) {
        // z once (kept in dz until overwritten by the gradient); y = SiLU(z) and its
        // derivative from one exp each, in chunks that vectorise on a SIMD CPU.
        T* zr = &dz(b, t, h, 0);
        for (int c = 0; c < d; ++c) zr[c] = conv_at(x, weight, b, t, h, c);
        T ss = T(0), ydw = T(0);
        for (int c0 = 0; c0 < d; c0 += tile::kRowChunk) {
          const int n = d - c0 < tile::kRowChunk ? d - c0 : tile::kRowChunk;
          T e[tile::kRowChunk];
          if (silu) tile::exp_neg_abs(zr + c0, n, e);
          for (int k = 0; k < n; ++k) {
            const T z = zr[c0 + k], y = silu ? z * tile::sigmoid_from(z, e[k]) : z;
            ss += y * y;
            ydw += y * dw(b, t, h, c0 + k);
          }
        }
        const T r = kmath::sqrt(ss), wdw = ydw / r;
        for (int c0 = 0; c0 < d; c0 += tile::kRowChunk) {
          const int n = d - c0 < tile::kRowChunk ? d - c0 : tile::kRowChunk;
          T e[tile::kRowChunk];
          if (silu) tile::exp_neg_abs(zr + c0, n, e);
          for (int k = 0; k < n; ++k) {
            const T z = zr[c0 + k];
            const T sg = silu ? tile::sigmoid_from(z, e[k]) : T(1), y = silu ? z * sg : z;
            T g = (dw(b, t, h, c0 + k) - y / r * wdw) / r;
            if (silu) g *= sg * (T(1) + z * (T(1) - sg));
            zr[c0 + k] = g;
          }
        }
      });
  // du_t = sum_k weight[k] dz_{t+2-k}; the prefix rows are t = -2, -1.
  const bool has_dprefix = dprefix.extent(0) > 0;
  Kokkos::parallel_for(
      "lcr::path_w_backward_u", Range3({0, 0, 0}, {B, L + 2, Hkv}),
      KOKKOS_LAMBDA(int b, int t2, int h) {
        const int t = t2 - 2;
        if (t < 0 && !has_dprefix) return;
        for (int c = 0; c < d; ++c) {
          T g = T(0);
          for (int k = 0; k < 3; ++k) {
            const int tt = t + 2 - k;
            if (tt >= 0 && tt < L) g += weight(h, c, k) * dz(b, tt, h, c);
          }
          if (t >= 0)
            du(b, t, h, c) = g;
          else
            dprefix(b, t + 2, h, c) = g;
        }
      });
  // dweight[h, c, k] += sum_{b,t} dz_t u_{t-2+k}
  Kokkos::parallel_for(
      "lcr::path_w_backward_weight",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {Hkv, d}),
      KOKKOS_LAMBDA(int h, int c) {
        T g0 = T(0), g1 = T(0), g2 = T(0);
        for (int b = 0; b < B; ++b)
          for (int t = 0; t < L; ++t) {
            const T g = dz(b, t, h, c);
            g0 += g * x(b, t - 2, h, c);
            g1 += g * x(b, t - 1, h, c);
            g2 += g * x(b, t, h, c);
          }
        dweight(h, c, 0) += g0;
        dweight(h, c, 1) += g1;
        dweight(h, c, 2) += g2;
      });
}

#define LCR_INSTANTIATE(T)                                                                       \
  template void beta_forward<T>(const View3<const T>&, const View3<T>&);                         \
  template void beta_backward<T>(const View3<const T>&, const View3<const T>&, const View3<T>&); \
  template void w_forward<T>(const WConv&, const View4<const T>&, const View3<const T>&,         \
                             const View4<const T>&, const View4<T>&);                            \
  template void w_backward<T>(const WConv&, const View4<const T>&, const View3<const T>&,        \
                              const View4<const T>&, const View4<const T>&, const View4<T>&,     \
                              const View3<T>&, const View4<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr::path
