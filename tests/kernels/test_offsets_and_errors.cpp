// Global positions and bad input, for every dot-product scheme:
// - a query slice [a, b) run with q_pos0 = a against keys [0, b) gives exactly the rows
//   a..b-1 of the full-sequence run (what the ring relies on);
// - bad shapes, unknown names and impossible options raise lcr::Error naming the problem.
#include <gtest/gtest.h>

#include <Kokkos_Random.hpp>
#include <cmath>

#include "kernels/attention_harness.hpp"

namespace lcr::test {
namespace {

AttentionSpec spec_for(Scheme s) {
  AttentionSpec spec;
  spec.scheme = s;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 32;
  spec.goat.grid_width = 6;
  return spec;
}

template <class V>
V rows(const V& full, int64_t r0, int64_t r1) {
  // Copies rows [r0, r1) along dimension 1 of a [B, L, ...] host view.
  V out;
  if constexpr (V::rank == 4)
    out = V(full.label(), full.extent(0), r1 - r0, full.extent(2), full.extent(3));
  else
    out = V(full.label(), full.extent(0), r1 - r0, full.extent(2));
  for (size_t b = 0; b < full.extent(0); ++b)
    for (int64_t i = r0; i < r1; ++i)
      for (size_t h = 0; h < full.extent(2); ++h) {
        if constexpr (V::rank == 4) {
          for (size_t d = 0; d < full.extent(3); ++d) out(b, i - r0, h, d) = full(b, i, h, d);
        } else {
          out(b, i - r0, h) = full(b, i, h);
        }
      }
  return out;
}

class OffsetTest : public ::testing::TestWithParam<Scheme> {};

TEST_P(OffsetTest, QuerySliceWithOffsetEqualsRowsOfFullRun) {
  Case c;
  c.spec = spec_for(GetParam());
  c.spec.numerics.sink = true;
  c.B = 2;
  c.Lq = c.Lk = 77;
  c.seed = 11;
  const Problem full = make_problem(c);
  const Result rf = run_kokkos<double>(full, false);

  const int64_t a = 40, b = 61;  // queries 40..60 see keys 0..60
  Problem sl = full;
  sl.c.Lq = int(b - a);
  sl.c.Lk = int(b);
  sl.c.q_pos0 = a;
  sl.q = rows(full.q, a, b);
  sl.k = rows(full.k, 0, b);
  sl.v = rows(full.v, 0, b);
  sl.dout = rows(full.dout, a, b);
  if (full.fox_cq.extent(0) > 0) {
    sl.fox_cq = rows(full.fox_cq, a, b);
    sl.fox_ck = rows(full.fox_ck, 0, b);
  }
  const Result rs = run_kokkos<double>(sl, false);

  const int H = c.spec.heads, dv = c.spec.v_dim();
  double worst = 0;
  for (int bb = 0; bb < c.B; ++bb)
    for (int64_t i = a; i < b; ++i)
      for (int h = 0; h < H; ++h) {
        for (int d = 0; d < dv; ++d) {
          const double x = rf.o[((bb * c.Lq + i) * H + h) * dv + d];
          const double y = rs.o[((bb * sl.c.Lq + (i - a)) * H + h) * dv + d];
          worst = std::max(worst, std::abs(x - y));
        }
        const double lx = rf.lse[(bb * H + h) * c.Lq + i];
        const double ly = rs.lse[(bb * H + h) * sl.c.Lq + (i - a)];
        worst = std::max(worst, std::abs(lx - ly));
      }
  // Same float64 arithmetic on the same rows, only tile boundaries differ: rounding only.
  EXPECT_LT(worst, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(AllDotProduct, OffsetTest,
                         ::testing::Values(Scheme::NoPE, Scheme::RoPE, Scheme::ALiBi, Scheme::GOAT,
                                           Scheme::GOAT2D, Scheme::PoPE, Scheme::FoX),
                         [](const auto& info) { return std::string(scheme_name(info.param)); });

// Expects an lcr::Error whose message contains `needle`.
template <class F>
void expect_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error raised; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(AttentionErrors, UnknownSchemeListsValidNames) {
  expect_error([] { parse_scheme("rotary"); }, "valid schemes: nope, rope");
}

TEST(AttentionErrors, HeadsNotMultipleOfKvHeads) {
  AttentionSpec s;
  s.heads = 6;
  s.kv_heads = 4;
  expect_error([&] { validate(s); }, "multiple of kv_heads");
}

TEST(AttentionErrors, MismatchedShapesNameTheTensor) {
  AttentionSpec s = spec_for(Scheme::NoPE);
  AttentionInputs<double> in;
  in.q = View4<double>("q", 1, 5, 4, 32);
  in.k = View4<double>("k", 1, 5, 2, 16);  // wrong head width
  in.v = View4<double>("v", 1, 5, 2, 32);
  ParamSet<double> params(attention_param_layout(s));
  auto out = make_outputs<double>(s, in);
  expect_error([&] { attention_forward<double>(s, in, params, out); }, "k has shape [1, 5, 2, 16]");
  in.k = View4<double>("k", 1, 5, 2, 32);
  in.v = View4<double>("v", 1, 6, 2, 32);  // wrong length
  expect_error([&] { attention_forward<double>(s, in, params, out); }, "v has shape");
}

TEST(AttentionErrors, FoxGatesMissingOrUnexpected) {
  AttentionSpec s = spec_for(Scheme::FoX);
  AttentionInputs<double> in;
  in.q = View4<double>("q", 1, 5, 4, 32);
  in.k = View4<double>("k", 1, 5, 2, 32);
  in.v = View4<double>("v", 1, 5, 2, 32);
  ParamSet<double> params(attention_param_layout(s));
  auto out = make_outputs<double>(s, in);
  expect_error([&] { attention_forward<double>(s, in, params, out); }, "fox_cq");
  s.scheme = Scheme::NoPE;
  in.fox_cq = View3<double>("cq", 1, 5, 4);
  in.fox_ck = View3<double>("ck", 1, 5, 4);
  expect_error([&] { attention_forward<double>(s, in, params, out); }, "FoX gates were given");
}

TEST(AttentionErrors, ParameterBufferOfWrongSize) {
  AttentionSpec s = spec_for(Scheme::NoPE);
  s.numerics.sink = true;
  AttentionInputs<double> in;
  in.q = View4<double>("q", 1, 5, 4, 32);
  in.k = View4<double>("k", 1, 5, 2, 32);
  in.v = View4<double>("v", 1, 5, 2, 32);
  ParamSet<double> params;  // empty: the sink needs H values
  auto out = make_outputs<double>(s, in);
  expect_error([&] { attention_forward<double>(s, in, params, out); }, "needs 4");
}

TEST(AttentionErrors, OffByOneNeedsZeroSinkLogitsAndNoLearnedSink) {
  AttentionSpec s = spec_for(Scheme::NoPE);
  s.numerics.off_by_one = true;
  AttentionInputs<double> in;
  in.q = View4<double>("q", 1, 5, 4, 32);
  in.k = View4<double>("k", 1, 5, 2, 32);
  in.v = View4<double>("v", 1, 5, 2, 32);
  ParamSet<double> params(attention_param_layout(s), "params");
  Kokkos::deep_copy(params.data, 0.25);
  auto out = make_outputs<double>(s, in);
  expect_error([&] { attention_forward<double>(s, in, params, out); },
               "'sink' parameter of head 0 is 0.25");
  s.numerics.sink = true;
  expect_error([&] { validate(s); }, "choose one");
}

// Softmax-off-by-one is the softmax with 1 added to its denominator: against the plain
// softmax of the same inputs, o' = o sigmoid(lse) and lse' = log(1 + e^lse) (float64, an
// independent identity rather than the sink code path's own reference).
TEST(OffByOne, IsThePlainSoftmaxWithAUnitInTheDenominator) {
  AttentionSpec s = spec_for(Scheme::RoPE);
  const int B = 2, L = 7;
  View4<double> q("q", B, L, 4, 32), k("k", B, L, 2, 32), v("v", B, L, 2, 32);
  Kokkos::Random_XorShift64_Pool<ExecSpace> pool(7);
  for (auto* x : {&q, &k, &v}) Kokkos::fill_random(*x, pool, -2.0, 2.0);
  AttentionInputs<double> in;
  in.q = q;
  in.k = k;
  in.v = v;
  ParamSet<double> plain_params(attention_param_layout(s), "plain");
  auto plain = make_outputs<double>(s, in);
  attention_forward<double>(s, in, plain_params, plain);
  s.numerics.off_by_one = true;
  ParamSet<double> obo_params(attention_param_layout(s), "obo");  // zero-initialised
  auto obo = make_outputs<double>(s, in);
  attention_forward<double>(s, in, obo_params, obo);
  const auto o0 = Kokkos::create_mirror_view_and_copy(HostSpace(), plain.o);
  const auto l0 = Kokkos::create_mirror_view_and_copy(HostSpace(), plain.lse);
  const auto o1 = Kokkos::create_mirror_view_and_copy(HostSpace(), obo.o);
  const auto l1 = Kokkos::create_mirror_view_and_copy(HostSpace(), obo.lse);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < L; ++i)
      for (int h = 0; h < 4; ++h) {
        const double lse = l0(b, h, i), sg = 1 / (1 + std::exp(-lse));
        EXPECT_NEAR(l1(b, h, i), std::log1p(std::exp(lse)), 1e-13);
        for (int d = 0; d < 32; ++d) EXPECT_NEAR(o1(b, i, h, d), o0(b, i, h, d) * sg, 1e-13);
      }
}

TEST(AttentionErrors, NegativeSoftcapRejected) {
  AttentionSpec s;
  s.numerics.softcap = -1;
  expect_error([&] { validate(s); }, "softcap");
}

}  // namespace
}  // namespace lcr::test
