#include "kernels/attention_scheme_tests.hpp"

#include <cmath>
#include <random>

namespace lcr::test {

std::vector<NamedCase> standard_cases(const std::string& prefix, const AttentionSpec& base) {
  auto make = [&](const std::string& n, int B, int Lq, int Lk, int H, int Hkv, int d,
                  int64_t q0 = 0, int64_t k0 = 0, int dv = 0) {
    NamedCase nc{prefix + "_" + n, Case{}};
    nc.c.spec = base;
    nc.c.spec.heads = H;
    nc.c.spec.kv_heads = Hkv;
    nc.c.spec.head_dim = d;
    nc.c.spec.value_dim = dv;
    nc.c.B = B;
    nc.c.Lq = Lq;
    nc.c.Lk = Lk;
    nc.c.q_pos0 = q0;
    nc.c.k_pos0 = k0;
    nc.c.seed = std::hash<std::string>{}(nc.name);
    return nc;
  };
  return {
      make("L1_d16", 1, 1, 1, 2, 1, 16),
      make("L7_d32_gqa", 2, 7, 7, 4, 2, 32),
      make("L129_d64", 1, 129, 129, 2, 2, 64),
      make("L1000_d128_gqa", 1, 1000, 1000, 2, 1, 128),
      make("offset_queries_after_keys", 1, 37, 100, 2, 1, 16, 80, 0),
      make("offset_rows_see_nothing", 1, 20, 30, 2, 2, 16, 0, 10),
      make("value_dim_differs", 1, 9, 9, 2, 1, 24, 3, 3, 40),
      // Wider than a GPU-form forward pass's 128 output columns: two column passes.
      make("value_dim_wide", 1, 9, 9, 2, 1, 24, 3, 3, 160),
  };
}

std::vector<NamedCase> in_gpu_form(std::vector<NamedCase> cases) {
  for (auto& c : cases) {
    c.name += "_gpu_form";
    c.form = SdpaForm::Gpu;
  }
  return cases;
}

std::vector<NamedCase> in_two_pass(std::vector<NamedCase> cases) {
  for (auto& c : cases) {
    c.name += "_two_pass";
    c.form = SdpaForm::CpuTwoPass;
  }
  return cases;
}

namespace {

// u . g where u is a fresh random direction.
struct Directional {
  double kernel = 0, reference = 0, scale = 0;  // scale = |u| |g| (Cauchy-Schwarz bound)
};

Directional directional(const Problem& p, const Result& k, const std::string& name, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01;
  const auto& g = k.grad.at(name);
  std::vector<double> u(g.size());
  double uu = 0, gg = 0, ug = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    u[i] = n01(rng);
    uu += u[i] * u[i];
    gg += g[i] * g[i];
    ug += u[i] * g[i];
  }
  return {ug, reference_directional(p, name, u), std::sqrt(uu * gg) + 1e-300};
}

}  // namespace

// float64 kernel vs float64 reference: the only difference is summation order (online
// softmax, tiles), so errors are a few ulps times the O(L d) terms summed: 1e-10 on O(1)
// outputs leaves two orders of magnitude of room at L = 1000, d = 128.
TEST_P(AttentionSchemeTest, Forward64MatchesReference) {
  const Problem p = make_problem(GetParam().c);
  const Result r = run_reference(p), k = run_kokkos<double>(p, false);
  const double s = std::max(1.0, max_abs(r.o));
  EXPECT_LT(max_abs_diff(k.o, r.o), 1e-10 * s);
  EXPECT_LT(max_abs_diff(k.lse, r.lse), 1e-10 * std::max(1.0, max_abs(r.lse)));
}

// float32 kernel: inputs rounded to float32 (relative 6e-8) and O(d + L) float32
// additions per output; logits up to ~10 amplify relative errors by their size.
// 2e-4 relative is ~3000 ulps, within the error of a naive float32 implementation.
TEST_P(AttentionSchemeTest, Forward32MatchesReference) {
  const Problem p = make_problem(GetParam().c);
  const Result r = run_reference(p), k = run_kokkos<float>(p, false);
  EXPECT_LT(max_abs_diff(k.o, r.o), 2e-4 * std::max(1.0, max_abs(r.o)));
  EXPECT_LT(max_abs_diff(k.lse, r.lse), 2e-4 * std::max(1.0, max_abs(r.lse)));
}

// Every gradient (q, k, v, each scheme parameter, FoX lanes) against the reference's
// exact directional derivative along a random direction. Both sides are float64 sums of
// O(L^2 d) terms; 1e-9 of the Cauchy-Schwarz bound |u||g| is far above their rounding.
TEST_P(AttentionSchemeTest, GradientsMatchDualReference) {
  const Problem p = make_problem(GetParam().c);
  const Result k = run_kokkos<double>(p, true);
  for (const auto& name : input_names(p)) {
    SCOPED_TRACE("input " + name);
    const Directional d = directional(p, k, name, GetParam().c.seed + 17);
    EXPECT_NEAR(d.kernel, d.reference, 1e-9 * d.scale + 1e-12);
  }
}

// Central finite differences of the float64 reference loss <dout, o>, element by element
// (all elements of small inputs, a sample of large ones). Step 1e-5: truncation
// O(h^2 |f'''|) ~ 1e-10, rounding ~1e-16 / 1e-5 ~ 1e-11; tolerance 1e-6 relative.
TEST_P(AttentionSchemeTest, GradientsMatchFiniteDifferences) {
  Problem p = make_problem(GetParam().c);
  const bool big = int64_t(p.c.Lq) * p.c.Lk > 4000;
  // At a large size a pinned form adds nothing here: its gradients meet the reference's
  // exact directional derivative (GradientsMatchDualReference), and that derivative meets
  // these differences in the Automatic-form case of the same problem.
  if (big && GetParam().form != SdpaForm::Automatic)
    GTEST_SKIP() << "large pinned-form case: checked by GradientsMatchDualReference";
  const Result k = run_kokkos<double>(p, true);
  std::mt19937_64 rng(GetParam().c.seed + 5);
  for (const auto& name : input_names(p)) {
    SCOPED_TRACE("input " + name);
    const size_t n = input_size(p, name);
    const size_t samples = big ? std::min<size_t>(n, 2) : std::min<size_t>(n, 48);
    for (size_t s = 0; s < samples; ++s) {
      const size_t i = samples == n ? s : rng() % n;
      double* x = input_data(p, name) + i;
      // goat.lambda multiplies the key position j (up to ~1000): |f'''| grows ~j^3, so
      // a 100x smaller step keeps the truncation error below the tolerance.
      const double x0 = *x, h = name == "goat.lambda" ? 1e-7 : 1e-5;
      *x = x0 + h;
      const double lp = reference_loss(p);
      *x = x0 - h;
      const double lm = reference_loss(p);
      *x = x0;
      const double fd = (lp - lm) / (2 * h), g = k.grad.at(name)[i];
      EXPECT_NEAR(g, fd, 1e-6 * std::max(1.0, std::abs(fd))) << "element " << i;
    }
  }
}

}  // namespace lcr::test
