// PaTH and PaTH-FoX over the ring (parallel/ring/path_ring.hpp) against the single-rank
// attention_forward / attention_backward on the full sequence, every rank count the
// binary runs under (1-4), both layouts, lengths that do and do not divide evenly, block
// sizes that do not divide the chunks, split layouts (several chunks per rank), with GQA,
// QK-norm, sink and softcap mixed in.
//
// Tolerance, float64: 1e-10 normwise relative (ring_problem.hpp's rel_error), as for the
// dot-product schemes. The ring computes the same logits through a different
// factorisation (chunk transitions multiplied into the query instead of the block scan's
// own carries) and merges per-chunk softmax sums; both are float64 reorderings of the same
// sums over products of at most L Householder reflections of norm <= 1: observed ~1e-14.
#include <gtest/gtest.h>

#include <random>

#include "parallel/ring/path_ring.hpp"
#include "parallel/ring/shard.hpp"
#include "ring_problem.hpp"
#include "test_world.hpp"

namespace lcr::test {
namespace {

struct PathRingCase {
  std::string name;
  AttentionSpec spec;
};

std::vector<PathRingCase> path_cases() {
  AttentionSpec s;
  s.scheme = Scheme::PaTH;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 8;
  s.path.block_size = 4;
  std::vector<PathRingCase> all{{"path_gqa", s}};
  s.scheme = Scheme::PaTHFoX;
  s.path.block_size = 5;
  s.numerics.sink = true;
  s.numerics.qk_norm = true;
  s.numerics.softcap = 6.0;
  all.push_back({"path_fox_gqa_sink_qknorm_softcap", s});
  return all;
}

// The full problem plus PaTH's w (unit rows) and beta (in [0, 1.9)), float64 on the host.
struct PathFull {
  FullProblem p;
  H4<double> w;
  H3<double> beta;
};

PathFull make_path_full(const AttentionSpec& spec, int64_t L, uint64_t seed) {
  PathFull f{make_full_problem({"path", spec, 2, seed, 0}, L), {}, {}};
  std::mt19937_64 rng(seed + 7);
  std::normal_distribution<double> n01;
  std::uniform_real_distribution<double> u(0.0, 1.9);
  const int B = 2, Hkv = spec.kv_heads, d = spec.head_dim;
  f.w = H4<double>("w", B, L, Hkv, d);
  f.beta = H3<double>("beta", B, L, Hkv);
  for (int b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      for (int h = 0; h < Hkv; ++h) {
        double nn = 0;
        for (int c = 0; c < d; ++c) nn += std::pow(f.w(b, t, h, c) = n01(rng), 2);
        for (int c = 0; c < d; ++c) f.w(b, t, h, c) /= std::sqrt(nn);
        f.beta(b, t, h) = u(rng);
      }
  return f;
}

// Full inputs on the device; `local` shards them for one rank of a layout.
AttentionInputs<double> device_inputs(const AttentionSpec& spec, const PathFull& f) {
  AttentionInputs<double> in;
  in.q = to_device<View4<double>>(f.p.q, "q");
  in.k = to_device<View4<double>>(f.p.k, "k");
  in.v = to_device<View4<double>>(f.p.v, "v");
  in.path_w = to_device<View4<double>>(f.w, "w");
  in.path_beta = to_device<View3<double>>(f.beta, "beta");
  if (uses_fox(spec.scheme)) in.fox_cq = in.fox_ck = to_device<View3<double>>(f.p.fox_c, "c");
  return in;
}

AttentionInputs<double> local(const AttentionInputs<double>& full, const SeqLayout& layout, int r) {
  AttentionInputs<double> in;
  in.q = shard_view(full.q, layout, r);
  in.k = shard_view(full.k, layout, r);
  in.v = shard_view(full.v, layout, r);
  in.path_w = shard_view(full.path_w, layout, r);
  in.path_beta = shard_view(full.path_beta, layout, r);
  if (full.fox_cq.extent(0) > 0) in.fox_cq = in.fox_ck = shard_view(full.fox_cq, layout, r);
  return in;
}

ParamSet<double> device_params(const PathFull& f) {
  ParamSet<double> p(f.p.params.layout, "params");
  Kokkos::deep_copy(p.data, f.p.params.data);
  return p;
}

struct PathRingParam {
  PathRingCase c;
  LayoutKind layout;
  int64_t L;
  int split = 1;  // layout.hpp: each rank's chunks cut into `split` pieces
};

std::vector<PathRingParam> path_params() {
  std::vector<PathRingParam> all;
  for (const auto& c : path_cases())
    for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Zigzag}) {
      for (int64_t L : {9, 61, 64}) all.push_back({c, k, L});
      all.push_back({c, k, 61, 3});  // up to 24 chunks of 2-3 positions over 4 ranks
    }
  return all;
}

void PrintTo(const PathRingParam& p, std::ostream* os) {
  *os << p.c.name << " " << layout_name(p.layout) << " L=" << p.L << " split=" << p.split;
}

std::string param_name(const ::testing::TestParamInfo<PathRingParam>& info) {
  return info.param.c.name + "_" + layout_name(info.param.layout) + "_L" +
         std::to_string(info.param.L) +
         (info.param.split > 1 ? "_split" + std::to_string(info.param.split) : "");
}

class PathRing : public ::testing::TestWithParam<PathRingParam> {};

TEST_P(PathRing, ForwardMatchesSingleRankFloat64) {
  const auto& prm = GetParam();
  const AttentionSpec& spec = prm.c.spec;
  Communicator& comm = world();
  const SeqLayout layout(prm.layout, prm.L, comm.size(), prm.split);
  const PathFull f = make_path_full(spec, prm.L, 4242 + uint64_t(prm.L));
  const auto full = device_inputs(spec, f);
  const auto params = device_params(f);
  const auto want = make_outputs<double>(spec, full);
  attention_forward<double>(spec, full, params, want);

  const auto in = local(full, layout, comm.rank());
  const auto out = make_outputs<double>(spec, in);
  const RingStats st = path_ring_forward<double>(comm, layout, spec, in, params, out);
  EXPECT_LE(rel_error(flat(gather_view(comm, out.o, layout, 1)), flat(want.o)), 1e-10) << "o";
  EXPECT_LE(rel_error(flat(gather_view(comm, out.lse, layout, 2)), flat(want.lse)), 1e-10) << "lse";
  // Every unmasked chunk pair computed once, every masked one skipped once, over the group.
  int64_t mine[2] = {0, 0};
  for (const auto& s : st.steps) mine[0] += s.blocks_computed, mine[1] += s.blocks_skipped;
  std::vector<int64_t> all(2 * size_t(comm.size()));
  comm.allgather(mine, all.data(), 2);
  int64_t computed = 0, skipped = 0;
  for (int r = 0; r < comm.size(); ++r) computed += all[2 * r], skipped += all[2 * r + 1];
  const int64_t C = layout.num_chunks();
  EXPECT_EQ(computed, C * (C + 1) / 2);
  EXPECT_EQ(skipped, C * (C - 1) / 2);
}

// Gradients of every input (q, k, v, w, beta, FoX c) and of the parameters (sink,
// QK-norm gains), gathered, against attention_backward on the full sequence.
TEST_P(PathRing, BackwardMatchesSingleRankFloat64) {
  const auto& prm = GetParam();
  const AttentionSpec& spec = prm.c.spec;
  Communicator& comm = world();
  const SeqLayout layout(prm.layout, prm.L, comm.size(), prm.split);
  const PathFull f = make_path_full(spec, prm.L, 977 + uint64_t(prm.L));
  const auto full = device_inputs(spec, f);
  const auto params = device_params(f);
  const auto dout = to_device<View4<double>>(f.p.dout, "dout");
  const auto want = make_outputs<double>(spec, full);
  attention_forward<double>(spec, full, params, want);
  auto gw = make_grads<double>(spec, full);
  attention_backward<double>(spec, full, params, want, dout, gw);

  const auto in = local(full, layout, comm.rank());
  const auto out = make_outputs<double>(spec, in);
  path_ring_forward<double>(comm, layout, spec, in, params, out);
  auto g = make_grads<double>(spec, in);
  path_ring_backward<double>(comm, layout, spec, in, params, out,
                             shard_view(dout, layout, comm.rank()), g);
  auto check4 = [&](const char* name, const View4<double>& got, const View4<double>& ref) {
    EXPECT_LE(rel_error(flat(gather_view(comm, got, layout, 1)), flat(ref)), 1e-10) << name;
  };
  auto check3 = [&](const char* name, const View3<double>& got, const View3<double>& ref) {
    EXPECT_LE(rel_error(flat(gather_view(comm, got, layout, 1)), flat(ref)), 1e-10) << name;
  };
  check4("dq", g.dq, gw.dq);
  check4("dk", g.dk, gw.dk);
  check4("dv", g.dv, gw.dv);
  check4("dpath_w", g.dpath_w, gw.dpath_w);
  check3("dpath_beta", g.dpath_beta, gw.dpath_beta);
  if (uses_fox(spec.scheme)) {
    check3("dfox_cq", g.dfox_cq, gw.dfox_cq);
    check3("dfox_ck", g.dfox_ck, gw.dfox_ck);
  }
  EXPECT_LE(rel_error(flat(g.dparams.data), flat(gw.dparams.data)), 1e-10) << "dparams";
}

INSTANTIATE_TEST_SUITE_P(PaTH, PathRing, ::testing::ValuesIn(path_params()), param_name);

TEST(PathRingErrors, RejectsADotProductScheme) {
  Communicator& comm = world();
  AttentionSpec spec = path_cases()[0].spec;
  const SeqLayout layout(LayoutKind::Contiguous, 9, comm.size());
  const PathFull f = make_path_full(spec, 9, 1);
  const auto in = local(device_inputs(spec, f), layout, comm.rank());
  spec.scheme = Scheme::RoPE;
  const auto out = make_outputs<double>(spec, in);
  try {
    path_ring_forward<double>(comm, layout, spec, in,
                              ParamSet<double>(attention_param_layout(spec)), out);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("take scheme path or path_fox"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lcr::test
