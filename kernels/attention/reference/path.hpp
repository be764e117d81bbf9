#pragma once
// The float64 reference of PaTH, PaTH-FoX and their layer parameterisation: DEFINITIONS,
// computed the simple way (tests only), templated on the scalar so they also run on
// ref::Dual for exact directional derivatives. Nothing here uses the UT transform or
// blocks: transitions are applied one Householder factor at a time.
//
//   logit_ij = k_j^T H_{j+1} ... H_i q_i / sqrt(d) [+ c_i - c_j],  H_t = I - beta_t w_t w_t^T
// computed for each query i by carrying x = H_{j+1} ... H_i q_i leftwards as j decreases
// (x <- H_j x after scoring key j): the definition, at O(L^2 d) instead of the
// O(L^2 d^2)+ of forming every product; path_logit_explicit forms the d x d matrices
// and tests check the two agree.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/reference/reference.hpp"
#include "kernels/schemes/path/params.hpp"

namespace lcr::ref {

template <class T>
struct PathRefInputs {
  View4<T, HostSpace> q, k, v;         // [B, L, H, d], [B, L, Hkv, d], [B, L, Hkv, dv]
  View4<T, HostSpace> w;               // [B, L, Hkv, d]
  View3<T, HostSpace> beta;            // [B, L, Hkv]
  View3<T, HostSpace> fox_cq, fox_ck;  // [B, L, H] (PaTH-FoX)
  ParamSet<T, HostSpace> params;       // sink, QK-norm gains
};

// x <- H_t x = x - beta_t w_t (w_t . x) for position t of KV head hk.
template <class T>
void apply_householder(const View4<T, HostSpace>& w, const View3<T, HostSpace>& beta, int b, int t,
                       int hk, std::vector<T>& x) {
  const int d = w.extent(3);
  T dot = T(0);
  for (int c = 0; c < d; ++c) dot += w(b, t, hk, c) * x[c];
  const T f = beta(b, t, hk) * dot;
  for (int c = 0; c < d; ++c) x[c] -= f * w(b, t, hk, c);
}

// The explicit d x d matrix H_first H_first+1 ... H_last (identity when first > last),
// row-major, by multiplying the matrices H_t = I - beta_t w_t w_t^T left to right.
template <class T>
std::vector<T> transition_matrix(const View4<T, HostSpace>& w, const View3<T, HostSpace>& beta,
                                 int b, int hk, int first, int last) {
  const int d = w.extent(3);
  std::vector<T> P(size_t(d) * d, T(0)), Ht(size_t(d) * d), R(size_t(d) * d);
  for (int r = 0; r < d; ++r) P[r * d + r] = T(1);
  for (int t = first; t <= last; ++t) {
    for (int r = 0; r < d; ++r)
      for (int c = 0; c < d; ++c)
        Ht[r * d + c] = (r == c ? T(1) : T(0)) - beta(b, t, hk) * w(b, t, hk, r) * w(b, t, hk, c);
    for (int r = 0; r < d; ++r)
      for (int c = 0; c < d; ++c) {
        T s = T(0);
        for (int l = 0; l < d; ++l) s += P[r * d + l] * Ht[l * d + c];
        R[r * d + c] = s;
      }
    P.swap(R);
  }
  return P;
}

// k_j^T (H_{j+1} ... H_i) q_i with the product formed as a matrix (unscaled, no FoX).
template <class T>
T path_logit_explicit(const PathRefInputs<T>& in, int b, int h, int hk, int i, int j) {
  const int d = in.q.extent(3);
  const std::vector<T> P = transition_matrix(in.w, in.beta, b, hk, j + 1, i);
  T s = T(0);
  for (int r = 0; r < d; ++r)
    for (int c = 0; c < d; ++c) s += in.k(b, j, hk, r) * P[r * d + c] * in.q(b, i, h, c);
  return s;
}

// k~_j = H_last H_last-1 ... H_{j+1} k_j (H_{j+1} applied first): key j folded to `last`.
template <class T>
std::vector<T> fold_key_right(const PathRefInputs<T>& in, int b, int hk, int j, int last) {
  const int d = in.k.extent(3);
  std::vector<T> x(&in.k(b, j, hk, 0), &in.k(b, j, hk, 0) + d);
  for (int t = j + 1; t <= last; ++t) apply_householder(in.w, in.beta, b, t, hk, x);
  return x;
}

// q~_i = H_first H_first+1 ... H_i q_i (H_i applied first): query i folded to `first`.
template <class T>
std::vector<T> fold_query_left(const PathRefInputs<T>& in, int b, int h, int hk, int i, int first) {
  const int d = in.q.extent(3);
  std::vector<T> x(&in.q(b, i, h, 0), &in.q(b, i, h, 0) + d);
  for (int t = i; t >= first; --t) apply_householder(in.w, in.beta, b, t, hk, x);
  return x;
}

// PaTH / PaTH-FoX attention by definition: causal softmax over the logits above (after
// QK-RMSNorm of q and k when enabled, softcap on the final logit, sink in the
// denominator), o and lse.
template <class T>
RefOutputs<T> path_reference_forward(const AttentionSpec& spec, const PathRefInputs<T>& in) {
  const int B = in.q.extent(0), L = in.q.extent(1), H = spec.heads;
  const int d = in.q.extent(3), dv = in.v.extent(3), G = spec.group();
  const bool fox = uses_fox(spec.scheme), norm = spec.numerics.qk_norm;
  const double cap = spec.numerics.softcap;
  const T scale = T(1.0 / std::sqrt(double(spec.head_dim)));
  RefOutputs<T> out{View4<T, HostSpace>("ref_o", B, L, H, dv),
                    View3<T, HostSpace>("ref_lse", B, H, L)};
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int hk = h / G;
      std::vector<std::vector<T>> keys(L);
      for (int j = 0; j < L; ++j) {
        const T* kr = &in.k(b, j, hk, 0);
        keys[j] = norm
                      ? rms_normed(kr, d, in.params.v1("qk_norm.k_gain"), spec.numerics.qk_norm_eps)
                      : std::vector<T>(kr, kr + d);
      }
      for (int i = 0; i < L; ++i) {
        const T* qr = &in.q(b, i, h, 0);
        std::vector<T> x =
            norm ? rms_normed(qr, d, in.params.v1("qk_norm.q_gain"), spec.numerics.qk_norm_eps)
                 : std::vector<T>(qr, qr + d);
        std::vector<T> s(i + 1);
        for (int j = i; j >= 0; --j) {  // x = H_{j+1} ... H_i q_i here
          T dot = T(0);
          for (int c = 0; c < d; ++c) dot += keys[j][c] * x[c];
          T logit = scale * dot;
          if (fox) logit += in.fox_cq(b, i, h) - in.fox_ck(b, j, h);
          if (cap > 0) logit = T(cap) * tanh(logit / T(cap));
          s[j] = logit;
          apply_householder(in.w, in.beta, b, j, hk, x);
        }
        double mx = -std::numeric_limits<double>::infinity();
        for (const T& v : s) mx = std::max(mx, value(v));
        if (spec.numerics.has_sink()) mx = std::max(mx, value(in.params.v1("sink")(h)));
        T z = T(0);
        for (const T& v : s) z += exp(v - T(mx));
        if (spec.numerics.has_sink()) z += exp(in.params.v1("sink")(h) - T(mx));
        const T lse = T(mx) + log(z);
        out.lse(b, h, i) = lse;
        for (T& v : s) v = exp(v - lse);  // the probabilities, once per row
        for (int c = 0; c < dv; ++c) {
          T acc = T(0);
          for (int j = 0; j <= i; ++j) acc += s[j] * in.v(b, j, hk, c);
          out.o(b, i, h, c) = acc;
        }
      }
    }
  return out;
}

