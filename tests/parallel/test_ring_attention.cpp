// The central context-parallel test (DESIGN.md section 5): for every dot-product scheme,
// both layouts and lengths that do and do not divide evenly, the ring's forward o, lse
// and every backward gradient equal the single-rank attention_forward/backward.
//
// Tolerance, float64: 1e-10 normwise relative (max |ring - single| / max |single|, with
// max |single| floored at 1e-3 because some gradients are zero up to roundoff: FoX's
// dc_q without sink or softcap is sum_j p_ij (dp_ij - delta_i) = 0 for every row). The
// two computations differ only in summation order (per-block softmax sums merged with
// log-sum-exp, gradients summed block by block), which moves results by a few ulp times
// the condition of the sums: observed errors are ~1e-15. float32 (one smoke case per
// layout): 1e-4, the same reordering at 6e-8 unit roundoff through softmax gradients.
#include <gtest/gtest.h>

#include "parallel/comm/process_grid.hpp"
#include "parallel/ring/ring_attention.hpp"
#include "ring_check.hpp"
#include "test_world.hpp"

namespace lcr::test {
namespace {

struct RingParam {
  RingCase c;
  LayoutKind layout;
  int64_t L;
};

std::vector<RingParam> ring_params() {
  std::vector<RingParam> all;
  for (const auto& c : ring_cases())
    for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Zigzag})
      for (int64_t L : {9, 61, 128}) all.push_back({c, k, L});
  return all;
}

// Readable gtest output instead of the parameter's bytes.
void PrintTo(const RingParam& p, std::ostream* os) {
  *os << p.c.name << " " << layout_name(p.layout) << " L=" << p.L;
}

std::string param_name(const ::testing::TestParamInfo<RingParam>& info) {
  return info.param.c.name + "_" + layout_name(info.param.layout) + "_L" +
         std::to_string(info.param.L);
}

void expect_match(const Flat& got, const Flat& want, double tol) {
  EXPECT_EQ(got.values.size(), want.values.size());
  for (const auto& [name, w] : want.values) {
    const auto it = got.values.find(name);
    ASSERT_NE(it, got.values.end()) << "ring result lacks " << name;
    const double e = rel_error(it->second, w);
    EXPECT_LE(e, tol) << name << ": relative error " << e;
  }
}

// Every unmasked (query chunk, key chunk) pair is computed exactly once over the group,
// every masked pair skipped once; what a rank sends, the next rank receives.
void expect_consistent_stats(Communicator& comm, const SeqLayout& layout, const RingStats& st) {
  const int N = comm.size();
  ASSERT_EQ(int(st.steps.size()), N);
  int64_t mine[4] = {0, 0, st.bytes_sent(), st.bytes_received()};
  for (const auto& s : st.steps) {
    mine[0] += s.blocks_computed;
    mine[1] += s.blocks_skipped;
  }
  std::vector<int64_t> all(4 * size_t(N));
  comm.allgather(mine, all.data(), 4);
  int64_t computed = 0, skipped = 0;
  for (int r = 0; r < N; ++r) {
    computed += all[4 * size_t(r)];
    skipped += all[4 * size_t(r) + 1];
  }
  const int64_t C = layout.num_chunks();
  EXPECT_EQ(computed, C * (C + 1) / 2) << st.pass;
  EXPECT_EQ(skipped, C * (C - 1) / 2) << st.pass;
  const int next = (comm.rank() + 1) % N;
  EXPECT_EQ(mine[2], all[4 * size_t(next) + 3]) << st.pass << ": bytes sent vs received";
  EXPECT_GE(st.compute_s(), 0.0);
  EXPECT_GE(st.wait_s(), 0.0);
}

class RingAttention : public ::testing::TestWithParam<RingParam> {};

TEST_P(RingAttention, MatchesSingleRankFloat64) {
  const auto& prm = GetParam();
  Communicator& comm = world();
  const SeqLayout layout(prm.layout, prm.L, comm.size());
  const FullProblem p = make_full_problem(prm.c, prm.L);
  const Flat want = single_rank<double>(prm.c, p);
  const Flat got = ring<double>(comm, prm.c, p, layout);
  expect_match(got, want, 1e-10);
  expect_consistent_stats(comm, layout, got.forward);
  expect_consistent_stats(comm, layout, got.backward);
}

INSTANTIATE_TEST_SUITE_P(DotProduct, RingAttention, ::testing::ValuesIn(ring_params()), param_name);

TEST(RingAttentionFloat32, MatchesSingleRank) {
  Communicator& comm = world();
  for (const char* name : {"goat_gqa_qknorm_sink_softcap", "fox_gqa_sink_qknorm"}) {
    const RingCase c = ring_case(name);
    for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Zigzag}) {
      SCOPED_TRACE(c.name + " " + layout_name(k));
      const SeqLayout layout(k, 61, comm.size());
      const FullProblem p = make_full_problem(c, 61);
      expect_match(ring<float>(comm, c, p, layout), single_rank<float>(c, p), 1e-4);
    }
  }
}

