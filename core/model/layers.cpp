#include "core/model/layers.hpp"

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/attention/kokkos/tile.hpp"

namespace lcr {

using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>;

template <class T>
void rmsnorm_forward(const CView2<T>& x, const CView1<T>& g, T eps, const View2<T>& y,
                     const View1<T>& rstd) {
  const int64_t D = x.extent(1);
  Kokkos::parallel_for(
      "lcr::rmsnorm_forward", Range(0, x.extent(0)), KOKKOS_LAMBDA(int64_t r) {
        T ss = 0;
        for (int64_t d = 0; d < D; ++d) ss += x(r, d) * x(r, d);
        const T s = T(1) / kmath::sqrt(ss / T(D) + eps);
        rstd(r) = s;
        for (int64_t d = 0; d < D; ++d) y(r, d) = x(r, d) * s * g(d);
      });
}

template <class T>
void rmsnorm_backward(const CView2<T>& x, const CView1<T>& g, const CView1<T>& rstd,
                      const CView2<T>& dy, const View2<T>& dx, const View1<T>& dg) {
  const int64_t R = x.extent(0), D = x.extent(1);
  // With n = x s (s = rstd): y = n g, dn = dy g, and ds/dx = -s^3 x / D, so
  // dx = s (dn - n mean_d(dn n)).
  Kokkos::parallel_for(
      "lcr::rmsnorm_backward_x", Range(0, R), KOKKOS_LAMBDA(int64_t r) {
        const T s = rstd(r);
        T dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += dy(r, d) * g(d) * x(r, d) * s;
        dot /= T(D);
        for (int64_t d = 0; d < D; ++d) dx(r, d) += s * (dy(r, d) * g(d) - x(r, d) * s * dot);
      });
  Kokkos::parallel_for(
      "lcr::rmsnorm_backward_g", Range(0, D), KOKKOS_LAMBDA(int64_t d) {
        T acc = 0;
        for (int64_t r = 0; r < R; ++r) acc += dy(r, d) * x(r, d) * rstd(r);
        dg(d) += acc;
      });
}

// The SwiGLU rows go in chunks of tile::kRowChunk (one work item each: no per-element
// index division, and the chunk's exps vectorise on a SIMD CPU).
template <class T>
void swiglu_forward(const CView2<T>& gate, const CView2<T>& up, const View2<T>& h) {
  constexpr int C = tile::kRowChunk;
  const int64_t F = gate.extent(1), nc = (F + C - 1) / C;
  Kokkos::parallel_for(
      "lcr::swiglu_forward", Range(0, gate.extent(0) * nc), KOKKOS_LAMBDA(int64_t t) {
        const int64_t r = t / nc, f0 = (t % nc) * C;
        const int n = F - f0 < C ? int(F - f0) : C;
        const T* z = &gate(r, f0);
        T e[C];
        tile::exp_neg_abs(z, n, e);
        for (int k = 0; k < n; ++k)
          h(r, f0 + k) = z[k] * tile::sigmoid_from(z[k], e[k]) * up(r, f0 + k);
      });
}

template <class T>
void swiglu_backward(const CView2<T>& gate, const CView2<T>& up, const CView2<T>& dh,
                     const View2<T>& dgate, const View2<T>& dup) {
  constexpr int C = tile::kRowChunk;
  const int64_t F = gate.extent(1), nc = (F + C - 1) / C;
  Kokkos::parallel_for(
      "lcr::swiglu_backward", Range(0, gate.extent(0) * nc), KOKKOS_LAMBDA(int64_t t) {
        const int64_t r = t / nc, f0 = (t % nc) * C;
        const int n = F - f0 < C ? int(F - f0) : C;
        const T* zr = &gate(r, f0);
        T e[C];
        tile::exp_neg_abs(zr, n, e);
        for (int k = 0; k < n; ++k) {
          const int64_t f = f0 + k;
          const T z = zr[k], sg = tile::sigmoid_from(z, e[k]);
          dup(r, f) = dh(r, f) * z * sg;
          // silu'(z) = s + z s (1 - s)
          dgate(r, f) = dh(r, f) * up(r, f) * sg * (T(1) + z * (T(1) - sg));
        }
      });
}

template <class T>
void embedding_forward(const View1<const int32_t>& tokens, const CView2<T>& E, const View2<T>& x) {
  const int64_t D = E.extent(1);
  Kokkos::parallel_for(
      "lcr::embedding_forward", Range(0, tokens.extent(0) * D), KOKKOS_LAMBDA(int64_t t) {
        const int64_t r = t / D, d = t % D;
        x(r, d) = E(tokens(r), d);
      });
}

template <class T>
void embedding_backward(const View1<const int32_t>& tokens, const CView2<T>& dx,
                        const View2<T>& dE) {
  const int64_t R = tokens.extent(0);
  Kokkos::parallel_for(
      "lcr::embedding_backward", Range(0, dE.extent(1)), KOKKOS_LAMBDA(int64_t d) {
        for (int64_t r = 0; r < R; ++r) dE(tokens(r), d) += dx(r, d);
      });
}

template <class T>
void add_bias(const CView1<T>& b, const View2<T>& y) {
  const int64_t N = y.extent(1);
  Kokkos::parallel_for(
      "lcr::add_bias", Range(0, y.extent(0) * N),
      KOKKOS_LAMBDA(int64_t t) { y(t / N, t % N) += b(t % N); });
}

template <class T>
void bias_backward(const CView2<T>& dy, const View1<T>& db) {
  const int64_t R = dy.extent(0);
  Kokkos::parallel_for(
      "lcr::bias_backward", Range(0, dy.extent(1)), KOKKOS_LAMBDA(int64_t n) {
        T acc = 0;
        for (int64_t r = 0; r < R; ++r) acc += dy(r, n);
        db(n) += acc;
      });
}

template <class T>
void axpy(int64_t n, T a, const T* x, T* y) {
  Kokkos::parallel_for(
      "lcr::axpy", Range(0, n), KOKKOS_LAMBDA(int64_t i) { y[i] += a * x[i]; });
}

template <class T>
void copy_values(int64_t n, const T* x, T* y) {
  Kokkos::parallel_for(
      "lcr::copy_values", Range(0, n), KOKKOS_LAMBDA(int64_t i) { y[i] = x[i]; });
}

#define LCR_INSTANTIATE(T)                                                                 \
  template void rmsnorm_forward<T>(const CView2<T>&, const CView1<T>&, T, const View2<T>&, \
                                   const View1<T>&);                                       \
  template void rmsnorm_backward<T>(const CView2<T>&, const CView1<T>&, const CView1<T>&,  \
                                    const CView2<T>&, const View2<T>&, const View1<T>&);   \
  template void swiglu_forward<T>(const CView2<T>&, const CView2<T>&, const View2<T>&);    \
  template void swiglu_backward<T>(const CView2<T>&, const CView2<T>&, const CView2<T>&,   \
                                   const View2<T>&, const View2<T>&);                      \
  template void embedding_forward<T>(const View1<const int32_t>&, const CView2<T>&,        \
                                     const View2<T>&);                                     \
  template void embedding_backward<T>(const View1<const int32_t>&, const CView2<T>&,       \
                                      const View2<T>&);                                    \
  template void add_bias<T>(const CView1<T>&, const View2<T>&);                            \
  template void bias_backward<T>(const CView2<T>&, const View1<T>&);                       \
  template void axpy<T>(int64_t, T, const T*, T*);                                         \
  template void copy_values<T>(int64_t, const T*, T*);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
