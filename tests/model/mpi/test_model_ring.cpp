// The whole model under context parallelism (run under mpirun with 1..3 ranks): every rank
// runs the model on its shard through RingAttention; the summed losses and the gradients
// summed over ranks must equal the single-rank model on the full sequence, for each
// scheme and both layouts (DESIGN.md section 5's central test, at the model level).
// PaTH / PaTH-FoX also exchange the convolution's prefix rows between chunks and return
// their gradient (L = 7 on 3 ranks gives one-row chunks, whose prefix spans two chunks).
// float64; only summation order differs, so the tolerance is 1e-11 relative.
#include <gtest/gtest.h>

#include <cmath>

#include "../model_test_util.hpp"
#include "core/model/ring_runner.hpp"
#include "parallel/ring/shard.hpp"
#include "test_world.hpp"

namespace lcr {
namespace {

struct RingCase {
  std::string name;
  ModelConfig cfg;
  int64_t L = 13;
};

ModelConfig with_numerics(ModelConfig n) {
  n.attention.numerics.sink = true;
  n.attention.numerics.qk_norm = true;
  n.attention.numerics.softcap = 2.5;
  return n;
}

std::vector<RingCase> ring_cases() {
  std::vector<RingCase> c;
  for (Scheme s : {Scheme::NoPE, Scheme::RoPE, Scheme::ALiBi, Scheme::GOAT, Scheme::PoPE,
                   Scheme::FoX, Scheme::PaTH, Scheme::PaTHFoX})
    c.push_back({scheme_name(s), test::tiny_config(s)});
  c.push_back({"goat_sink_qknorm_softcap", with_numerics(test::tiny_config(Scheme::GOAT))});
  c.push_back({"path_sink_qknorm_softcap", with_numerics(test::tiny_config(Scheme::PaTH))});
  c.push_back({"path_fox_L7", test::tiny_config(Scheme::PaTHFoX), 7});
  for (Scheme s : {Scheme::PoPE, Scheme::PaTHFoX}) {  // the sink fixed at 0
    ModelConfig obo = test::tiny_config(s);
    obo.attention.numerics.off_by_one = true;
    c.push_back({std::string(scheme_name(s)) + "_off_by_one", obo});
  }
  return c;
}

class ModelRing : public ::testing::TestWithParam<RingCase> {};

TEST_P(ModelRing, ShardedLossAndGradientsEqualSingleRank) {
  Communicator& comm = test::world();
  const int64_t B = 2, L = GetParam().L;
  const ModelConfig& cfg = GetParam().cfg;
  const auto batch = test::random_batch(B, L, cfg.vocab_size, 17);
  Model<double> ref(cfg, 9);
  test::jitter_params(ref, 0.2, 4);
  LocalAttention<double> local;
  ref.zero_grad();
  const double ref_loss = ref.forward(batch.tokens, batch.labels, local);
  ref.backward(local);
  auto ref_g = Kokkos::create_mirror_view_and_copy(HostSpace(), ref.grads());

  for (LayoutKind kind : {LayoutKind::Contiguous, LayoutKind::Zigzag}) {
    SCOPED_TRACE(layout_name(kind));
    SeqLayout layout(kind, L, comm.size());
    RingAttention<double> ring(comm, layout);
    Model<double> m(cfg, 9);
    test::jitter_params(m, 0.2, 4);
    const View2<int32_t> tok = shard_view(batch.tokens, layout, comm.rank());
    const View2<int32_t> lab = shard_view(batch.labels, layout, comm.rank());
    m.zero_grad();
    double loss = m.forward(tok, lab, ring, double(ref.labelled_rows()));
    m.backward(ring);
    comm.allreduce_sum(&loss, 1);
    auto g = Kokkos::create_mirror_view_and_copy(HostSpace(), m.grads());
    comm.allreduce_sum(g.data(), g.extent(0));
    EXPECT_NEAR(loss, ref_loss, 1e-12 * ref_loss);
    double scale = 0;
    for (size_t i = 0; i < g.extent(0); ++i) scale = std::max(scale, std::abs(ref_g(i)));
    for (const auto& e : m.layout().params().entries())
      for (int64_t j = 0; j < e.size(); ++j)
        ASSERT_NEAR(g(e.offset + j), ref_g(e.offset + j), 1e-11 * scale)
            << e.name << "[" << j << "] on " << comm.size() << " ranks";
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, ModelRing, ::testing::ValuesIn(ring_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace lcr
