// AdamW against a hand-computed float64 step, the schedule's values, clipping, decay groups,
// the PoPE-delta clamp and the frozen sink of softmax-off-by-one.
#include <gtest/gtest.h>

#include <cmath>

#include "core/model/optimizer.hpp"
#include "kernels/base/error.hpp"
#include "model_test_util.hpp"

namespace lcr {
namespace {

View1<double> make(const std::vector<double>& x) {
  View1<double> v("v", x.size());
  auto h = Kokkos::create_mirror_view(v);
  for (size_t i = 0; i < x.size(); ++i) h(i) = x[i];
  Kokkos::deep_copy(v, h);
  return v;
}
std::vector<double> read(const View1<double>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.extent(0));
}

TEST(Schedule, WarmupThenCosineToMinLr) {
  AdamWConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.warmup_steps = 10;
  c.total_steps = 110;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0), 0.1);  // (0 + 1) / 10
  EXPECT_DOUBLE_EQ(learning_rate(c, 4), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(c, 9), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(c, 10), 1.0);     // cosine starts at the peak
  EXPECT_NEAR(learning_rate(c, 60), 0.55, 1e-15);  // halfway: (lr + min_lr) / 2
  EXPECT_NEAR(learning_rate(c, 35), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate(c, 110), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(c, 1000), 0.1);
  c.total_steps = 0;  // no decay
  EXPECT_DOUBLE_EQ(learning_rate(c, 500), 1.0);
  c.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0), 1.0);
}

TEST(AdamW, MatchesHandComputedSteps) {
  AdamWConfig c;
  c.lr = 0.1;
  c.min_lr = 0.1;
  c.beta1 = 0.8;
  c.beta2 = 0.9;
  c.eps = 1e-3;  // large, so the clip scale does not cancel in m / sqrt(v)
  c.weight_decay = 0.5;
  c.grad_clip = 1.0;
  // [0, 3) decayed matrix, [3, 5) no decay, [5, 7) clamped into [-1, 0].
  std::vector<ParamRange> ranges = {
      {"w", 0, 3, true}, {"g", 3, 2, false}, {"d", 5, 2, false, true, -1.0, 0.0}};
  AdamW<double> opt(c, ranges, 7);
  std::vector<double> p = {0.5, -1.0, 2.0, 1.0, 0.3, -0.95, -0.02};
  const std::vector<std::vector<double>> gs = {{0.6, -0.8, 1.2, 0.1, 0.0, 3.0, -0.4},
                                               {0.1, 0.2, -0.1, 0.05, -0.3, 0.2, 0.1}};
  View1<double> params = make(p);
  std::vector<double> m(7, 0), v(7, 0);
  for (size_t t = 0; t < gs.size(); ++t) {
    const auto& g = gs[t];
    double n2 = 0;
    for (double x : g) n2 += x * x;
    const double norm = std::sqrt(n2), scale = norm > 1.0 ? 1.0 / (norm + 1e-6) : 1.0;
    const double bc1 = 1 - std::pow(0.8, double(t + 1)), bc2 = 1 - std::pow(0.9, double(t + 1));
    for (size_t i = 0; i < 7; ++i) {
      const double gi = g[i] * scale;
      m[i] = 0.8 * m[i] + 0.2 * gi;
      v[i] = 0.9 * v[i] + 0.1 * gi * gi;
      if (i < 3) p[i] *= 1 - 0.1 * 0.5;
      p[i] -= 0.1 * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + 1e-3);
      if (i >= 5) p[i] = std::min(0.0, std::max(-1.0, p[i]));
    }
    const auto info = opt.step(params, make(g));
    EXPECT_EQ(info.step, int64_t(t));
    EXPECT_DOUBLE_EQ(info.lr, 0.1);
    EXPECT_NEAR(info.grad_norm, norm, 1e-15);
    EXPECT_NEAR(info.clip_scale, scale, 1e-15);
    const auto got = read(params);
    for (size_t i = 0; i < 7; ++i) EXPECT_NEAR(got[i], p[i], 1e-14) << "step " << t << " p" << i;
    if (t == 0) {  // the first step pushes both clamped elements out of [-1, 0]
      EXPECT_EQ(got[5], -1.0);
      EXPECT_EQ(got[6], 0.0);
    }
  }
  EXPECT_EQ(opt.steps_taken(), 2);
  const auto gm = read(opt.m()), gv = read(opt.v());
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_NEAR(gm[i], m[i], 1e-15);
    EXPECT_NEAR(gv[i], v[i], 1e-15);
  }
}

