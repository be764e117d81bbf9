// GOAT and GOAT2D: the shared attention suite (kernel vs the float64 definition, every
// gradient vs dual numbers and finite differences), plus GOAT-specific checks: the
// sqrt(d_h/d_c) lane scaling, the 2-D prior written out by hand, positions near 1e7,
// option validation, and the host-side prior statistics and initialisation.
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "kernels/attention_scheme_tests.hpp"
#include "kernels/base/error.hpp"
#include "kernels/schemes/goat/goat.hpp"

namespace lcr::test {
namespace {

constexpr double kBase = 10000.0;

AttentionSpec goat_spec(Scheme scheme = Scheme::GOAT) {
  AttentionSpec s;
  s.scheme = scheme;
  s.goat.modes = 4;  // d_p = 10: every standard head width (16..128, 24) keeps d_c > 0
  return s;
}

// The standard cases except the full 1000 x 1000 square, replaced by 41 queries at the
// end of 400 keys (positions 600..999, 7 key tiles, GQA, d = 128). The suite re-runs the
// O(Lq Lk) reference ~4 times per differentiable input (finite differences) and GOAT has
// 10 (q, k, v and 7 parameter slices), so the square costs minutes per variant on one
// core. It exercises the tiled SDPA kernel, which the DotProduct suite covers; GOAT's
// lanes are per-position maps, checked here at the same positions and width.
std::vector<NamedCase> goat_cases(const std::string& prefix, const AttentionSpec& base) {
  std::vector<NamedCase> out;
  for (auto& c : standard_cases(prefix, base))
    if (c.name != prefix + "_L1000_d128_gqa") out.push_back(c);
  NamedCase nc{prefix + "_keys400_to_pos999_d128_gqa", Case{}};
  nc.c.spec = base;
  nc.c.spec.heads = 2;
  nc.c.spec.kv_heads = 1;
  nc.c.spec.head_dim = 128;
  nc.c.Lq = 41;
  nc.c.Lk = 400;
  nc.c.q_pos0 = 959;
  nc.c.k_pos0 = 600;
  nc.c.seed = std::hash<std::string>{}(nc.name);
  out.push_back(nc);
  return out;
}

std::vector<NamedCase> suite_cases() {
  std::vector<NamedCase> all;
  auto add = [&](const std::string& prefix, const AttentionSpec& s) {
    for (auto& c : goat_cases(prefix, s)) all.push_back(c);
  };
  add("goat", goat_spec());
  // The variants use a smaller key-bias MLP (4 hidden units, 2 frequency pairs): the
  // reference evaluates the MLP per logit, and its gradients are checked at full size above.
  AttentionSpec s = goat_spec();
  s.goat.mlp_hidden = 4;
  s.goat.feature_freqs = 2;
  s.numerics.sink = s.numerics.qk_norm = true;  // standard_cases supplies the GQA shapes
  add("goat_sink_qknorm", s);
  s.numerics = {};
  s.scheme = Scheme::GOAT2D;
  s.goat.grid_width = 5;
  add("goat2d_w5", s);
  // The authors' recipe (per-KV-head alpha, beta; one shared MLP with per-head gains; the
  // softplus recency slope) with GQA from standard_cases; then their GPT recipe (R = 0)
  // with the query gate.
  s = goat_spec();
  s.goat.mlp_hidden = 4;
  s.goat.feature_freqs = 2;
  s.goat.recipe = GoatRecipe::Authors;
  add("goat_authors", s);
  s.goat.modes = 0;
  s.goat.query_gate = true;
  add("goat_authors_r0_gate", s);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Goat, AttentionSchemeTest, ::testing::ValuesIn(suite_cases()), case_name);

TEST(Goat, StandardCasesKeepContentDims) {
  for (const auto& nc : suite_cases()) {
    SCOPED_TRACE(nc.name);
    EXPECT_GT(input_qk_dim(nc.c.spec), 0);
    EXPECT_EQ(input_qk_dim(nc.c.spec), goat::content_dim(nc.c.spec));
    EXPECT_NO_THROW(validate(nc.c.spec));
  }
}

void set_param(Problem& p, const std::string& name, double value) {
  const auto& e = p.params.layout.at(name);
  for (int64_t i = 0; i < e.size(); ++i) p.params.data(e.offset + i) = value;
}

void zero_goat_params(Problem& p) {
  for (const char* n : {"goat.alpha", "goat.beta", "goat.lambda", "goat.bump", "goat.mlp_w1",
                        "goat.mlp_b1", "goat.mlp_w2"})
    set_param(p, n, 0.0);
}

// With alpha = beta = 0 and u = 0 the prior lanes contribute nothing and GOAT must be
// plain attention on (q_c, k_c) with scale 1/sqrt(d_c): this checks the sqrt(d_h/d_c)
// content scaling of the query lanes. Both sides are float64 kernels over the same data;
// only the lane products' rounding differs (1e-12).
TEST(Goat, ZeroPriorIsPlainAttentionOnContentDims) {
  Case gc;
  gc.spec = goat_spec();
  gc.spec.heads = 4;
  gc.spec.kv_heads = 2;
  gc.spec.head_dim = 32;
  gc.B = 2;
  gc.Lq = 23;
  gc.Lk = 31;
  gc.q_pos0 = 8;
  Problem g = make_problem(gc);
  zero_goat_params(g);

  Case nc = gc;
  nc.spec = AttentionSpec{};
  nc.spec.scheme = Scheme::NoPE;
  nc.spec.heads = 4;
  nc.spec.kv_heads = 2;
  nc.spec.head_dim = goat::content_dim(gc.spec);  // 22: NoPE's scale is 1/sqrt(d_c)
  nc.spec.value_dim = gc.spec.v_dim();
  Problem n = make_problem(nc);
  n.q = g.q;
  n.k = g.k;
  n.v = g.v;
  n.dout = g.dout;

  const Result rg = run_kokkos<double>(g, true), rn = run_kokkos<double>(n, true);
  EXPECT_LT(max_abs_diff(rg.o, rn.o), 1e-12);
  EXPECT_LT(max_abs_diff(rg.lse, rn.lse), 1e-12);
  for (const char* name : {"q", "k", "v"}) {
    SCOPED_TRACE(name);
    EXPECT_LT(max_abs_diff(rg.grad.at(name), rn.grad.at(name)), 1e-12);
  }
}

// GOAT2D against the two-axis sum written out by hand. One query at p = 13 on a width-4
// grid, (y, x) = (3, 1); keys at p = 0..13; R = 4 modes, R_y = R_x = 2, so each axis has
// the ladder {1, 1/B}. With v the identity, o_j is the probability of key j and
// o_j = exp(s_j - lse) recovers every logit s_j = log(o_j) + lse exactly (float64).
TEST(Goat, Goat2DEqualsExplicitTwoAxisSum) {
  Case c;
  c.spec = goat_spec(Scheme::GOAT2D);
  c.spec.goat.grid_width = 4;
  c.spec.head_dim = 16;  // d_c = 6
  c.spec.value_dim = 14;
  c.Lq = 1;
  c.Lk = 14;
  c.q_pos0 = 13;
  Problem p = make_problem(c);
  zero_goat_params(p);
  const double alpha[4] = {0.7, -0.4, 0.3, 1.1}, beta[4] = {-0.5, 0.9, 0.6, -0.2};
  for (int r = 0; r < 4; ++r) {
    p.params.v2("goat.alpha")(0, r) = alpha[r];
    p.params.v2("goat.beta")(0, r) = beta[r];
  }
  set_param(p, "goat.lambda", 0.05);
  set_param(p, "goat.bump", 0.8);
  for (int j = 0; j < 14; ++j)
    for (int m = 0; m < 14; ++m) p.v(0, j, 0, m) = j == m ? 1.0 : 0.0;

  const Result r = run_kokkos<double>(p, false);
  for (int j = 0; j < 14; ++j) {
    const double dy = 3 - j / 4, dx = 1 - j % 4;
    double content = 0;
    for (int ch = 0; ch < 6; ++ch) content += p.q(0, 0, 0, ch) * p.k(0, j, 0, ch);
    const double want = content / std::sqrt(6.0)                            //
                        + alpha[0] * std::cos(dy) + beta[0] * std::sin(dy)  // y, w = 1
                        + alpha[1] * std::cos(dy / kBase) + beta[1] * std::sin(dy / kBase)  //
                        + alpha[2] * std::cos(dx) + beta[2] * std::sin(dx)  // x, w = 1
                        + alpha[3] * std::cos(dx / kBase) + beta[3] * std::sin(dx / kBase)  //
                        + 0.05 * j + (j == 0 ? 0.8 : 0.0);                                  // u(j)
    EXPECT_NEAR(std::log(r.o[j]) + r.lse[0], want, 1e-12) << "key " << j;
  }
}

// Positions near 1e7 (a long context's far end): the lanes form cos/sin(w p) in double,
// so the kernel still matches the definition cos(w (i - j)). In float32 an angle of 1e7
// rad would be off by up to 0.5 rad. The u lane holds the absolute value u(j) and float32
// keeps ~7 digits of it, so u must stay O(1): lambda = 1e-8 (lambda j ~ 0.1) and
// L_train = 2e7 (the MLP feature j / L_train ~ 0.5; with L_train = 1024 it would be ~1e4).
// Tolerances: float64 1e-7 (the angle w p carries ~1e7 * 1.1e-16 = 1e-9 rad of rounding,
// times |alpha| + |beta| ~ 1 per mode, into logits and through the softmax), float32 as in
// the shared suite.
TEST(Goat, FarPositionsMatchReference) {
  for (Scheme scheme : {Scheme::GOAT, Scheme::GOAT2D}) {
    Case c;
    c.spec = goat_spec(scheme);
    c.spec.goat.grid_width = 1000;
    c.spec.goat.train_len = 20'000'000;
    c.spec.heads = 2;
    c.spec.head_dim = 32;
    c.Lq = 9;
    c.Lk = 40;
    c.q_pos0 = 10'000'000;
    c.k_pos0 = 10'000'000 - 31;
    c.seed = 77;
    Problem p = make_problem(c);
    set_param(p, "goat.lambda", 1e-8);
    const Result ref = run_reference(p);
    const Result k64 = run_kokkos<double>(p, false), k32 = run_kokkos<float>(p, false);
    SCOPED_TRACE(scheme_name(scheme));
    EXPECT_LT(max_abs_diff(k64.o, ref.o), 1e-7);
    EXPECT_LT(max_abs_diff(k64.lse, ref.lse), 1e-7);
    EXPECT_LT(max_abs_diff(k32.o, ref.o), 2e-4 * std::max(1.0, max_abs(ref.o)));
    EXPECT_LT(max_abs_diff(k32.lse, ref.lse), 2e-4 * std::max(1.0, max_abs(ref.lse)));
  }
}

// ---------------------------------------------------------------- validation

void expect_error_naming(const AttentionSpec& s, const std::vector<std::string>& words) {
  try {
    validate(s);
    ADD_FAILURE() << "validate accepted a bad spec";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << msg;
  }
}

TEST(Goat, ValidationNamesTheOption) {
  AttentionSpec s = goat_spec();
  s.head_dim = 10;  // d_p = 10 leaves d_c = 0
  expect_error_naming(s, {"head_dim 10", "modes 4", "d_c = 0", "goat.modes"});
  s.head_dim = 8;
  expect_error_naming(s, {"d_c = -2"});
  s = goat_spec();
  s.goat.modes = -1;
  expect_error_naming(s, {"goat.modes"});
  s.goat.modes = 0;  // no relative prior (the authors' GPT recipe)
  EXPECT_NO_THROW(validate(s));
  s = goat_spec();
  s.goat.mlp_hidden = 0;
  expect_error_naming(s, {"goat.mlp_hidden"});
  s = goat_spec();
  s.goat.feature_freqs = 0;
  expect_error_naming(s, {"goat.feature_freqs"});
  s = goat_spec();
  s.goat.train_len = 0;
  expect_error_naming(s, {"goat.train_len"});
  s = goat_spec();
  s.goat.base = 1.0;
  expect_error_naming(s, {"goat.base"});

  s = goat_spec(Scheme::GOAT2D);  // grid_width defaults to 0
  expect_error_naming(s, {"goat.grid_width"});
  s.goat.grid_width = 8;
  EXPECT_NO_THROW(validate(s));
  s.goat.y_modes = 4;  // == modes: no x modes left
  expect_error_naming(s, {"goat.y_modes"});
  s.goat.y_modes = -1;
  expect_error_naming(s, {"goat.y_modes"});
  s.goat.y_modes = 0;
  s.goat.modes = 1;
  expect_error_naming(s, {"goat.modes"});
  s = goat_spec();  // 1-D GOAT ignores the grid options
  s.goat.grid_width = 0;
  s.goat.y_modes = 9;
  EXPECT_NO_THROW(validate(s));
}

TEST(Goat, ParameterLayoutFollowsGqaConvention) {
  AttentionSpec s = goat_spec();
  s.heads = 6;
  s.kv_heads = 2;
  s.goat.mlp_hidden = 5;
  s.goat.feature_freqs = 3;
  const ParamLayout l = attention_param_layout(s);
  EXPECT_EQ(l.at("goat.alpha").shape, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(l.at("goat.beta").shape, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(l.at("goat.lambda").shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(l.at("goat.bump").shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(l.at("goat.mlp_w1").shape, (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(l.at("goat.mlp_b1").shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(l.at("goat.mlp_w2").shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(goat::lanes_width(s), s.head_dim);
  EXPECT_DOUBLE_EQ(goat::sdpa_scale(s), 1.0 / 8.0);
}

// ---------------------------------------------------------------- host statistics

ParamSet<double, HostSpace> random_params(const AttentionSpec& s, uint64_t seed) {
  ParamSet<double, HostSpace> P(attention_param_layout(s), "goat_params");
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01(0.0, 0.5);
  for (int64_t i = 0; i < P.layout.total(); ++i) P.data(i) = n01(rng);
  return P;
}

// Statistics against the formulas written out here with the ladders spelled explicitly
// (R = 3: w = 1, 1/100, 1/B; F = 2: f = 1, 1/B). Only rounding differs: 1e-12.
TEST(Goat, PriorStatisticsMatchDirectComputation) {
  AttentionSpec s = goat_spec();
  s.heads = 2;
  s.goat.modes = 3;
  s.goat.feature_freqs = 2;
  s.goat.mlp_hidden = 3;
  s.goat.train_len = 512;
  const auto P = random_params(s, 3);
  const double w[3] = {1.0, 1e-2, 1e-4};
  const std::vector<int64_t> lags{0, 1, 5, 100, 4096, 123456};
  const auto prior = goat::relative_prior(s, P, 1, lags);
  const auto al = P.v2("goat.alpha"), be = P.v2("goat.beta");
  for (size_t n = 0; n < lags.size(); ++n) {
    double want = 0;
    for (int r = 0; r < 3; ++r)
      want += al(1, r) * std::cos(w[r] * lags[n]) + be(1, r) * std::sin(w[r] * lags[n]);
    EXPECT_NEAR(prior[n], want, 1e-12) << "lag " << lags[n];
  }
  const auto amp = goat::mode_amplitudes(s, P, 0);
  ASSERT_EQ(amp.size(), 3u);
  for (int r = 0; r < 3; ++r)
    EXPECT_NEAR(amp[r], std::sqrt(al(0, r) * al(0, r) + be(0, r) * be(0, r)), 1e-15);

  const std::vector<int64_t> pos{0, 1, 2, 511, 512, 70000};
  const auto u = goat::key_bias(s, P, 0, pos);
  const auto w1 = P.v3("goat.mlp_w1");
  for (size_t n = 0; n < pos.size(); ++n) {
    const double j = double(pos[n]);
    const double phi[6] = {std::sin(j),         std::cos(j), std::sin(j / kBase),
                           std::cos(j / kBase), j / 512.0,   std::log(1 + j) / std::log(513.0)};
    double g = 0;
    for (int h = 0; h < 3; ++h) {
      double pre = P.v2("goat.mlp_b1")(0, h);
      for (int m = 0; m < 6; ++m) pre += w1(0, h, m) * phi[m];
      g += P.v2("goat.mlp_w2")(0, h) * pre / (1 + std::exp(-pre));
    }
    const double want = P.v1("goat.lambda")(0) * j + g + (pos[n] == 0 ? P.v1("goat.bump")(0) : 0.0);
    EXPECT_NEAR(u[n], want, 1e-12) << "position " << pos[n];
  }
}

// The 2-D map: modes 0..R_y-1 see dy, the rest dx (R = 5, y_modes = 2: y ladder {1, 1/B},
// x ladder {1, 1/100, 1/B}); relative_prior of a 2-D spec is the map at (l / W, l % W).
TEST(Goat, PriorStatistics2D) {
  AttentionSpec s = goat_spec(Scheme::GOAT2D);
  s.goat.modes = 5;
  s.goat.y_modes = 2;
  s.goat.grid_width = 7;
  s.head_dim = 32;
  const auto P = random_params(s, 4);
  const auto al = P.v2("goat.alpha"), be = P.v2("goat.beta");
  const double w[5] = {1.0, 1e-4, 1.0, 1e-2, 1e-4};
  auto direct = [&](double dy, double dx) {
    double acc = 0;
    for (int r = 0; r < 5; ++r) {
      const double d = r < 2 ? dy : dx;
      acc += al(0, r) * std::cos(w[r] * d) + be(0, r) * std::sin(w[r] * d);
    }
    return acc;
  };
  const std::vector<int64_t> dys{-3, 0, 2}, dxs{-6, -1, 0, 4};
  const auto map = goat::relative_prior_2d(s, P, 0, dys, dxs);
  ASSERT_EQ(map.size(), 12u);
  for (size_t a = 0; a < dys.size(); ++a)
    for (size_t b = 0; b < dxs.size(); ++b)
      EXPECT_NEAR(map[a * dxs.size() + b], direct(dys[a], dxs[b]), 1e-12);
  const std::vector<int64_t> lags{0, 3, 7, 15, 48};
  const auto prior = goat::relative_prior(s, P, 0, lags);
  for (size_t n = 0; n < lags.size(); ++n)
    EXPECT_NEAR(prior[n], direct(lags[n] / 7, lags[n] % 7), 1e-12);
  EXPECT_THROW(goat::relative_prior_2d(goat_spec(), P, 0, dys, dxs), Error);
}

// The statistics describe what the kernel computes: key_bias equals the kernel's u lane,
// and q'_rel . k'_rel / sqrt(d_h) of rows i, j equals relative_prior at lag i - j.
TEST(Goat, PriorStatisticsMatchKernelLanes) {
  AttentionSpec s = goat_spec();
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 24;
  const int Lq = 6, Lk = 300, dc = goat::content_dim(s), R = s.goat.modes;
  const int64_t q0 = 1000, k0 = 0;
  const auto host = random_params(s, 5);
  ParamSet<double> P(host.layout);
  Kokkos::deep_copy(P.data, host.data);
  View4<double> q("q", 1, Lq, 2, dc), k("k", 1, Lk, 1, dc);
  View4<double> q2("q2", 1, Lq, 2, 24), k2("k2", 1, Lk, 1, 24);
  LaneArgs<double> a{&s, &P, q, k, q0, k0};
  goat::lanes_forward<double>(a, q2, k2);
  auto hq2 = Kokkos::create_mirror_view_and_copy(HostSpace(), q2);
  auto hk2 = Kokkos::create_mirror_view_and_copy(HostSpace(), k2);

  std::vector<int64_t> pos(Lk);
  for (int j = 0; j < Lk; ++j) pos[j] = k0 + j;
  const auto u = goat::key_bias(s, host, 0, pos);
  for (int j = 0; j < Lk; ++j) EXPECT_NEAR(hk2(0, j, 0, dc + 2 * R), u[j], 1e-12) << j;

  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < Lq; ++i)
      for (int j = 0; j < Lk; j += 37) {
        double dot = 0;
        for (int c = dc; c < dc + 2 * R; ++c) dot += hq2(0, i, h, c) * hk2(0, j, 0, c);
        const double want = goat::relative_prior(s, host, h, {q0 + i - (k0 + j)})[0];
        EXPECT_NEAR(dot / std::sqrt(24.0), want, 1e-11) << "h " << h << " i " << i << " j " << j;
      }
}

// Root mean square of one slice of a host parameter set.
double slice_rms(const ParamSet<double, HostSpace>& P, const std::string& name) {
  const auto& e = P.layout.at(name);
  double ss = 0;
  for (int64_t i = 0; i < e.size(); ++i) ss += P.data(e.offset + i) * P.data(e.offset + i);
  return std::sqrt(ss / double(e.size()));
}

TEST(Goat, InitParams) {
  AttentionSpec s = goat_spec();
  s.heads = 16;
  s.kv_heads = 4;
  s.goat.modes = 8;
  s.head_dim = 64;
  s.numerics.sink = true;
  ParamSet<double, HostSpace> P(attention_param_layout(s), "p");
  Kokkos::deep_copy(P.data, 7.0);  // sentinel: init must leave non-GOAT slices alone
  goat::init_params(s, P, 42);
  auto all_equal = [&](const std::string& n, double v) {
    const auto& e = P.layout.at(n);
    for (int64_t i = 0; i < e.size(); ++i)
      if (P.data(e.offset + i) != v) return false;
    return true;
  };
  for (const char* n : {"goat.lambda", "goat.bump", "goat.mlp_b1", "goat.mlp_w2"})
    EXPECT_TRUE(all_equal(n, 0.0)) << n;
  EXPECT_TRUE(all_equal("sink", 7.0));
  auto rms = [&](const std::string& n) { return slice_rms(P, n); };
  // 128 draws per alpha/beta (rms sd ~6%), 4*16*10 per W1 (~3%): 4-sigma bands.
  EXPECT_NEAR(rms("goat.alpha"), 0.02, 0.005);
  EXPECT_NEAR(rms("goat.beta"), 0.02, 0.005);
  EXPECT_NEAR(rms("goat.mlp_w1"), 1.0 / std::sqrt(10.0), 0.03);
  // u == 0 at init.
  for (double x : goat::key_bias(s, P, 3, {0, 1, 500, 100000})) EXPECT_EQ(x, 0.0);
  // Reproducible from the seed, in float too; a different seed differs.
  ParamSet<double, HostSpace> Q(attention_param_layout(s), "q");
  goat::init_params(s, Q, 42);
  ParamSet<float, HostSpace> Qf(attention_param_layout(s), "qf");
  goat::init_params(s, Qf, 42);
  const auto& w1 = P.layout.at("goat.mlp_w1");
  for (int64_t i = 0; i < w1.offset + w1.size(); ++i) {
    EXPECT_EQ(P.data(i), Q.data(i));
    EXPECT_EQ(float(P.data(i)), Qf.data(i));
  }
  goat::init_params(s, Q, 43);
  EXPECT_NE(P.data(0), Q.data(0));
}

// At init (w2 = 0, lambda = bump = 0) the MLP must still receive a gradient through w2
// (an all-zero MLP would be stationary), and alpha / beta gradients are nonzero.
TEST(Goat, InitParamsLeaveMlpTrainable) {
  Case c;
  c.spec = goat_spec();
  c.spec.head_dim = 16;
  c.Lq = c.Lk = 12;
  Problem p = make_problem(c);
  goat::init_params(c.spec, p.params, 9);
  const Result r = run_kokkos<double>(p, true);
  EXPECT_GT(max_abs(r.grad.at("goat.mlp_w2")), 1e-6);
  EXPECT_GT(max_abs(r.grad.at("goat.alpha")), 1e-6);
  EXPECT_GT(max_abs(r.grad.at("goat.lambda")), 1e-6);
}

// The authors' recipe starts as their package seeds it: the recency slope at ALiBi's
// published slopes of Hkv heads, gain 1, bump 0, beta 0, small alpha and MLP weights; the
// query gate starts open. Non-GOAT slices are left alone.
TEST(GoatAuthors, InitParamsAsTheirPackage) {
  AttentionSpec s = goat_spec();
  s.heads = 12;
  s.kv_heads = 6;  // not a power of two: the published slopes differ from 2^(-8(h+1)/6)
  s.head_dim = 64;
  s.goat.recipe = GoatRecipe::Authors;
  s.goat.query_gate = true;
  s.numerics.sink = true;
  ParamSet<double, HostSpace> P(attention_param_layout(s), "p");
  Kokkos::deep_copy(P.data, 7.0);
  goat::init_params(s, P, 5);
  const auto slope = P.v1("goat.slope"), gain = P.v1("goat.gain"), bump = P.v1("goat.bump");
  // Published slopes for 6 heads: the 4 of 4 heads (2^-2, 2^-4, 2^-6, 2^-8), then 2^-1, 2^-3.
  const double published[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  for (int hk = 0; hk < 6; ++hk) {
    EXPECT_NEAR(std::log1p(std::exp(slope(hk))), published[hk], 1e-15 * (1 + published[hk]));
    EXPECT_EQ(gain(hk), 1.0);
    EXPECT_EQ(bump(hk), 0.0);
  }
  for (int h = 0; h < 12; ++h) {
    EXPECT_EQ(P.v1("goat.gate_scale")(h), -10.0);
    EXPECT_EQ(P.v1("goat.gate_bias")(h), 10.0);
  }
  const auto beta = P.v2("goat.kv_beta");
  for (int hk = 0; hk < 6; ++hk)
    for (int r = 0; r < 4; ++r) EXPECT_EQ(beta(hk, r), 0.0);
  auto rms = [&](const std::string& n) { return slice_rms(P, n); };
  // 24 alpha draws (rms sd ~15%), 16 x 10 W1 draws (~6%): 4-sigma bands.
  EXPECT_NEAR(rms("goat.kv_alpha"), 0.01, 0.006);
  EXPECT_NEAR(rms("goat.shared_w1"), 1e-3, 0.25e-3);
  EXPECT_EQ(P.v1("sink")(0), 7.0);
  // u(j) starts as ALiBi's recency term (the MLP's output is ~1e-6).
  const auto u = goat::key_bias(s, P, 4, {0, 10, 1000});
  EXPECT_NEAR(u[2] - u[1], 0.5 * 990, 1e-3);
}

// The authors' parameters reach the lanes through the map of goat_recipe.hpp: the same
// statistics as lcr's recipe with those parameters written out by hand (alpha, beta repeated
// over a KV head's query heads, lambda = softplus(s), the shared MLP with w2 times the gain).
TEST(GoatAuthors, StatisticsEqualLcrRecipeWithParamsWrittenOut) {
  AttentionSpec s = goat_spec();
  s.heads = 6;
  s.kv_heads = 2;
  s.goat.mlp_hidden = 3;
  s.goat.feature_freqs = 2;
  s.goat.recipe = GoatRecipe::Authors;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> n01;
  ParamSet<double, HostSpace> A(attention_param_layout(s), "a");
  for (int64_t i = 0; i < A.layout.total(); ++i) A.data(i) = 0.5 * n01(rng);
  AttentionSpec ls = s;
  ls.goat.recipe = GoatRecipe::Lcr;
  ParamSet<double, HostSpace> L(attention_param_layout(ls), "l");
  const int G = 3, N = 3, NF = 6;
  for (int h = 0; h < 6; ++h)
    for (int r = 0; r < 4; ++r) {
      L.v2("goat.alpha")(h, r) = A.v2("goat.kv_alpha")(h / G, r);
      L.v2("goat.beta")(h, r) = A.v2("goat.kv_beta")(h / G, r);
    }
  for (int hk = 0; hk < 2; ++hk) {
    L.v1("goat.lambda")(hk) = std::log1p(std::exp(A.v1("goat.slope")(hk)));
    L.v1("goat.bump")(hk) = A.v1("goat.bump")(hk);
    for (int n = 0; n < N; ++n) {
      L.v2("goat.mlp_b1")(hk, n) = A.v1("goat.shared_b1")(n);
      L.v2("goat.mlp_w2")(hk, n) = A.v1("goat.gain")(hk) * A.v1("goat.shared_w2")(n);
      for (int m = 0; m < NF; ++m) L.v3("goat.mlp_w1")(hk, n, m) = A.v2("goat.shared_w1")(n, m);
    }
  }
  const std::vector<int64_t> lags = {0, 1, 7, 129, 5000};
  for (int h = 0; h < 6; ++h) {
    const auto a = goat::relative_prior(s, A, h, lags), b = goat::relative_prior(ls, L, h, lags);
    for (size_t i = 0; i < lags.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-13);
  }
  for (int hk = 0; hk < 2; ++hk) {
    const auto a = goat::key_bias(s, A, hk, lags), b = goat::key_bias(ls, L, hk, lags);
    for (size_t i = 0; i < lags.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12 * (1 + std::abs(b[i])));
  }
}

}  // namespace
}  // namespace lcr::test
