// PaTH and PaTH-FoX through the attention API against the float64 definition
// (kernels/attention/reference/path.hpp): forward in float64 and float32, every gradient
// against the reference's exact directional derivative and against central finite
// differences. Sizes L = 1, 7, 129, 1000 with block sizes that do and do not divide L,
// beta over the whole of (0, 2) including near 2 and at/near 1, GQA, every numerics option.
#include <gtest/gtest.h>

#include "kernels/test_path_support.hpp"

namespace lcr::test::pathtest {
namespace {

PathCase make(const std::string& name, Scheme scheme, int B, int L, int H, int Hkv, int d,
              int block, BetaDraw beta = BetaDraw::Mixed, int dv = 0, int64_t pos0 = 0) {
  PathCase c;
  c.name = name;
  c.spec.scheme = scheme;
  c.spec.heads = H;
  c.spec.kv_heads = Hkv;
  c.spec.head_dim = d;
  c.spec.value_dim = dv;
  c.spec.path.block_size = block;
  c.B = B;
  c.L = L;
  c.pos0 = pos0;
  c.beta = beta;
  c.seed = std::hash<std::string>{}(name);
  return c;
}

std::vector<PathCase> cases() {
  const Scheme P = Scheme::PaTH, F = Scheme::PaTHFoX;
  std::vector<PathCase> all = {
      make("path_L1_b4", P, 1, 1, 2, 1, 16, 4),
      make("path_L7_b3_gqa", P, 2, 7, 4, 2, 8, 3),  // 3 does not divide 7
      make("path_L7_b7", P, 1, 7, 2, 2, 8, 7),      // one block
      make("path_L7_b1", P, 1, 7, 2, 1, 8, 1),      // every position its own block
      make("path_L7_b16", P, 1, 7, 1, 1, 8, 16),    // block longer than the sequence
      make("path_L129_b16", P, 1, 129, 2, 1, 32, 16),
      make("path_L129_b43", P, 1, 129, 2, 2, 16, 43),  // 43 divides 129
      make("path_L129_beta_near2", P, 1, 129, 2, 1, 16, 16, BetaDraw::NearTwo),
      make("path_L129_beta_near1", P, 1, 129, 2, 1, 16, 16, BetaDraw::NearOne),
      make("path_L1000_b64", P, 1, 1000, 2, 1, 16, 64),
      make("path_L1000_b40", P, 1, 1000, 1, 1, 16, 40),  // 40 divides 1000
      // d = 64, full 64-row blocks: the register-blocked products at every SIMD width.
      make("path_L129_b64_d64", P, 1, 129, 2, 1, 64, 64),
      make("path_value_dim_offset", P, 1, 23, 2, 1, 12, 5, BetaDraw::Mixed, 20, 300),
      make("pathfox_L7_b3_gqa", F, 2, 7, 4, 2, 8, 3),
      make("pathfox_L129_b32", F, 1, 129, 2, 1, 16, 32),
      make("pathfox_L1000_b64", F, 1, 1000, 1, 1, 16, 64),
      make("pathfox_offset", F, 1, 40, 2, 2, 8, 6, BetaDraw::Mixed, 0, 1000),
  };
  PathCase c = make("path_sink", P, 1, 33, 2, 1, 16, 8);
  c.spec.numerics.sink = true;
  all.push_back(c);
  c = make("pathfox_off_by_one", F, 1, 33, 2, 1, 16, 8);
  c.spec.numerics.off_by_one = true;
  all.push_back(c);
  c = make("path_softcap", P, 1, 33, 2, 1, 16, 8);
  c.spec.numerics.softcap = 3.0;
  all.push_back(c);
  c = make("pathfox_all_numerics", F, 1, 33, 4, 2, 16, 8);
  c.spec.numerics.sink = c.spec.numerics.qk_norm = true;
  c.spec.numerics.softcap = 4.0;
  all.push_back(c);
  return all;
}

class PathAttentionTest : public ::testing::TestWithParam<PathCase> {};

std::string case_name(const ::testing::TestParamInfo<PathCase>& info) { return info.param.name; }

// float64 kernel vs float64 reference: the kernel's UT transform, block folds and scan
// reorder the arithmetic of the Householder products; every intermediate is O(1) (T is
// bounded for beta in [0, 2]: team_la.hpp). Observed: <= 5e-15 relative (the largest with
// FoX at position 1000, where c ~ -100 carries its own rounding); 1e-12 leaves 200x.
TEST_P(PathAttentionTest, Forward64MatchesReference) {
  const PathProblem p = make_path_problem(GetParam());
  const Result r = run_path_reference(p), k = run_path<double>(p, false);
  EXPECT_LT(max_abs_diff(k.o, r.o), 1e-12 * std::max(1.0, max_abs(r.o)));
  EXPECT_LT(max_abs_diff(k.lse, r.lse), 1e-12 * std::max(1.0, max_abs(r.lse)));
}

// float32 kernel: inputs rounded to float32, then chains of up to L / B transitions and
// the in-block triangular solve in float32. Observed: <= 1e-6 relative without FoX,
// 4e-6 with FoX gates c ~ -100 (their float32 rounding, 8e-6 absolute, enters every
// logit). 1e-4 leaves 25x; a wrong product order or mask gives O(1) errors.
TEST_P(PathAttentionTest, Forward32MatchesReference) {
  const PathProblem p = make_path_problem(GetParam());
  const Result r = run_path_reference(p), k = run_path<float>(p, false);
  EXPECT_LT(max_abs_diff(k.o, r.o), 1e-4 * std::max(1.0, max_abs(r.o)));
  EXPECT_LT(max_abs_diff(k.lse, r.lse), 1e-4 * std::max(1.0, max_abs(r.lse)));
}

// Every gradient against the exact directional derivative of the reference along a random
// direction u: |<u, g_kernel> - d/de f(x + e u)| <= 1e-9 |u| |g| (both float64 sums of
// O(L^2 d) terms; the bound sits far above their rounding, far below any real error).
TEST_P(PathAttentionTest, GradientsMatchDualReference) {
  PathProblem p = make_path_problem(GetParam());
  const Result k = run_path<double>(p, true);
  std::mt19937_64 rng(GetParam().seed + 17);
  std::normal_distribution<double> n01;
  for (const auto& name : path_input_names(p)) {
    SCOPED_TRACE("input " + name);
    const auto& g = k.grad.at(name);
    ASSERT_EQ(g.size(), path_input_size(p, name));
    std::vector<double> u(g.size());
    double uu = 0, gg = 0, ug = 0;
    for (size_t i = 0; i < u.size(); ++i) {
      u[i] = n01(rng);
      uu += u[i] * u[i];
      gg += g[i] * g[i];
      ug += u[i] * g[i];
    }
    const double ref = path_reference_directional(p, name, u);
    EXPECT_NEAR(ug, ref, 1e-9 * std::sqrt(uu * gg) + 1e-12);
  }
}

// Central finite differences of the float64 reference loss <dout, o>, element by element
// (every element of small inputs, a sample at L = 129; L = 1000 is left to the exact dual
// check above, each reference call there costs O(L^2 d)). Step 1e-5: truncation
// O(h^2 f''') ~ 1e-10, rounding ~1e-16 / 1e-5 ~ 1e-11; tolerance 1e-6 relative.
TEST_P(PathAttentionTest, GradientsMatchFiniteDifferences) {
  if (GetParam().L >= 1000) GTEST_SKIP() << "covered by GradientsMatchDualReference";
  PathProblem p = make_path_problem(GetParam());
  const Result k = run_path<double>(p, true);
  const size_t cap = p.c.L > 100 ? 8 : 40;
  std::mt19937_64 rng(GetParam().seed + 5);
  for (const auto& name : path_input_names(p)) {
    SCOPED_TRACE("input " + name);
    const size_t n = path_input_size(p, name);
    const size_t samples = std::min(n, cap);
    for (size_t s = 0; s < samples; ++s) {
      const size_t i = samples == n ? s : rng() % n;
      double* x = path_input_data(p, name) + i;
      const double x0 = *x, h = 1e-5;
      *x = x0 + h;
      const double lp = path_reference_loss(p);
      *x = x0 - h;
      const double lm = path_reference_loss(p);
      *x = x0;
      const double fd = (lp - lm) / (2 * h), g = k.grad.at(name)[i];
      EXPECT_NEAR(g, fd, 1e-6 * std::max(1.0, std::abs(fd))) << "element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PaTH, PathAttentionTest, ::testing::ValuesIn(cases()), case_name);

// The reference itself: the carried vector equals the explicit matrix product per (i, j).
TEST(PathReference, CarriedVectorEqualsExplicitProducts) {
  const PathProblem p = make_path_problem(make("ref", Scheme::PaTH, 1, 9, 2, 1, 6, 4));
  const auto in = to_ref<double>(p, "", {});
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 9; ++i) {
      std::vector<double> x(&in.q(0, i, h, 0), &in.q(0, i, h, 0) + 6);
      for (int j = i; j >= 0; --j) {
        double dot = 0;
        for (int c = 0; c < 6; ++c) dot += in.k(0, j, 0, c) * x[c];
        EXPECT_NEAR(dot, ref::path_logit_explicit(in, 0, h, 0, i, j), 1e-12);
        ref::apply_householder(in.w, in.beta, 0, j, 0, x);
      }
    }
}

}  // namespace
}  // namespace lcr::test::pathtest