// ---- layer parameterisation (kernels/schemes/path/params.hpp, kernels/schemes/fox) ----

// beta = min(2 sigmoid(x), kBetaMax).
template <class T>
T path_beta(T x) {
  const T v = T(2) * sigmoid(x);
  return value(v) < path::kBetaMax ? v : T(path::kBetaMax);
}

// w_t = y_t / |y_t|, y_t[c] = sum_k weight[h, c, k] u_{t-2+k}[c] (u before the span from
// prefix [B, 2, Hkv, d], zero when prefix is empty), optional SiLU on y.
template <class T>
View4<T, HostSpace> path_w(const View4<T, HostSpace>& u, const View3<T, HostSpace>& weight,
                           const View4<T, HostSpace>& prefix, bool use_silu) {
  const int B = u.extent(0), L = u.extent(1), Hkv = u.extent(2), d = u.extent(3);
  View4<T, HostSpace> w("ref_w", B, L, Hkv, d);
  auto at = [&](int b, int t, int h, int c) {
    if (t >= 0) return u(b, t, h, c);
    return prefix.extent(0) > 0 ? prefix(b, t + 2, h, c) : T(0);
  };
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < L; ++t)
      for (int h = 0; h < Hkv; ++h) {
        T ss = T(0);
        for (int c = 0; c < d; ++c) {
          T y = T(0);
          for (int k = 0; k < 3; ++k) y += weight(h, c, k) * at(b, t - 2 + k, h, c);
          if (use_silu) y = silu(y);
          w(b, t, h, c) = y;
          ss += y * y;
        }
        const T r = sqrt(ss);
        for (int c = 0; c < d; ++c) w(b, t, h, c) = w(b, t, h, c) / r;
      }
  return w;
}

// FoX: c_t = offset + sum_{s <= t} log sigmoid(x_s), x [B, L, H], offset [B, H] or empty.
template <class T>
View3<T, HostSpace> fox_cumulative(const View3<T, HostSpace>& x,
                                   const View2<T, HostSpace>& offset) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2);
  View3<T, HostSpace> c("ref_fox_c", B, L, H);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      T acc = offset.extent(0) > 0 ? offset(b, h) : T(0);
      for (int t = 0; t < L; ++t) {
        acc += -softplus(-x(b, t, h));  // log sigmoid
        c(b, t, h) = acc;
      }
    }
  return c;
}

// The FoX bias by its definition: sum_{s=j+1..i} log f_s, f = sigmoid(x).
template <class T>
T fox_explicit_bias(const View3<T, HostSpace>& x, int b, int h, int i, int j) {
  T s = T(0);
  for (int t = j + 1; t <= i; ++t) s += log(sigmoid(x(b, t, h)));
  return s;
}

}  // namespace lcr::ref
