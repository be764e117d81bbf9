#pragma once
// GOAT by its DEFINITION (seed 000 sections 2.2-2.6), one logit at a time:
//   <q_c, k_c> / sqrt(d_c) + sum_r [alpha_hr cos(w_r D_r) + beta_hr sin(w_r D_r)] + u_hk(j)
// with D_r = i - j (GOAT) or the y / x coordinate difference (GOAT2D), and
//   u_hk(j) = lambda j + sum_n w2_n silu(b1_n + sum_m W1_nm phi_m(j)) + bump 1{j = 0}.
// goat.recipe = "authors" reads the authors' parameters as their package defines them:
// alpha, beta of KV head hk, u_hk(j) = gain_hk m(phi(j)) + bump_hk 1{j = 0} + softplus(s_hk) j
// with ONE MLP m shared by the heads. goat.query_gate multiplies the prior (relative and u)
// by g = sigmoid(gate_bias_h - softplus(gate_scale_h) |q_c|).
// Written independently of kernels/schemes/goat (no lanes, no parameter map, its own
// frequency ladders) so the tests compare two implementations. Scalar T is double or
// ref::Dual.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention/params.hpp"
#include "kernels/attention/reference/dual.hpp"
#include "kernels/attention/spec.hpp"

namespace lcr::ref {

// Rung n (0-based) of an N-rung geometric ladder from 1 down to 1/base.
inline double goat_reference_ladder(double base, int n, int N) {
  return std::pow(base, -double(n) / double(N > 1 ? N - 1 : 1));
}

// q: the query's d_c content values, k: the key's; h query head, hk its KV head,
// pi, pj GLOBAL positions.
template <class T>
T goat_reference_logit(const AttentionSpec& spec, const ParamSet<T, HostSpace>& params, const T* q,
                       const T* k, int h, int hk, int64_t pi, int64_t pj) {
  const auto& g = spec.goat;
  const int R = g.modes, F = g.feature_freqs, N = g.mlp_hidden;
  const int dc = spec.head_dim - 2 * R - 2;

  const bool authors = g.recipe == GoatRecipe::Authors;
  T content = T(0);
  for (int c = 0; c < dc; ++c) content += q[c] * k[c];
  content = content / T(std::sqrt(double(dc)));
  T logit = T(0);  // the prior; the gate scales it

  // Relative prior: explicit alpha cos + beta sin of each mode's displacement.
  const auto alpha = params.v2(authors ? "goat.kv_alpha" : "goat.alpha");
  const auto beta = params.v2(authors ? "goat.kv_beta" : "goat.beta");
  const int ha = authors ? hk : h;
  auto mode_sum = [&](int r0, int count, double disp) {
    for (int n = 0; n < count; ++n) {
      const double ang = goat_reference_ladder(g.base, n, count) * disp;
      logit += alpha(ha, r0 + n) * T(std::cos(ang)) + beta(ha, r0 + n) * T(std::sin(ang));
    }
  };
  if (spec.scheme == Scheme::GOAT2D) {
    const int64_t W = g.grid_width;
    const int Ry = g.y_modes > 0 ? g.y_modes : R / 2;
    mode_sum(0, Ry, double(pi / W - pj / W));       // y axis: modes 0 .. R_y - 1
    mode_sum(Ry, R - Ry, double(pi % W - pj % W));  // x axis: the rest, ADDED
  } else {
    mode_sum(0, R, double(pi - pj));
  }

  // Key bias u(j) with its own feature vector and MLP.
  const double p = double(pj);
  thread_local std::vector<double> phi;  // reused: no allocation per logit
  phi.clear();
  for (int m = 0; m < F; ++m) {
    const double f = goat_reference_ladder(g.base, m, F);
    phi.push_back(std::sin(p * f));
    phi.push_back(std::cos(p * f));
  }
  phi.push_back(p / double(g.train_len));
  phi.push_back(std::log(1.0 + p) / std::log(1.0 + double(g.train_len)));
  T mlp = T(0);
  if (authors) {
    const auto w1 = params.v2("goat.shared_w1");
    const auto b1 = params.v1("goat.shared_b1"), w2 = params.v1("goat.shared_w2");
    for (int n = 0; n < N; ++n) {
      T pre = b1(n);
      for (size_t m = 0; m < phi.size(); ++m) pre += w1(n, m) * T(phi[m]);
      mlp += w2(n) * silu(pre);
    }
    logit += params.v1("goat.gain")(hk) * mlp + softplus(params.v1("goat.slope")(hk)) * T(p);
  } else {
    const auto w1 = params.v3("goat.mlp_w1");
    const auto b1 = params.v2("goat.mlp_b1"), w2 = params.v2("goat.mlp_w2");
    for (int n = 0; n < N; ++n) {
      T pre = b1(hk, n);
      for (size_t m = 0; m < phi.size(); ++m) pre += w1(hk, n, m) * T(phi[m]);
      mlp += w2(hk, n) * silu(pre);
    }
    logit += params.v1("goat.lambda")(hk) * T(p) + mlp;
  }
  if (pj == 0) logit += params.v1("goat.bump")(hk);
  if (g.query_gate) {
    T qq = T(0);
    for (int c = 0; c < dc; ++c) qq += q[c] * q[c];
    logit = logit * sigmoid(params.v1("goat.gate_bias")(h) -
                            softplus(params.v1("goat.gate_scale")(h)) * sqrt(qq));
  }
  return content + logit;
}

}  // namespace lcr::ref
