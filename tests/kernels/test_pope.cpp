// PoPE through the shared attention suite (plain and with softcap), plus the clamp of the
// phase bias, a hand-computed logit (the sign conventions), float32 phases at large
// positions and the validation message.
#include <algorithm>
#include <cmath>

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/attention_scheme_tests.hpp"
#include "kernels/schemes/pope/pope.hpp"

namespace lcr::test {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// The standard sizes, with the L = 1000 case made light: the shared one (H = 2, d = 128)
// costs minutes of float64 reference per variant, so here L = 1000 runs with H = 1,
// d = 16 (the wide heads are covered at L = 129), and only for the plain variant.
std::vector<NamedCase> suite_cases(const std::string& prefix, const AttentionSpec& s,
                                   bool long_case) {
  std::vector<NamedCase> out;
  for (auto& c : standard_cases(prefix, s)) {
    if (c.c.Lq < 1000) {
      out.push_back(c);
    } else if (long_case) {
      c.name = prefix + "_L1000_d16";
      c.c.spec.heads = c.c.spec.kv_heads = 1;
      c.c.spec.head_dim = 16;
      c.c.seed = std::hash<std::string>{}(c.name);
      out.push_back(c);
    }
  }
  return out;
}

std::vector<NamedCase> cases() {
  AttentionSpec s;
  s.scheme = Scheme::PoPE;
  std::vector<NamedCase> all = suite_cases("pope", s, true);
  s.numerics.softcap = 4.0;
  for (auto& c : suite_cases("pope_softcap", s, false)) all.push_back(c);
  return all;
}

INSTANTIATE_TEST_SUITE_P(PoPE, AttentionSchemeTest, ::testing::ValuesIn(cases()), case_name);

Case small_case() {
  Case c;
  c.spec.scheme = Scheme::PoPE;
  c.spec.heads = 4;
  c.spec.kv_heads = 2;
  c.spec.head_dim = 8;
  c.B = 2;
  c.Lq = 11;
  c.Lk = 15;
  c.q_pos0 = 6;
  c.k_pos0 = 2;
  c.seed = 7;
  return c;
}

// The forward uses clamp(delta, -2pi, 0): a delta outside the range acts exactly as the
// range's end, and its gradient is zero (the clamp's derivative), while in-range entries
// keep theirs.
TEST(PoPE, DeltaOutsideTheRangeActsClamped) {
  Problem out = make_problem(small_case()), clamped = make_problem(small_case());
  auto d_out = out.params.v2("pope.delta"), d_cl = clamped.params.v2("pope.delta");
  const double outside[] = {0.7, -9.0, 3.0, -kTwoPi - 1e-3};
  const double ends[] = {0.0, -kTwoPi, 0.0, -kTwoPi};
  for (int n = 0; n < 4; ++n) {
    d_out(n % 2, 2 * n) = outside[n];
    d_cl(n % 2, 2 * n) = ends[n];
  }
  const Result a = run_kokkos<double>(out, true), b = run_kokkos<double>(clamped, true);
  EXPECT_EQ(max_abs_diff(a.o, b.o), 0.0);
  EXPECT_EQ(max_abs_diff(a.lse, b.lse), 0.0);
  const auto& ga = a.grad.at("pope.delta");
  const auto& gb = b.grad.at("pope.delta");
  const int d = out.c.spec.head_dim;
  for (int n = 0; n < 4; ++n) EXPECT_EQ(ga[(n % 2) * d + 2 * n], 0.0) << "entry " << n;
  for (size_t i = 0; i < ga.size(); ++i) {
    bool moved = false;
    for (int n = 0; n < 4; ++n) moved |= i == size_t((n % 2) * d + 2 * n);
    if (!moved) {
      EXPECT_EQ(ga[i], gb[i]) << "entry " << i;
    }
  }
  // The reference clamps on its own and agrees.
  const Result r = run_reference(out);
  EXPECT_LT(max_abs_diff(a.o, r.o), 1e-12);
}

// One query at position 5, one key at position 2, d = 2 (theta = 1, base^(-1/2) = 0.01):
// the lse is the logit, sum_c softplus(q_c) softplus(k_c) cos((2 - 5) theta_c + delta_c)
// / sqrt(2). Checks the negative frequency exponent and the sign of (j - i) and delta.
TEST(PoPE, HandComputedLogit) {
  Case c;
  c.spec.scheme = Scheme::PoPE;
  c.spec.head_dim = 2;
  c.Lq = c.Lk = 1;
  c.q_pos0 = 5;
  c.k_pos0 = 2;
  Problem p = make_problem(c);
  const double q[] = {0.3, -1.2}, k[] = {2.0, 0.4}, delta[] = {-0.5, -2.5};
  for (int ch = 0; ch < 2; ++ch) {
    p.q(0, 0, 0, ch) = q[ch];
    p.k(0, 0, 0, ch) = k[ch];
    p.params.v2("pope.delta")(0, ch) = delta[ch];
  }
  auto sp = [](double x) { return std::log1p(std::exp(x)); };
  const double theta[] = {1.0, 0.01};
  double want = 0;
  for (int ch = 0; ch < 2; ++ch)
    want += sp(q[ch]) * sp(k[ch]) * std::cos(-3 * theta[ch] + delta[ch]);
  want /= std::sqrt(2.0);
  EXPECT_NEAR(run_kokkos<double>(p, false).lse[0], want, 1e-14);
  EXPECT_NEAR(run_reference(p).lse[0], want, 1e-14);
}

// Positions near 1e7: the phases p theta_c are computed in double, so float32 keeps the
// suite's 2e-4 tolerance (a float32 phase would be off by up to ~0.5 rad).
TEST(PoPE, Float32KeepsThePhaseAtLargePositions) {
  Case c = small_case();
  c.q_pos0 = 10000000 + 4;
  c.k_pos0 = 10000000 - 4;
  const Problem p = make_problem(c);
  const Result r = run_reference(p), k = run_kokkos<float>(p, false);
  EXPECT_LT(max_abs_diff(k.o, r.o), 2e-4 * std::max(1.0, max_abs(r.o)));
  EXPECT_LT(max_abs_diff(k.lse, r.lse), 2e-4 * std::max(1.0, max_abs(r.lse)));
}

TEST(PoPE, LayoutAndScale) {
  AttentionSpec s;
  s.scheme = Scheme::PoPE;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 24;
  EXPECT_EQ(pope::lanes_width(s), 48);                         // real and imaginary parts
  EXPECT_DOUBLE_EQ(pope::sdpa_scale(s), 1 / std::sqrt(24.0));  // 1/sqrt(d), not 1/sqrt(2d)
  const auto& e = attention_param_layout(s).at("pope.delta");
  EXPECT_EQ(e.shape, (std::vector<int64_t>{2, 24}));
  EXPECT_DOUBLE_EQ(pope::frequencies(s)[12], std::pow(10000.0, -0.5));
}

TEST(PoPE, ValidationNamesTheOption) {
  AttentionSpec s;
  s.scheme = Scheme::PoPE;
  s.pope.base = 0.5;
  try {
    validate(s);
    ADD_FAILURE() << "no error for pope.base 0.5";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pope.base"), std::string::npos) << e.what();
  }
}

// PoPE's magnitudes are softplus: in float its tail is a series (kmath::log1p_unit), which must
// stay within a few ulp of the exact value; the backward's softplus_sigmoid must give the
// same bits as softplus and sigmoid apart.
TEST(PoPE, FloatSoftplusWithinFewUlpOfExact) {
  float worst = 0;
  for (int n = -40000; n <= 40000; ++n) {
    const float x = float(n) * 1e-3f;  // [-40, 40] by 0.001, and the tails beyond
    const double want = std::log1p(std::exp(double(x)));
    const float got = kmath::softplus(x);
    // 4 ulp of the result: the series' own rounding (a division and a Horner polynomial,
    // under 2 ulp over [0, 1]) plus expf's error (below 1 ulp in glibc), with a margin.
    const float ulp = std::nextafter(float(want), INFINITY) - float(want);
    worst = std::max(worst, float(std::abs(double(got) - want) / ulp));
    float sp, sg;
    kmath::softplus_sigmoid(x, sp, sg);
    EXPECT_EQ(sp, got) << x;
    EXPECT_EQ(sg, kmath::sigmoid(x)) << x;
  }
  EXPECT_LE(worst, 4.f);
  EXPECT_EQ(kmath::softplus(-200.f), 0.f);             // e^x underflows: exactly 0
  EXPECT_EQ(kmath::softplus(200.f), 200.f);            // log1p(e^-200) is below half an ulp of 200
  EXPECT_EQ(kmath::softplus(-20.f), std::exp(-20.f));  // the tail: log1p(e) = e
}

}  // namespace
}  // namespace lcr::test
