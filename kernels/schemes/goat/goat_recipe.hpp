#pragma once
// GOAT's authors' recipe (goat.recipe = "authors") as a map onto the parameters lcr's lanes
// read, so the Kokkos lanes, the CUDA lanes and the ring run it unchanged.
//
// The authors' released package parameterises the same logit (goat.hpp) as
//   alpha_hr = A[h / G, r], beta_hr = Bt[h / G, r]      (per KV head; G = H / Hkv)
//   u_hk(j)  = gain_hk m(phi(j)) + bump_hk 1{j = 0} + softplus(s_hk) j
//   m(x)     = w2 . silu(W1 x + b1)                      (ONE MLP for every head)
// so lcr's lane parameters follow from theirs:
//   lambda_hk = softplus(s_hk),  W1_hk = W1,  b1_hk = b1,  w2_hk = gain_hk w2.
// Their MLP also has an output bias; a constant added to every key's u cancels in the
// softmax, so it is left out (as in lcr's recipe).
//
// Buffers: the authors' slices goat.kv_alpha [Hkv, R], goat.kv_beta [Hkv, R], goat.slope
// [Hkv], goat.gain [Hkv], goat.bump [Hkv], goat.shared_w1 [N, NF], goat.shared_b1 [N],
// goat.shared_w2 [N]; the lane slices goat.alpha [H, R], goat.beta [H, R], goat.lambda
// [Hkv], goat.bump [Hkv], goat.mlp_w1 [Hkv, N, NF], goat.mlp_b1 [Hkv, N], goat.mlp_w2
// [Hkv, N]. Both layouts put these slices first; what follows them (the query gate's, the
// sink's, QK-norm's) is the same `tail` in both and is copied / added one to one.
//
// Every element of either direction is a gather over at most max(G, N, Hkv) inputs in a
// fixed order: no atomics, the same bits on every backend. Written for raw pointers so
// Kokkos kernels, CUDA kernels and host code call the same functions.
#include <cmath>
#include <cstdint>

#include "kernels/attention/spec.hpp"

namespace lcr::goat {

struct RecipeMap {
  int H = 0, Hkv = 0, R = 0, N = 0, NF = 0;
  // Offsets in the authors' buffer; a_end is where its tail starts.
  int64_t a_alpha = 0, a_beta = 0, a_slope = 0, a_gain = 0, a_bump = 0, a_w1 = 0, a_b1 = 0,
          a_w2 = 0, a_end = 0;
  // Offsets in the lane buffer; l_end is where its tail starts.
  int64_t l_alpha = 0, l_beta = 0, l_lambda = 0, l_bump = 0, l_w1 = 0, l_b1 = 0, l_w2 = 0,
          l_end = 0;
  int64_t tail = 0;
  LCR_SPEC_HOST_DEVICE int64_t lane_total() const { return l_end + tail; }
  LCR_SPEC_HOST_DEVICE int64_t authors_total() const { return a_end + tail; }
};

// softplus and its derivative in double, stable for any x.
LCR_SPEC_HOST_DEVICE inline double recipe_softplus(double x) {
  return x > 0 ? x + ::log1p(::exp(-x)) : ::log1p(::exp(x));
}
LCR_SPEC_HOST_DEVICE inline double recipe_sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + ::exp(-x)) : ::exp(x) / (1.0 + ::exp(x));
}

// Element e of the lane buffer from the authors' buffer a.
template <class T>
LCR_SPEC_HOST_DEVICE inline T recipe_expand(const RecipeMap& m, const T* a, int64_t e) {
  const int64_t G = m.H / m.Hkv;
  if (e >= m.l_end) return a[m.a_end + (e - m.l_end)];
  if (e >= m.l_w2) {
    const int64_t r = e - m.l_w2, hk = r / m.N, n = r % m.N;
    return T(double(a[m.a_gain + hk]) * double(a[m.a_w2 + n]));
  }
  if (e >= m.l_b1) return a[m.a_b1 + (e - m.l_b1) % m.N];
  if (e >= m.l_w1) return a[m.a_w1 + (e - m.l_w1) % (int64_t(m.N) * m.NF)];
  if (e >= m.l_bump) return a[m.a_bump + (e - m.l_bump)];
  if (e >= m.l_lambda) return T(recipe_softplus(double(a[m.a_slope + (e - m.l_lambda)])));
  if (e >= m.l_beta) {
    const int64_t r = e - m.l_beta, h = r / m.R, c = r % m.R;
    return a[m.a_beta + (h / G) * m.R + c];
  }
  const int64_t r = e - m.l_alpha, h = r / m.R, c = r % m.R;
  return a[m.a_alpha + (h / G) * m.R + c];
}

// The gradient of the authors' element e from the lane gradients dl (chain rule through
// recipe_expand); a: the authors' buffer. The caller ADDS it to its gradient.
template <class T>
LCR_SPEC_HOST_DEVICE inline double recipe_contract(const RecipeMap& m, const T* a, const T* dl,
                                                   int64_t e) {
  const int G = m.H / m.Hkv;
  const int64_t N = m.N, NF = m.NF;
  double s = 0;
  if (e >= m.a_end) return double(dl[m.l_end + (e - m.a_end)]);
  if (e >= m.a_w2) {  // w2_n: sum_hk dw2_hk,n gain_hk
    const int64_t n = e - m.a_w2;
    for (int hk = 0; hk < m.Hkv; ++hk)
      s += double(dl[m.l_w2 + hk * N + n]) * double(a[m.a_gain + hk]);
    return s;
  }
  if (e >= m.a_b1) {
    const int64_t n = e - m.a_b1;
    for (int hk = 0; hk < m.Hkv; ++hk) s += double(dl[m.l_b1 + hk * N + n]);
    return s;
  }
  if (e >= m.a_w1) {
    const int64_t nm = e - m.a_w1;
    for (int hk = 0; hk < m.Hkv; ++hk) s += double(dl[m.l_w1 + hk * N * NF + nm]);
    return s;
  }
  if (e >= m.a_bump) return double(dl[m.l_bump + (e - m.a_bump)]);
  if (e >= m.a_gain) {  // gain_hk: sum_n dw2_hk,n w2_n
    const int64_t hk = e - m.a_gain;
    for (int64_t n = 0; n < N; ++n) s += double(dl[m.l_w2 + hk * N + n]) * double(a[m.a_w2 + n]);
    return s;
  }
  if (e >= m.a_slope) {
    const int64_t hk = e - m.a_slope;
    return double(dl[m.l_lambda + hk]) * recipe_sigmoid(double(a[m.a_slope + hk]));
  }
  // kv_alpha / kv_beta [hk, r]: the sum over the G query heads of the group.
  const bool beta = e >= m.a_beta;
  const int64_t r = e - (beta ? m.a_beta : m.a_alpha), hk = r / m.R, c = r % m.R;
  const int64_t l0 = beta ? m.l_beta : m.l_alpha;
  for (int g = 0; g < G; ++g) s += double(dl[l0 + (hk * G + g) * m.R + c]);
  return s;
}

}  // namespace lcr::goat
