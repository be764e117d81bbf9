#pragma once
// Comparison helpers of the GPU tests that check one GPU computation against another (the
// rings and the chunked PaTH against the whole-sequence kernels): rows of a full tensor, the
// comparison with its documented bound, and the bounds' extra terms (PaTH's lse, the gradient
// of the query bias).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace lcr::test {

// Set by a multi-rank test main on ranks other than 0, so only one rank prints.
inline bool& compare_quiet() {
  static bool quiet = false;
  return quiet;
}

// A function, not a cast, so `std::vector<float> x(sz(n))` never parses as a declaration.
inline size_t sz(int64_t n) { return static_cast<size_t>(n); }

// Rows `pos` of a [outer, L, W] tensor -> [outer, pos.size(), W].
inline std::vector<float> take(const std::vector<float>& x, int64_t outer, int64_t L, int64_t W,
                               const std::vector<int64_t>& pos) {
  std::vector<float> y;
  y.reserve(sz(outer) * pos.size() * sz(W));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p : pos)
      for (int64_t w = 0; w < W; ++w) y.push_back(x[sz((o * L + p) * W + w)]);
  return y;
}

// |got - want| <= rel * max(floor, max |want|) (+ slack[i] per element when given); no NaN
// (outputs were poisoned, so NaN means a value never written). Prints the largest
// difference, for the record in docs/cuda.md, unless compare_quiet() (ranks other than 0).
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                         double floor, const std::string& what,
                         const std::vector<float>* slack = nullptr) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = floor, err = 0, excess = -1;
  size_t worst = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << "[" << i << "] is NaN (never written?)";
    const double e = std::fabs(double(got[i]) - double(want[i]));
    const double ex = e - rel * scale - (slack ? double((*slack)[i]) : 0.0);
    err = std::max(err, e);
    if (ex > excess) excess = ex, worst = i;
  }
  EXPECT_LE(excess, 0.0) << what << "[" << worst << "]: got " << got[worst] << ", reference "
                         << want[worst] << ", bound " << rel * scale << " + "
                         << (slack ? (*slack)[worst] : 0.f) << "; max |difference| " << err
                         << ", largest reference magnitude " << scale;
  if (!compare_quiet())
    std::printf("    %-18s max err %.3e  (%.2e of max |ref| %.3g)\n", what.c_str(), err,
                err / scale, scale);
}

// PaTH's lse bound's per-row term, [B, H, L]: one bf16 unit (2^-9) of the row's logit scale,
// scale |q_i| max_{j <= i} |k_j| (scale = 1 / sqrt(D)). PaTH's transitions have norm <= 1, so
// |logit_ij| <= scale |q_i| |k_j|, a rounding of a query or key operand to bf16 moves a logit by
// at most 2^-9 of that, and lse by at most the largest such move. Without it 2e-3 max(1, |lse|)
// was too tight where |lse| is small and logits are not: at L = 5 the chunked form failed ~1
// draw in 60 (lse error 4.3e-3 against 4.06e-3). q [B, L, H, D], k [B, L, Hkv, D].
inline std::vector<float> path_lse_slack(const std::vector<float>& q, const std::vector<float>& k,
                                         int B, int64_t L, int H, int Hkv, int D) {
  const int G = H / Hkv;
  const double scale = 1.0 / std::sqrt(double(D)), unit = std::ldexp(1.0, -9);
  auto norm = [&](const std::vector<float>& x, int64_t row) {
    double n = 0;
    for (int d = 0; d < D; ++d) n += double(x[sz(row * D + d)]) * x[sz(row * D + d)];
    return std::sqrt(n);
  };
  std::vector<float> slack(sz(int64_t(B) * H * L));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      double kmax = 0;
      for (int64_t i = 0; i < L; ++i) {
        kmax = std::max(kmax, norm(k, (b * L + i) * Hkv + h / G));
        slack[sz((int64_t(b) * H + h) * L + i)] =
            float(unit * scale * norm(q, (b * L + i) * H + h) * kmax);
      }
    }
  return slack;
}

// Floor of PaTH's dbeta bound: with G_t the gradient with respect to the transition
// H_t = I - beta_t w_t w_t^T, dbeta_t = -w_t^T G_t w_t and dw_t = -beta_t (G_t + G_t^T) w_t
// (|w_t| = 1), so dbeta's terms are of dw's size while their sum can be far smaller (measured:
// L = 5, max |dbeta| 0.2 against max |dw| 3.5): its bound is relative to the larger of the two.
inline double dbeta_floor(const std::vector<float>& dw_ref) {
  double m = 1e-6;
  for (float x : dw_ref) m = std::max(m, double(std::fabs(x)));
  return m;
}

// Extra bound of the query-bias gradient (FoX dfox_cq) per row (b, i, h):
// dbias_q_i = sum_j dS_ij = sum_j P_ij dP_ij - delta_i sum_j P_ij almost cancels (exactly,
// without a sink), so its size says nothing about its error: delta_i = <dO_i, O_i> is
// computed from each path's own bf16 o, and o differs by up to one bf16 unit (2^-7 |o_d|)
// between the ring and the single kernel. That moves dbias_q_i by up to
// 2^-7 sum_d |dO_id o_id|; the bound allows twice that. dout, o: [rows, Dv].
inline std::vector<float> delta_slack(const std::vector<float>& dout, const std::vector<float>& o,
                                      int Dv) {
  std::vector<float> s(o.size() / sz(Dv));
  for (size_t r = 0; r < s.size(); ++r) {
    double a = 0;
    for (int d = 0; d < Dv; ++d)
      a += std::fabs(double(dout[r * sz(Dv) + sz(d)]) * o[r * sz(Dv) + sz(d)]);
    s[r] = float(std::ldexp(a, -6));
  }
  return s;
}

}  // namespace lcr::test
