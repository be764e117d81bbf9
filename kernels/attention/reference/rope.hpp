#pragma once
// RoPE by definition (seed 001 sections 2-4), written independently of the lanes code:
// rotate the query's pairs by p_i theta'_m and the key's by p_j theta'_m with explicit 2x2
// rotation matrices, take the dot product, multiply by YaRN's 1/t = (0.1 ln s + 1)^2 (the
// rotated pairs' part only, in the released convention) and divide by sqrt(head_dim).
//   pairs: Interleaved (2m, 2m+1), HalfSplit (m, m + r/2); dims r.. pass through.
//   theta_m = base^(-2m/r); YaRN (s > 1): theta'_m = (1 - g) theta_m / s + g theta_m,
//   paper: g = ramp(N / lambda_m), lambda_m = 2 pi / theta_m; released (the authors'
//   code): g = 1 - clamp((m - lo) / (hi - lo), 0, 1) with lo, hi the pair indices that turn
//   beta_fast and beta_slow times over N, rounded outwards.
// The cos/sin of each position's angles are memoised (they are plain doubles, independent
// of T), so the O(L^2) logits cost only the rotations themselves.
#include <cmath>
#include <unordered_map>
#include <vector>

#include "kernels/attention/spec.hpp"

namespace lcr::ref {

namespace detail {

constexpr double kRopeTwoPi = 6.283185307179586;

// Per-pair rotation tables [cos, sin] for each position seen, for one RoPE setting.
struct RopeTrigCache {
  RopeOptions key;
  int head_dim = -1;
  std::vector<double> theta;
  std::unordered_map<int64_t, std::vector<double>> by_pos;  // pos -> [cos_0, sin_0, ...]

  bool matches(const AttentionSpec& s) const {
    const auto& o = s.rope;
    return head_dim == s.head_dim && key.rotary_dim == o.rotary_dim && key.base == o.base &&
           key.yarn_factor == o.yarn_factor && key.yarn_original_len == o.yarn_original_len &&
           key.yarn_beta_fast == o.yarn_beta_fast && key.yarn_beta_slow == o.yarn_beta_slow &&
           key.yarn_convention == o.yarn_convention;
  }

  void reset(const AttentionSpec& s) {
    key = s.rope;
    head_dim = s.head_dim;
    by_pos.clear();
    const auto& o = s.rope;
    const int r = o.rotary_dim > 0 ? o.rotary_dim : s.head_dim;
    theta.assign(r / 2, 0.0);
    // Released: the correction range of the authors' code, dimension = r.
    auto correction_dim = [&](double turns) {
      return (r * std::log(o.yarn_original_len / (turns * kRopeTwoPi))) / (2 * std::log(o.base));
    };
    double low = std::floor(correction_dim(o.yarn_beta_fast));
    double high = std::ceil(correction_dim(o.yarn_beta_slow));
    low = std::max(low, 0.0);
    high = std::min(high, double(r - 1));
    if (low == high) high += 0.001;
    for (int m = 0; m < r / 2; ++m) {
      const double base_freq = std::pow(o.base, -2.0 * m / r);
      double f = base_freq;
      if (o.yarn_factor > 1) {
        double g;  // 1: extrapolate (keep base_freq); 0: interpolate (base_freq / s)
        if (o.yarn_convention == YarnConvention::Paper) {
          const double wavelength = kRopeTwoPi / base_freq;
          const double ratio = o.yarn_original_len / wavelength;
          // the ramp gamma(ratio), seed 001 Eq. 18 with alpha = slow, beta = fast
          if (ratio < o.yarn_beta_slow)
            g = 0;
          else if (ratio > o.yarn_beta_fast)
            g = 1;
          else
            g = (ratio - o.yarn_beta_slow) / (o.yarn_beta_fast - o.yarn_beta_slow);
        } else {
          double ramp = (m - low) / (high - low);  // the linear ramp mask
          ramp = ramp < 0 ? 0 : (ramp > 1 ? 1 : ramp);
          g = 1 - ramp;
        }
        f = (1 - g) * base_freq / o.yarn_factor + g * base_freq;
      }
      theta[m] = f;
    }
  }

  // References stay valid until the next rope_trig_cache() call (rehashing keeps them).
  const std::vector<double>& at(int64_t pos) {
    auto it = by_pos.find(pos);
    if (it != by_pos.end()) return it->second;
    std::vector<double> cs(2 * theta.size());
    for (size_t m = 0; m < theta.size(); ++m) {
      cs[2 * m] = std::cos(double(pos) * theta[m]);
      cs[2 * m + 1] = std::sin(double(pos) * theta[m]);
    }
    return by_pos.emplace(pos, std::move(cs)).first->second;
  }
};

inline RopeTrigCache& rope_trig_cache(const AttentionSpec& s) {
  thread_local RopeTrigCache cache;
  if (!cache.matches(s) || cache.by_pos.size() > (1u << 16)) cache.reset(s);  // bounded memory
  return cache;
}

}  // namespace detail

template <class T>
T rope_reference_logit(const AttentionSpec& spec, const T* q, const T* k, int64_t pi, int64_t pj) {
  auto& cache = detail::rope_trig_cache(spec);
  const std::vector<double>& rq = cache.at(pi);
  const std::vector<double>& rk = cache.at(pj);
  const int d = spec.head_dim, half = int(cache.theta.size());
  const bool inter = spec.rope.pairing == RopePairing::Interleaved;
  T dot = T(0), pass = T(0);
  for (int m = 0; m < half; ++m) {
    const int a = inter ? 2 * m : m, b = inter ? 2 * m + 1 : m + half;
    // [x'_a; x'_b] = [[cos, -sin], [sin, cos]] [x_a; x_b]
    const T qa = q[a] * rq[2 * m] - q[b] * rq[2 * m + 1];
    const T qb = q[a] * rq[2 * m + 1] + q[b] * rq[2 * m];
    const T ka = k[a] * rk[2 * m] - k[b] * rk[2 * m + 1];
    const T kb = k[a] * rk[2 * m + 1] + k[b] * rk[2 * m];
    dot += qa * ka + qb * kb;
  }
  for (int c = 2 * half; c < d; ++c) pass += q[c] * k[c];  // partial RoPE: pass-through dims
  const double temp = spec.rope.yarn_factor > 1 ? 0.1 * std::log(spec.rope.yarn_factor) + 1 : 1.0;
  const double pass_temp = spec.rope.yarn_convention == YarnConvention::Paper ? temp : 1.0;
  return dot * T(temp * temp / std::sqrt(double(d))) +
         pass * T(pass_temp * pass_temp / std::sqrt(double(d)));
}

}  // namespace lcr::ref
