// PaTH's layer parameterisation (kernels/schemes/path/params.hpp) against its float64
// definition (reference/path.hpp): w = L2norm(conv3(u)) with and without SiLU and a
// prefix, beta = min(2 sigmoid(x), kBetaMax); backward against dual numbers and finite
// differences; the zero-norm error.
#include <gtest/gtest.h>

#include "kernels/schemes/path/params.hpp"
#include "kernels/test_path_support.hpp"

namespace lcr::test::pathtest {
namespace {

struct ConvProblem {
  H4<double> u, prefix, dw;
  H3<double> weight;
  bool silu;
};

ConvProblem conv_problem(int B, int L, int Hkv, int d, bool prefix, bool silu, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01;
  ConvProblem p{H4<double>("u", B, L, Hkv, d), H4<double>("prefix", prefix ? B : 0, 2, Hkv, d),
                H4<double>("dw", B, L, Hkv, d), H3<double>("weight", Hkv, d, 3), silu};
  for (auto* v : {&p.u, &p.prefix, &p.dw})
    for (size_t i = 0; i < v->span(); ++i) v->data()[i] = n01(rng);
  for (size_t i = 0; i < p.weight.span(); ++i) p.weight.data()[i] = 0.5 * n01(rng);
  return p;
}

// <dw, w> of the reference on scalar S, with tangent u on input `name`.
template <class S>
S conv_loss(const ConvProblem& p, const std::string& name, const std::vector<double>& t) {
  auto lift4 = [&](const H4<double>& x, const std::string& nm) {
    View4<S, HostSpace> y(nm, x.layout());
    for (size_t i = 0; i < x.span(); ++i) {
      if constexpr (std::is_same_v<S, ref::Dual>)
        y.data()[i] = ref::Dual(x.data()[i], nm == name ? t[i] : 0);
      else
        y.data()[i] = x.data()[i];
    }
    return y;
  };
  View3<S, HostSpace> wt("weight", p.weight.layout());
  for (size_t i = 0; i < p.weight.span(); ++i) {
    if constexpr (std::is_same_v<S, ref::Dual>)
      wt.data()[i] = ref::Dual(p.weight.data()[i], name == "weight" ? t[i] : 0);
    else
      wt.data()[i] = p.weight.data()[i];
  }
  const auto w = ref::path_w(lift4(p.u, "u"), wt, lift4(p.prefix, "prefix"), p.silu);
  S loss = S(0);
  for (size_t i = 0; i < w.span(); ++i) loss += p.dw.data()[i] * w.data()[i];
  return loss;
}

void check_conv(bool prefix, bool silu) {
  SCOPED_TRACE(std::string("prefix ") + (prefix ? "yes" : "no") + ", silu " +
               (silu ? "yes" : "no"));
  ConvProblem p = conv_problem(2, 9, 2, 5, prefix, silu, 7 + prefix + 2 * silu);
  const path::WConv opt{silu};
  const View4<double> u = to_device<double>(p.u, "u"), pre = to_device<double>(p.prefix, "pre");
  const View3<double> wt = to_device<double>(p.weight, "weight");
  View4<double> w("w", 2, 9, 2, 5);
  path::w_forward<double>(opt, u, wt, pre, w);
  // forward: the definition, and unit rows
  const auto w_ref = ref::path_w<double>(p.u, p.weight, p.prefix, silu);
  const auto wk = flat(w);
  for (size_t i = 0; i < wk.size(); ++i) EXPECT_NEAR(wk[i], w_ref.data()[i], 1e-14);
  for (size_t r = 0; r < wk.size() / 5; ++r) {
    double ss = 0;
    for (int c = 0; c < 5; ++c) ss += wk[r * 5 + c] * wk[r * 5 + c];
    EXPECT_NEAR(ss, 1.0, 1e-14);
  }
  // backward: du, dweight, dprefix
  View4<double> du("du", 2, 9, 2, 5), dpre("dpre", prefix ? 2 : 0, 2, 2, 5);
  View3<double> dwt("dweight", 2, 5, 3);
  path::w_backward<double>(opt, u, wt, pre, to_device<double>(p.dw, "dw"), du, dwt, dpre);
  std::map<std::string, std::vector<double>> grad{{"u", flat(du)}, {"weight", flat(dwt)}};
  if (prefix) grad["prefix"] = flat(dpre);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n01;
  for (const auto& [name, g] : grad) {
    SCOPED_TRACE("input " + name);
    std::vector<double> t(g.size());
    double tg = 0;
    for (size_t i = 0; i < t.size(); ++i) tg += (t[i] = n01(rng)) * g[i];
    EXPECT_NEAR(tg, conv_loss<ref::Dual>(p, name, t).t, 1e-12 * (1 + std::abs(tg)));
    double* base = name == "u" ? p.u.data() : name == "weight" ? p.weight.data() : p.prefix.data();
    for (size_t i = 0; i < g.size(); i += 7) {  // finite differences, step 1e-6
      const double x0 = base[i];
      base[i] = x0 + 1e-6;
      const double lp = conv_loss<double>(p, "", {});
      base[i] = x0 - 1e-6;
      const double lm = conv_loss<double>(p, "", {});
      base[i] = x0;
      EXPECT_NEAR(g[i], (lp - lm) / 2e-6, 1e-7 * std::max(1.0, std::abs(g[i])));
    }
  }
}

TEST(PathParams, WConvNormMatchesDefinitionAndGradients) {
  check_conv(false, false);
  check_conv(true, false);
  check_conv(true, true);
}

// The ring's prefix: convolving a whole sequence equals convolving its second half with
// the first half's last two rows as prefix.
TEST(PathParams, WConvPrefixContinuesTheSequence) {
  ConvProblem p = conv_problem(1, 12, 1, 4, false, true, 9);
  const View3<double> wt = to_device<double>(p.weight, "weight");
  View4<double> whole("whole", 1, 12, 1, 4), half("half", 1, 7, 1, 4);
  path::w_forward<double>({true}, to_device<double>(p.u, "u"), wt, {}, whole);
  H4<double> tail("tail", 1, 7, 1, 4), pre("pre", 1, 2, 1, 4);
  for (int c = 0; c < 4; ++c) {
    for (int t = 0; t < 7; ++t) tail(0, t, 0, c) = p.u(0, 5 + t, 0, c);
    for (int t = 0; t < 2; ++t) pre(0, t, 0, c) = p.u(0, 3 + t, 0, c);
  }
  path::w_forward<double>({true}, to_device<double>(tail, "tail"), wt,
                          to_device<double>(pre, "pre"), half);
  const auto a = flat(whole), b = flat(half);
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(a[5 * 4 + i], b[i]);
}

TEST(PathParams, ZeroNormConvOutputIsAnError) {
  ConvProblem p = conv_problem(1, 6, 2, 4, false, false, 1);
  for (int c = 0; c < 4; ++c)
    for (int t = 0; t < 6; ++t) p.u(0, t, 1, c) = 0.0;  // KV head 1: y = 0 everywhere
  View4<double> w("w", 1, 6, 2, 4);
  try {
    path::w_forward<double>({}, to_device<double>(p.u, "u"), to_device<double>(p.weight, "wt"), {},
                            w);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[0, 0, 1] has norm 0"), std::string::npos) << e.what();
  }
  View4<double> bad("bad", 1, 6, 2, 3);
  EXPECT_THROW(path::w_forward<double>({}, to_device<double>(p.u, "u"),
                                       to_device<double>(p.weight, "wt"), {}, bad),
               Error);
}

// beta = min(2 sigmoid(x), 2 - 2^-10): the definition, strictly below 2 in float32 and
// float64 however large x is, derivative 2 s (1 - s) below the clamp and 0 above it.
TEST(PathParams, BetaStaysBelowTwo) {
  const std::vector<double> xs{-800, -20, -3, -0.5, 0, 0.7, 4, 7.5, 17, 40, 800};
  H3<double> x("x", 1, int(xs.size()), 1), dbeta("dbeta", 1, int(xs.size()), 1);
  for (size_t i = 0; i < xs.size(); ++i) x(0, i, 0) = xs[i], dbeta(0, i, 0) = 1.0 + 0.1 * i;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    View3<T> beta("beta", 1, xs.size(), 1), dx("dx", 1, xs.size(), 1);
    const auto xd = to_device<T>(x, "x");
    path::beta_forward<T>(xd, beta);
    path::beta_backward<T>(xd, to_device<T>(dbeta, "db"), dx);
    return std::make_pair(flat(beta), flat(dx));
  };
  const auto [b64, dx64] = run(double());
  const auto [b32, dx32] = run(float());
  for (size_t i = 0; i < xs.size(); ++i) {
    SCOPED_TRACE("x = " + std::to_string(xs[i]));
    EXPECT_LT(b64[i], 2.0);
    EXPECT_LT(b32[i], 2.0);
    EXPECT_GE(b64[i], 0.0);
    EXPECT_NEAR(b64[i], ref::path_beta(xs[i]), 1e-15);
    EXPECT_NEAR(b32[i], b64[i], 1e-6);
    const double s = 1 / (1 + std::exp(-xs[i]));
    const double want = 2 * s < path::kBetaMax ? dbeta(0, i, 0) * 2 * s * (1 - s) : 0.0;
    EXPECT_NEAR(dx64[i], want, 1e-15);
    EXPECT_NEAR(dx32[i], want, 1e-6);
  }
  EXPECT_EQ(b64.back(), path::kBetaMax);
  EXPECT_EQ(b32.back(), float(path::kBetaMax));
}

}  // namespace
}  // namespace lcr::test::pathtest
