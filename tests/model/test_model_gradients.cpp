// Every parameter slice of the whole model (tiny: V = 11, D = 16, 2 layers, L = 7, B = 2)
// against central finite differences of the loss, in float64, for each position scheme
// (PaTH and PaTH-FoX included: their w projection, convolution filter and beta gate).
//
// Tolerance: central differences with step h = 1e-5 have truncation error
// h^2 |f'''| / 6 ~ 1e-10 for these O(1)-curvature losses and rounding error
// ~ eps |f| / h ~ 2e-16 * 2.4 / 1e-5 ~ 5e-11. A wrong term in a backward is O(|g|), so
// |g - fd| <= 1e-7 + 1e-5 |g| separates the two by orders of magnitude while never
// failing on rounding. Each slice is sampled at its first and last element and at two
// random interior ones (every slice, every layer).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "model_test_util.hpp"

namespace lcr {
namespace {

struct GradCase {
  std::string name;
  ModelConfig cfg;
};

ModelConfig with_numerics(ModelConfig c) {
  c.attention.numerics.sink = true;
  c.attention.numerics.qk_norm = true;
  c.attention.numerics.softcap = 2.5;  // logits reach ~3 with init_std 0.3: tanh is curved
  return c;
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> cases;
  ModelConfig nope = test::tiny_config(Scheme::NoPE);
  nope.tie_embeddings = false;  // exercises lm_head; the others exercise the tied head
  cases.push_back({"NoPE_untied", nope});
  cases.push_back({"RoPE", test::tiny_config(Scheme::RoPE)});
  ModelConfig alibi = test::tiny_config(Scheme::ALiBi);
  alibi.attention.kv_heads = 2;
  cases.push_back({"ALiBi", alibi});
  cases.push_back({"GOAT", test::tiny_config(Scheme::GOAT)});
  cases.push_back({"GOAT2D", test::tiny_config(Scheme::GOAT2D)});
  cases.push_back({"PoPE", test::tiny_config(Scheme::PoPE)});
  cases.push_back({"FoX", test::tiny_config(Scheme::FoX)});
  cases.push_back({"NoPE_sink_qknorm_softcap", with_numerics(test::tiny_config(Scheme::NoPE))});
  cases.push_back({"GOAT_sink_qknorm_softcap", with_numerics(test::tiny_config(Scheme::GOAT))});
  // PaTH: the w projection, convolution and beta gate, through the blockwise kernel.
  cases.push_back({"PaTH", test::tiny_config(Scheme::PaTH)});
  cases.push_back({"PaTHFoX", test::tiny_config(Scheme::PaTHFoX)});
  ModelConfig path_fox_scaled = test::tiny_config(Scheme::PaTHFoX);
  path_fox_scaled.attention.fox.gate_scale = FoxGateScale::SoftmaxScale;  // fla's convention
  cases.push_back({"PaTHFoX_gates_softmax_scaled", path_fox_scaled});
  ModelConfig path_plain = with_numerics(test::tiny_config(Scheme::PaTH));
  path_plain.path_w_silu = false;  // the paper's plain convolution
  path_plain.attention.kv_heads = 2;
  cases.push_back({"PaTH_nosilu_mha_sink_qknorm_softcap", path_plain});
  return cases;
}

class ModelGradient : public ::testing::TestWithParam<GradCase> {};

TEST_P(ModelGradient, EverySliceMatchesFiniteDifferences) {
  const GradCase& gc = GetParam();
  std::unique_ptr<Model<double>> model;
  try {
    model = std::make_unique<Model<double>>(gc.cfg, 1234);
  } catch (const Error& e) {
    if (test::not_implemented(e)) GTEST_SKIP() << gc.name << ": " << e.what();
    throw;
  }
  Model<double>& m = *model;
  test::jitter_params(m, 0.2, 99);
  const auto batch = test::random_batch(2, 7, gc.cfg.vocab_size, 7);
  LocalAttention<double> attn;
  m.zero_grad();
  const double loss = m.forward(batch.tokens, batch.labels, attn);
  ASSERT_TRUE(std::isfinite(loss));
  m.backward(attn);
  auto grad = Kokkos::create_mirror_view_and_copy(HostSpace(), m.grads());

  auto loss_at = [&](int64_t i, double value) {
    test::set_param(m, i, value);
    return m.forward(batch.tokens, batch.labels, attn);
  };
  const double h = 1e-5;
  std::mt19937_64 gen(5);
  int checked = 0;
  double worst = 0;
  for (const auto& e : m.layout().params().entries()) {
    std::vector<int64_t> picks = {0, e.size() - 1, int64_t(gen() % uint64_t(e.size())),
                                  int64_t(gen() % uint64_t(e.size()))};
    std::sort(picks.begin(), picks.end());
    picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
    for (int64_t j : picks) {
      const int64_t i = e.offset + j;
      const double p0 = test::get_param(m, i);
      const double fd = (loss_at(i, p0 + h) - loss_at(i, p0 - h)) / (2 * h);
      test::set_param(m, i, p0);
      const double g = grad(i), err = std::abs(g - fd);
      worst = std::max(worst, err / (1e-7 + 1e-5 * std::abs(g)));
      EXPECT_LE(err, 1e-7 + 1e-5 * std::abs(g))
          << gc.name << ": " << e.name << "[" << j << "] backward " << g << " vs fd " << fd;
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Schemes, ModelGradient, ::testing::ValuesIn(grad_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace lcr
