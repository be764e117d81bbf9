#pragma once
// The float64 reference: computes each scheme's DEFINITION the simple way, materialising
// every logit (tests only; O(L^2) memory). Templated on the scalar so it also runs on
// ref::Dual for exact directional derivatives. Nothing here calls the kernels' lane code:
// GOAT is the explicit alpha cos + beta sin + u(j) bias, PoPE the explicit sum of
// mu_q mu_k cos(...), RoPE the explicit pairwise rotation.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/params.hpp"
#include "kernels/attention/reference/dual.hpp"
#include "kernels/attention/reference/goat.hpp"
#include "kernels/attention/reference/pope.hpp"
#include "kernels/attention/reference/rope.hpp"
#include "kernels/attention/spec.hpp"
#include "kernels/base/error.hpp"
#include "kernels/base/tensor.hpp"

namespace lcr::ref {

template <class T>
struct RefInputs {
  View4<T, HostSpace> q, k, v;  // shapes as AttentionInputs
  int64_t q_pos0 = 0, k_pos0 = 0;
  View3<T, HostSpace> fox_cq, fox_ck;  // FoX: [B, Lq, H], [B, Lk, H]
  ParamSet<T, HostSpace> params;
};

template <class T>
struct RefOutputs {
  View4<T, HostSpace> o;    // [B, Lq, H, dv]
  View3<T, HostSpace> lse;  // [B, H, Lq]
};

// QK-RMSNorm of one row, by definition.
template <class T>
std::vector<T> rms_normed(const T* x, int d, const PView1<T, HostSpace>& gain, double eps) {
  T ss = T(0);
  for (int c = 0; c < d; ++c) ss += x[c] * x[c];
  const T r = sqrt(ss / T(d) + T(eps));
  std::vector<T> y(d);
  for (int c = 0; c < d; ++c) y[c] = x[c] / r * gain(c);
  return y;
}

// Pre-softcap logit of (query row i of head h, key row j) for every scheme.
template <class T>
T reference_logit(const AttentionSpec& spec, const RefInputs<T>& in, const T* q, const T* k, int b,
                  int h, int i, int j) {
  const int hk = h / spec.group();
  const int64_t pi = in.q_pos0 + i, pj = in.k_pos0 + j;
  const int d = input_qk_dim(spec);
  auto dot_scaled = [&] {
    T s = T(0);
    for (int c = 0; c < d; ++c) s += q[c] * k[c];
    return s / T(std::sqrt(double(spec.head_dim)));
  };
  switch (spec.scheme) {
    case Scheme::NoPE:
      return dot_scaled();
    case Scheme::ALiBi:
      return dot_scaled() - T(alibi_slope(h, spec.heads, spec.alibi.slopes) * double(pi - pj));
    case Scheme::FoX:
      return dot_scaled() + in.fox_cq(b, i, h) - in.fox_ck(b, j, h);
    case Scheme::RoPE:
      return rope_reference_logit(spec, q, k, pi, pj);
    case Scheme::GOAT:
    case Scheme::GOAT2D:
      return goat_reference_logit(spec, in.params, q, k, h, hk, pi, pj);
    case Scheme::PoPE:
      return pope_reference_logit(spec, in.params, q, k, hk, pi, pj);
    default:
      throw_error("reference_logit: scheme '", scheme_name(spec.scheme),
                  "' has no dot-product "
                  "reference (PaTH has its own)");
  }
}

template <class T>
RefOutputs<T> reference_forward(const AttentionSpec& spec, const RefInputs<T>& in) {
  const int B = in.q.extent(0), Lq = in.q.extent(1), H = spec.heads, Lk = in.k.extent(1);
  const int d = in.q.extent(3), dv = in.v.extent(3), G = spec.group();
  RefOutputs<T> out{View4<T, HostSpace>("ref_o", B, Lq, H, dv),
                    View3<T, HostSpace>("ref_lse", B, H, Lq)};
  const bool norm = spec.numerics.qk_norm;
  const double cap = spec.numerics.softcap;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int hk = h / G;
      std::vector<std::vector<T>> keys(Lk);
      for (int j = 0; j < Lk; ++j) {
        const T* kr = &in.k(b, j, hk, 0);
        keys[j] = norm
                      ? rms_normed(kr, d, in.params.v1("qk_norm.k_gain"), spec.numerics.qk_norm_eps)
                      : std::vector<T>(kr, kr + d);
      }
      for (int i = 0; i < Lq; ++i) {
        const T* qr = &in.q(b, i, h, 0);
        const std::vector<T> qv =
            norm ? rms_normed(qr, d, in.params.v1("qk_norm.q_gain"), spec.numerics.qk_norm_eps)
                 : std::vector<T>(qr, qr + d);
        std::vector<T> s;
        std::vector<int> idx;
        for (int j = 0; j < Lk; ++j) {
          if (in.k_pos0 + j > in.q_pos0 + i) continue;  // causal on GLOBAL positions
          T x = reference_logit(spec, in, qv.data(), keys[j].data(), b, h, i, j);
          if (cap > 0) x = T(cap) * tanh(x / T(cap));
          s.push_back(x);
          idx.push_back(j);
        }
        double mx = -std::numeric_limits<double>::infinity();
        for (const T& x : s) mx = std::max(mx, value(x));
        if (spec.numerics.has_sink()) mx = std::max(mx, value(in.params.v1("sink")(h)));
        if (s.empty() && !spec.numerics.has_sink()) {
          out.lse(b, h, i) = T(-std::numeric_limits<double>::infinity());
          for (int c = 0; c < dv; ++c) out.o(b, i, h, c) = T(0);
          continue;
        }
        T z = T(0);
        for (const T& x : s) z += exp(x - T(mx));
        if (spec.numerics.has_sink()) z += exp(in.params.v1("sink")(h) - T(mx));
        const T lse = T(mx) + log(z);
        out.lse(b, h, i) = lse;
        // The probabilities once per row, not once per output column: the same values and
        // the same summation order, dv times fewer exp calls.
        for (T& x : s) x = exp(x - lse);
        for (int c = 0; c < dv; ++c) {
          T acc = T(0);
          for (size_t n = 0; n < s.size(); ++n) acc += s[n] * in.v(b, idx[n], hk, c);
          out.o(b, i, h, c) = acc;
        }
      }
    }
  return out;
}

}  // namespace lcr::ref