TEST(AdamW, ClippingScalesToTheLimitAndNotBelow) {
  const auto g = make({3.0, 4.0});  // norm 5
  EXPECT_DOUBLE_EQ(global_grad_norm<double>(g), 5.0);
  AdamWConfig c;
  c.grad_clip = 2.0;
  AdamW<double> opt(c, {{"x", 0, 2, false}}, 2);
  auto p = make({0, 0});
  EXPECT_NEAR(opt.step(p, g).clip_scale, 2.0 / (5.0 + 1e-6), 1e-15);
  c.grad_clip = 10.0;  // above the norm: untouched
  AdamW<double> loose(c, {{"x", 0, 2, false}}, 2);
  EXPECT_EQ(loose.step(p, g).clip_scale, 1.0);
  c.grad_clip = 0.0;  // disabled
  AdamW<double> off(c, {{"x", 0, 2, false}}, 2);
  EXPECT_EQ(off.step(p, make({300.0, 400.0})).clip_scale, 1.0);
}

// g(i) = i. Device lambdas live outside TEST bodies: gtest puts those in private member
// functions, where CUDA forbids extended lambdas.
void fill_with_index(const View1<double>& g) {
  Kokkos::parallel_for(
      Kokkos::RangePolicy<ExecSpace>(0, g.extent(0)),
      KOKKOS_LAMBDA(int64_t i) { g(i) = double(i); });
}

TEST(AdamW, GradNormIsExactOverManyChunks) {
  // 3 chunks of the deterministic chunked sum: sum of i^2 for i < n in closed form.
  const int64_t n = 20000;
  View1<double> g("g", n);
  fill_with_index(g);
  const double want = std::sqrt(double(n - 1) * n * (2 * n - 1) / 6.0);
  EXPECT_NEAR(global_grad_norm<double>(g), want, 1e-12 * want);
}

TEST(AdamW, NonFiniteGradientLeavesParametersUntouched) {
  AdamW<double> opt(AdamWConfig{}, {{"x", 0, 2, false}}, 2);
  auto p = make({1.0, 2.0});
  EXPECT_THROW(opt.step(p, make({1.0, std::nan("")})), Error);
  EXPECT_EQ(read(p), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(opt.steps_taken(), 0);
}

// Softmax-off-by-one's sink logits are a frozen range: its gradient is zeroed before the
// step, so the value stays at its initial 0 while the other ranges move.
TEST(AdamW, OffByOneSinkIsFrozenAtZero) {
  ModelConfig cfg = test::tiny_config(Scheme::NoPE);
  cfg.attention.numerics.off_by_one = true;
  const ModelLayout layout(cfg);
  const auto ranges = model_param_ranges(layout, AdamWConfig{});
  int frozen = 0;
  for (const auto& r : ranges) {
    EXPECT_EQ(r.frozen, ends_with(r.name, ".sink")) << r.name;
    frozen += r.frozen;
  }
  EXPECT_EQ(frozen, cfg.n_layers);
  const int64_t n = layout.total();
  View1<double> p("p", size_t(n)), g("g", size_t(n));
  Kokkos::deep_copy(g, 0.5);
  zero_frozen_grads(ranges, g);
  AdamW<double> opt(AdamWConfig{}, ranges, n);
  opt.step(p, g);
  const auto hp = read(p);
  for (const auto& r : ranges)
    for (int64_t i = 0; i < r.size; ++i)
      ASSERT_EQ(hp[size_t(r.offset + i)] == 0.0, r.frozen) << r.name << "[" << i << "]";
  cfg.attention.numerics.off_by_one = false;
  cfg.attention.numerics.sink = true;  // a learned sink is not frozen
  for (const auto& r : model_param_ranges(ModelLayout(cfg), AdamWConfig{}))
    EXPECT_FALSE(r.frozen) << r.name;
}

TEST(AdamW, RejectsBadConfigAndRanges) {
  AdamWConfig c;
  c.min_lr = 1.0;  // above lr
  EXPECT_THROW(validate(c), Error);
  c = AdamWConfig{};
  c.beta2 = 1.0;
  EXPECT_THROW(validate(c), Error);
  EXPECT_THROW(AdamW<double>(AdamWConfig{}, {{"x", 0, 2, false}}, 3), Error);  // gap at the end
  EXPECT_THROW(AdamW<double>(AdamWConfig{}, {{"x", 0, 2, false}, {"y", 1, 2, false}}, 3), Error);
}

}  // namespace
}  // namespace lcr