// Exact message volume for NoPE (k lanes = k): forward, rank r sends the blocks of
// owners r, r-1, ..., r-N+2 (not the last one it holds); backward sends those again plus
// every block's gradient once (N hops home).
TEST(RingStats, CountsBytesExactly) {
  Communicator& comm = world();
  const int N = comm.size(), me = comm.rank();
  const RingCase c = ring_case("nope");  // batch 2, no lanes: k lanes are k
  const SeqLayout layout(LayoutKind::Zigzag, 61, N);
  const FullProblem p = make_full_problem(c, 61);
  const Flat got = ring<double>(comm, c, p, layout);
  const int64_t row = int64_t(c.batch) * c.spec.kv_heads * (c.spec.head_dim + c.spec.v_dim()) *
                      int64_t(sizeof(double));
  int64_t kv = 0, all = 0;
  for (int s = 0; s < N; ++s) {
    const int64_t rows = layout.local_length((me - s + N) % N);
    all += rows;
    if (s + 1 < N) kv += rows;
  }
  EXPECT_EQ(got.forward.bytes_sent(), kv * row);
  EXPECT_EQ(got.backward.bytes_sent(), N > 1 ? (kv + all) * row : 0);
  EXPECT_GT(got.forward.compute_s(), 0.0);
  EXPECT_GT(got.backward.total_s, 0.0);
  EXPECT_FALSE(got.forward.summary().empty());
  EXPECT_NE(got.backward.table().find("step"), std::string::npos);
}

// Data-parallel replicas run independent rings in their own CP groups at the same time.
TEST(RingAttention, RunsInsideEveryProcessGridShape) {
  const int W = world().size();
  const RingCase c = ring_case("goat_gqa_qknorm_sink_softcap");
  const FullProblem p = make_full_problem(c, 61);
  const Flat want = single_rank<double>(c, p);
  for (int cp = 1; cp <= W; ++cp) {
    if (W % cp != 0) continue;
    SCOPED_TRACE("cp " + std::to_string(cp));
    ProcessGrid grid(mpi_world(), cp);
    for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Zigzag}) {
      const SeqLayout layout(k, 61, grid.cp_size());
      expect_match(ring<double>(grid.cp(), c, p, layout), want, 1e-10);
    }
  }
}

// A sequence that starts at global position pos0 > 0 (q_pos0 = k_pos0 = pos0): the
// layout's chunk offsets are added to it, so absolute-position terms (GOAT's u_h(j),
// RoPE angles, ALiBi distances) match the single-rank call with the same pos0.
TEST(RingAttention, HonoursAGlobalStartPosition) {
  Communicator& comm = world();
  for (const char* name : {"goat_gqa_qknorm_sink_softcap", "rope_halfsplit_gqa", "fox"}) {
    RingCase c = ring_case(name);
    c.pos0 = 37;
    SCOPED_TRACE(name);
    const FullProblem p = make_full_problem(c, 61);
    const Flat want = single_rank<double>(c, p);
    for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Zigzag})
      expect_match(ring<double>(comm, c, p, SeqLayout(k, 61, comm.size())), want, 1e-10);
  }
}

TEST(RingAttention, RejectsBadInputsOnEveryRank) {
  Communicator& comm = world();
  const RingCase c = ring_cases().front();
  const SeqLayout layout(LayoutKind::Contiguous, 61, comm.size());
  const auto& s = c.spec;
  const int64_t Lr = layout.local_length(comm.rank());
  AttentionInputs<double> in;
  in.q = View4<double>("q", 1, Lr + 1, s.heads, s.head_dim);  // one row too many
  in.k = View4<double>("k", 1, Lr + 1, s.kv_heads, s.head_dim);
  in.v = View4<double>("v", 1, Lr + 1, s.kv_heads, s.v_dim());
  ParamSet<double> params(attention_param_layout(s));
  auto out = make_outputs<double>(s, in);
  try {
    ring_attention_forward<double>(comm, layout, s, in, params, out);
    ADD_FAILURE() << "no error for a shard of the wrong length";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard the sequence"), std::string::npos) << e.what();
  }
  const SeqLayout other(LayoutKind::Contiguous, 61, comm.size() + 1);
  EXPECT_THROW(ring_attention_forward<double>(comm, other, s, in, params, out), Error);

  AttentionSpec path = s;
  path.scheme = Scheme::PaTH;
  try {
    ring_attention_forward<double>(comm, layout, path, in, params, out);
    ADD_FAILURE() << "no error for PaTH";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PaTH"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lcr::test
