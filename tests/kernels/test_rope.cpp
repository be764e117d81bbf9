// RoPE: both pairings, partial RoPE, YaRN and the numerics options through the shared
// attention suite, plus the properties the suite cannot see: the pairing convention, the
// relative-position invariance, float32 phases at large positions, the YaRN frequencies,
// and the validation messages.
#include <algorithm>
#include <cmath>

#include "kernels/attention_scheme_tests.hpp"
#include "kernels/schemes/rope/rope.hpp"

namespace lcr::test {
namespace {

// The standard sizes, with the L = 1000 case made light: the shared one (H = 2, d = 128)
// costs ~40 s of float64 reference per variant, so here L = 1000 runs with H = 1, d = 16
// (16x less work; the wide heads are covered at L = 129) and only where `long_case` is set.
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

AttentionSpec rope_spec(RopePairing pairing) {
  AttentionSpec s;
  s.scheme = Scheme::RoPE;
  s.rope.pairing = pairing;
  return s;
}

std::vector<NamedCase> cases() {
  std::vector<NamedCase> all;
  auto add = [&](const std::string& prefix, const AttentionSpec& s, bool long_case) {
    for (auto& c : suite_cases(prefix, s, long_case)) all.push_back(c);
  };
  add("rope_halfsplit", rope_spec(RopePairing::HalfSplit), true);
  add("rope_interleaved", rope_spec(RopePairing::Interleaved), true);
  AttentionSpec s = rope_spec(RopePairing::HalfSplit);
  s.rope.rotary_dim = 8;  // valid for every standard head_dim (16..128)
  add("rope_partial", s, false);
  // YaRN with a short original context so the ramp has all three regions at d = 16:
  // N / lambda_m = 10.2, 3.2, 1.02, 0.32, ... against beta_slow = 1, beta_fast = 8.
  s = rope_spec(RopePairing::Interleaved);
  s.rope.yarn_factor = 4;
  s.rope.yarn_original_len = 64;
  s.rope.yarn_beta_fast = 8;
  add("rope_yarn", s, true);  // the released convention (the default)
  s.rope.yarn_convention = YarnConvention::Paper;
  add("rope_yarn_paper", s, false);
  // Partial RoPE with YaRN: the conventions differ on the pass-through dims' temperature.
  s.rope.rotary_dim = 8;
  add("rope_yarn_partial_paper", s, false);
  s.rope.yarn_convention = YarnConvention::Released;
  add("rope_yarn_partial", s, false);
  s = rope_spec(RopePairing::HalfSplit);
  s.numerics.qk_norm = s.numerics.sink = true;
  add("rope_qknorm_sink", s, false);
  return all;
}

INSTANTIATE_TEST_SUITE_P(RoPE, AttentionSchemeTest, ::testing::ValuesIn(cases()), case_name);

Case small_case(RopePairing pairing, int rotary_dim = 0) {
  Case c;
  c.spec = rope_spec(pairing);
  c.spec.rope.rotary_dim = rotary_dim;
  c.spec.heads = 2;
  c.spec.kv_heads = 1;
  c.spec.head_dim = 16;
  c.B = 2;
  c.Lq = 13;
  c.Lk = 17;
  c.q_pos0 = 9;
  c.k_pos0 = 5;
  c.seed = 42;
  return c;
}

// Interleaved pairs (2m, 2m+1) and half-split pairs (m, m + r/2) are different maps: the
// same weights give different outputs. Moving dim 2m to m and 2m+1 to m + r/2 turns one
// into the other exactly (dims r.. stay in place).
TEST(RoPE, PairingsDifferButAgreeAfterPermutation) {
  for (int r : {0, 8}) {
    SCOPED_TRACE("rotary_dim " + std::to_string(r));
    const Problem pi = make_problem(small_case(RopePairing::Interleaved, r));
    Problem ph = make_problem(small_case(RopePairing::HalfSplit, r));  // same draws
    const Result ri = run_kokkos<double>(pi, false);
    const Result same_input = run_kokkos<double>(ph, false);
    EXPECT_GT(max_abs_diff(ri.o, same_input.o), 1e-3);

    const int d = pi.c.spec.head_dim, rr = r > 0 ? r : d, half = rr / 2;
    auto permute = [&](const H4<double>& from, const H4<double>& to) {
      for (size_t b = 0; b < from.extent(0); ++b)
        for (size_t l = 0; l < from.extent(1); ++l)
          for (size_t h = 0; h < from.extent(2); ++h)
            for (int m = 0; m < half; ++m) {
              to(b, l, h, m) = from(b, l, h, 2 * m);
              to(b, l, h, m + half) = from(b, l, h, 2 * m + 1);
            }
    };
    permute(pi.q, ph.q);
    permute(pi.k, ph.k);
    const Result rh = run_kokkos<double>(ph, false);
    EXPECT_LT(max_abs_diff(ri.o, rh.o), 1e-12);
    EXPECT_LT(max_abs_diff(ri.lse, rh.lse), 1e-12);
  }
}

// q_m^T k_n depends on n - m only: shifting every query and key position by the same
// amount leaves o and lse unchanged. At a shift of 1e6 the angles' double rounding is
// ~1e6 * 1e-16 = 1e-10 rad, so 1e-8 is a safe bound.
TEST(RoPE, ShiftingAllPositionsChangesNothing) {
  for (auto pairing : {RopePairing::Interleaved, RopePairing::HalfSplit}) {
    Case c = small_case(pairing, 8);
    const Result r0 = run_kokkos<double>(make_problem(c), false);
    for (int64_t shift : {1, 1000, 1000003}) {
      SCOPED_TRACE("shift " + std::to_string(shift));
      Case cs = c;
      cs.q_pos0 += shift;
      cs.k_pos0 += shift;
      const Result r1 = run_kokkos<double>(make_problem(cs), false);
      EXPECT_LT(max_abs_diff(r0.o, r1.o), 1e-8);
      EXPECT_LT(max_abs_diff(r0.lse, r1.lse), 1e-8);
    }
  }
}

// Positions near 1e7: a float32 angle p * theta would be off by up to ~0.5 rad; the
// lanes compute angles in double, so float32 stays within the suite's 2e-4 tolerance.
TEST(RoPE, Float32KeepsThePhaseAtLargePositions) {
  Case c = small_case(RopePairing::HalfSplit);
  c.q_pos0 = 10000000 + 3;
  c.k_pos0 = 10000000 - 7;
  const Problem p = make_problem(c);
  const Result r = run_reference(p), k = run_kokkos<float>(p, false);
  EXPECT_LT(max_abs_diff(k.o, r.o), 2e-4 * std::max(1.0, max_abs(r.o)));
  EXPECT_LT(max_abs_diff(k.lse, r.lse), 2e-4 * std::max(1.0, max_abs(r.lse)));
}

// A hand-computed logit: one pair, q = k = (1, 0) at positions 5 and 2; the only key's
// logit is the lse: cos((5 - 2) theta_0) / sqrt(2), theta_0 = 1; with YaRN s = 4 and
// N = 64 pair 0 has N / lambda = 10.19 > beta_fast = 8 (kept) and the logit gets
// (0.1 ln 4 + 1)^2.
TEST(RoPE, HandComputedLogit) {
  for (double s : {1.0, 4.0}) {
    AttentionSpec spec = rope_spec(RopePairing::Interleaved);
    spec.head_dim = 2;
    spec.rope.yarn_factor = s;
    spec.rope.yarn_original_len = 64;
    spec.rope.yarn_beta_fast = 8;
    Case c;
    c.spec = spec;
    c.Lq = c.Lk = 1;
    c.q_pos0 = 5;
    c.k_pos0 = 2;
    Problem p = make_problem(c);
    p.q(0, 0, 0, 0) = p.k(0, 0, 0, 0) = 1;
    p.q(0, 0, 0, 1) = p.k(0, 0, 0, 1) = 0;
    const double a = 0.1 * std::log(s) + 1;
    const double want = a * a * std::cos(3.0) / std::sqrt(2.0);
    EXPECT_NEAR(run_kokkos<double>(p, false).lse[0], want, 1e-14);
    EXPECT_NEAR(run_reference(p).lse[0], want, 1e-14);
  }
}

// theta'_m for r = 8, base 10000, s = 4, N = 64, beta_slow = 1, beta_fast = 32:
// theta_m = 1, 0.1, 0.01, 0.001; N / lambda_m = 64 theta_m / (2 pi) = 10.19, 1.019, ...
// so pair 0 and 1 are on the ramp, pairs 2 and 3 are interpolated (theta / s).
TEST(RoPE, YarnFrequenciesPaper) {
  AttentionSpec s = rope_spec(RopePairing::HalfSplit);
  s.head_dim = 8;
  s.rope.yarn_factor = 4;
  s.rope.yarn_original_len = 64;
  s.rope.yarn_convention = YarnConvention::Paper;
  const auto f = rope::frequencies(s);
  ASSERT_EQ(f.size(), 4u);
  const double pi2 = 6.283185307179586;
  const double g0 = (64 / pi2 - 1) / 31, g1 = (6.4 / pi2 - 1) / 31;
  EXPECT_NEAR(f[0], (1 - g0) * 1.0 / 4 + g0 * 1.0, 1e-15);
  EXPECT_NEAR(f[1], (1 - g1) * 0.1 / 4 + g1 * 0.1, 1e-15);
  EXPECT_NEAR(f[2], 0.01 / 4, 1e-17);
  EXPECT_NEAR(f[3], 0.001 / 4, 1e-18);
  EXPECT_DOUBLE_EQ(rope::attention_factor(s), 0.1 * std::log(4.0) + 1);
  s.rope.yarn_factor = 1;  // YaRN off: plain base^(-2m/r), no temperature
  EXPECT_DOUBLE_EQ(rope::frequencies(s)[1], 0.1);
  EXPECT_DOUBLE_EQ(rope::attention_factor(s), 1.0);
}

// The YaRN authors' inv_freq, step by step as their code (and HF's rope_init) computes it:
// dim = r, correction range rounded outwards and clamped to [0, dim - 1], a linear ramp
// mask over the dim / 2 pairs, inv_freq = interpolation (1 - mask') + extrapolation mask'
// with mask' = 1 - ramp.
std::vector<double> released_yarn_inv_freq(int dim, double base, double factor, int n_orig,
                                           double beta_fast, double beta_slow) {
  auto find_correction_dim = [&](double num_rotations) {
    return (dim * std::log(n_orig / (num_rotations * 2 * M_PI))) / (2 * std::log(base));
  };
  double low = std::floor(find_correction_dim(beta_fast));
  double high = std::ceil(find_correction_dim(beta_slow));
  low = std::max(low, 0.0), high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;
  std::vector<double> out;
  for (int i = 0; i < dim / 2; ++i) {
    const double pos_freq = std::pow(base, 2.0 * i / dim);
    const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (factor * pos_freq);
    const double ramp = std::min(std::max((i - low) / (high - low), 0.0), 1.0);
    const double extrapolation_factor = 1 - ramp;
    out.push_back(interpolation * (1 - extrapolation_factor) +
                  extrapolation * extrapolation_factor);
  }
  return out;
}

// The released convention against the authors' code: a short context where the ramp spans
// few pairs, Llama-3-like settings (r = 128, base 500000, N = 8192, s = 8), and partial
// RoPE (r = 32 of 64).
TEST(RoPE, YarnFrequenciesReleased) {
  struct Setting {
    int head_dim, rotary_dim;
    double base, factor;
    int n_orig;
  };
  for (const Setting& st : {Setting{8, 0, 10000, 4, 64}, Setting{128, 0, 500000, 8, 8192},
                            Setting{64, 32, 10000, 16, 2048}, Setting{16, 0, 10000, 4, 64}}) {
    AttentionSpec s = rope_spec(RopePairing::HalfSplit);
    s.head_dim = st.head_dim;
    s.rope.rotary_dim = st.rotary_dim;
    s.rope.base = st.base;
    s.rope.yarn_factor = st.factor;
    s.rope.yarn_original_len = st.n_orig;
    const int r = st.rotary_dim > 0 ? st.rotary_dim : st.head_dim;
    const auto want = released_yarn_inv_freq(r, st.base, st.factor, st.n_orig, 32, 1);
    const auto got = rope::frequencies(s);
    ASSERT_EQ(got.size(), want.size());
    for (size_t m = 0; m < got.size(); ++m)
      EXPECT_NEAR(got[m], want[m], 1e-15 * want[m]) << "head_dim " << st.head_dim << " pair " << m;
    EXPECT_DOUBLE_EQ(rope::attention_factor(s), 0.1 * std::log(st.factor) + 1);
    EXPECT_DOUBLE_EQ(rope::pass_through_factor(s), 1.0);
    s.rope.yarn_convention = YarnConvention::Paper;
    EXPECT_DOUBLE_EQ(rope::pass_through_factor(s), rope::attention_factor(s));
  }
  // Where a pair lies strictly inside the ramp the two conventions differ: r = 16, N = 64,
  // pairs make 10.2, 3.2, 1.02, ... turns; the released ramp runs over pairs 0..3 (pair 1:
  // g = 2/3), the paper's gives pair 1 g = (3.2 - 1) / 31.
  AttentionSpec s = rope_spec(RopePairing::HalfSplit);
  s.head_dim = 16;
  s.rope.yarn_factor = 4;
  s.rope.yarn_original_len = 64;
  const double released = rope::frequencies(s)[1];
  s.rope.yarn_convention = YarnConvention::Paper;
  EXPECT_GT(std::abs(rope::frequencies(s)[1] - released), 1e-3 * released);
}

void expect_error_mentions(const AttentionSpec& s, const std::string& word) {
  try {
    validate(s);
    ADD_FAILURE() << "no error; expected one mentioning '" << word << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

TEST(RoPE, ValidationNamesTheOption) {
  AttentionSpec s = rope_spec(RopePairing::HalfSplit);
  s.head_dim = 33;
  expect_error_mentions(s, "head_dim");
  s.rope.rotary_dim = 16;  // an even rotary_dim makes an odd head fine
  EXPECT_NO_THROW(validate(s));
  s.rope.rotary_dim = 7;
  expect_error_mentions(s, "rotary_dim");
  s.head_dim = 16;
  s.rope.rotary_dim = 18;
  expect_error_mentions(s, "rotary_dim");
  s.rope.rotary_dim = 0;
  s.rope.yarn_factor = 0.5;
  expect_error_mentions(s, "yarn_factor");
  s.rope.yarn_factor = 2;
  s.rope.yarn_original_len = 0;
  expect_error_mentions(s, "yarn_original_len");
  s.rope.yarn_original_len = 4096;
  s.rope.yarn_beta_fast = 0.5;
  expect_error_mentions(s, "yarn_beta_fast");
  s.rope.yarn_beta_fast = 32;
  s.rope.base = 1;
  expect_error_mentions(s, "rope.base");
}

}  // namespace
}  // namespace lcr::test
