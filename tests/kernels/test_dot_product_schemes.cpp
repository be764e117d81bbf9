// NoPE, ALiBi and FoX (the schemes with no lanes) and the numerics options, through the
// shared attention suite.
#include <cmath>
#include <vector>

#include "kernels/attention/spec.hpp"
#include "kernels/attention_scheme_tests.hpp"

namespace lcr::test {
namespace {

std::vector<NamedCase> cases() {
  std::vector<NamedCase> all;
  auto add = [&](const std::string& prefix, AttentionSpec s) {
    for (auto& c : standard_cases(prefix, s)) all.push_back(c);
  };
  AttentionSpec s;
  s.scheme = Scheme::NoPE;
  add("nope", s);
  s.scheme = Scheme::ALiBi;
  add("alibi", s);
  s.scheme = Scheme::FoX;
  add("fox", s);
  // ALiBi with H not a power of two, where the two slope conventions differ: 6 heads over
  // 3 KV heads at the suite's odd sizes.
  for (auto slopes : {AlibiSlopes::Published, AlibiSlopes::Geometric}) {
    AttentionSpec a;
    a.scheme = Scheme::ALiBi;
    a.alibi.slopes = slopes;
    for (auto c :
         standard_cases(slopes == AlibiSlopes::Published ? "alibi_h6" : "alibi_h6_geometric", a)) {
      if (c.c.Lq > 200) continue;  // the L = 1000 shape adds nothing the H = 2 cases lack
      c.c.spec.heads = 6;
      c.c.spec.kv_heads = 3;
      all.push_back(c);
    }
  }
  s.scheme = Scheme::NoPE;
  s.numerics.sink = true;
  add("nope_sink", s);
  s.numerics = {};
  s.numerics.off_by_one = true;
  add("nope_off_by_one", s);
  s.numerics = {};
  s.numerics.softcap = 5.0;
  add("nope_softcap", s);
  s.numerics = {};
  s.numerics.qk_norm = true;
  add("nope_qknorm", s);
  s.scheme = Scheme::ALiBi;
  s.numerics = {};
  s.numerics.qk_norm = s.numerics.sink = true;
  s.numerics.softcap = 4.0;
  add("alibi_all_numerics", s);
  // The GPU form: every option through its transposed backward (FoX: the bias lanes).
  for (const auto& c : in_gpu_form(standard_cases("alibi_all_numerics", s))) all.push_back(c);
  {
    AttentionSpec o = s;
    o.numerics.sink = false;
    o.numerics.off_by_one = true;
    for (const auto& c : in_gpu_form(standard_cases("alibi_off_by_one", o))) all.push_back(c);
  }
  // The CPU form's two-pass backward (BackwardQ: dQ and dbias_q by query tile).
  for (const auto& c : in_two_pass(standard_cases("alibi_all_numerics", s))) all.push_back(c);
  s.scheme = Scheme::FoX;
  s.numerics = {};
  for (const auto& c : in_gpu_form(standard_cases("fox", s))) all.push_back(c);
  for (const auto& c : in_two_pass(standard_cases("fox", s))) all.push_back(c);
  return all;
}

INSTANTIATE_TEST_SUITE_P(DotProduct, AttentionSchemeTest, ::testing::ValuesIn(cases()), case_name);

// The ALiBi authors' slopes, written as their published code computes them (a recursion on
// the closest power of two), for H = 1..16.
std::vector<double> published_alibi_slopes(int n) {
  auto power_of_2 = [](int m) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(double(m)) - 3)));
    std::vector<double> v;
    for (int i = 0; i < m; ++i) v.push_back(start * std::pow(start, i));
    return v;
  };
  const double l = std::log2(double(n));
  if (l == std::floor(l)) return power_of_2(n);
  const int closest = 1 << int(std::floor(l));
  std::vector<double> v = power_of_2(closest);
  const std::vector<double> twice = published_alibi_slopes(2 * closest);
  for (size_t i = 0; i < twice.size() && int(v.size()) < n; i += 2) v.push_back(twice[i]);
  return v;
}

TEST(AlibiSlopes, PublishedMatchesTheAuthorsRecipe) {
  for (int H = 1; H <= 16; ++H) {
    const std::vector<double> want = published_alibi_slopes(H);
    ASSERT_EQ(int(want.size()), H);
    for (int h = 0; h < H; ++h) {
      // The recipe's pow chain and the closed form differ by a few ulps at most.
      EXPECT_NEAR(alibi_slope(h, H, AlibiSlopes::Published), want[h], 1e-15)
          << "H " << H << " h " << h;
      EXPECT_NEAR(alibi_slope(h, H, AlibiSlopes::Geometric), std::exp2(-8.0 * (h + 1) / H), 1e-15);
    }
  }
  // H = 12 (the 125M class): 2^-1 .. 2^-8 in steps of 1, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  EXPECT_DOUBLE_EQ(alibi_slope(8, 12, AlibiSlopes::Published), std::exp2(-0.5));
  EXPECT_DOUBLE_EQ(alibi_slope(11, 12, AlibiSlopes::Published), std::exp2(-3.5));
  EXPECT_NE(alibi_slope(11, 12, AlibiSlopes::Published),
            alibi_slope(11, 12, AlibiSlopes::Geometric));
}

}  // namespace
}  // namespace lcr::test
