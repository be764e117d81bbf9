// Sequence layouts, sharding / unsharding, the log-sum-exp merge kernel and the FoX
// cross-rank prefix.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/base/error.hpp"
#include "parallel/ring/fox_prefix.hpp"
#include "parallel/ring/merge.hpp"
#include "parallel/ring/shard.hpp"
#include "test_world.hpp"

namespace lcr::test {
namespace {

// The tests fill and check on the host; the views under test live where Kokkos's default
// memory space is (the GPU in a Kokkos CUDA build), so data crosses with these. On a host
// build the mirror is the view itself: no copies.
template <class V>
auto on_host(const V& v) {
  return Kokkos::create_mirror_view_and_copy(HostSpace(), v);
}
template <class V>
auto host_mirror(const V& v) {
  return Kokkos::create_mirror_view(v);
}

// Pure layout arithmetic, for many (L, N) on every rank (no communication).
TEST(SeqLayout, CoversEveryPositionOnceAndBalances) {
  for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Zigzag})
    for (int N = 1; N <= 6; ++N)
      for (int64_t L :
           {int64_t(2 * N), int64_t(2 * N + 1), int64_t(61), int64_t(128), int64_t(1000)}) {
        SCOPED_TRACE(std::string(layout_name(k)) + " N=" + std::to_string(N) +
                     " L=" + std::to_string(L));
        const SeqLayout lay(k, L, N);
        EXPECT_EQ(lay.num_chunks(), k == LayoutKind::Zigzag ? 2 * N : N);
        std::vector<int> seen(size_t(L), 0);
        int64_t lo = L, hi = 0, pos = 0;
        for (const auto& c : lay.chunks()) {
          EXPECT_EQ(c.start, pos);  // chunks are in position order, back to back
          EXPECT_GT(c.length, 0);
          pos = c.end();
        }
        EXPECT_EQ(pos, L);
        for (int r = 0; r < N; ++r) {
          const auto p = lay.positions(r);
          EXPECT_EQ(int64_t(p.size()), lay.local_length(r));
          for (size_t i = 0; i < p.size(); ++i) {
            ++seen[size_t(p[i])];
            if (i > 0) {
              EXPECT_LT(p[i - 1], p[i]);  // local rows keep global order
            }
          }
          lo = std::min(lo, lay.local_length(r));
          hi = std::max(hi, lay.local_length(r));
          if (k == LayoutKind::Zigzag)
            EXPECT_EQ(lay.chunks_of(r), (std::vector<int>{r, 2 * N - 1 - r}));
          else
            EXPECT_EQ(lay.chunks_of(r), std::vector<int>{r});
        }
        for (int s : seen) EXPECT_EQ(s, 1);
        EXPECT_LE(hi - lo, 1);
        EXPECT_EQ(lay.max_local_length(), hi);
      }
}

// split > 1: finer chunks, same owners' rows: every rank's positions equal split = 1's, and
// each rank's chunks are back-to-back pieces, in order, of the unsplit chunks.
TEST(SeqLayout, SplitKeepsEveryRanksRowsAndCutsChunksInOrder) {
  for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Zigzag})
    for (int N : {1, 2, 3})
      for (int split : {2, 3, 8})
        for (int64_t L : {int64_t(2 * N * split), int64_t(61 * split + 5), int64_t(1000)}) {
          SCOPED_TRACE(std::string(layout_name(k)) + " N=" + std::to_string(N) +
                       " split=" + std::to_string(split) + " L=" + std::to_string(L));
          const SeqLayout one(k, L, N), fine(k, L, N, split);
          EXPECT_EQ(fine.num_chunks(), one.num_chunks() * split);
          EXPECT_EQ(fine.chunks_per_rank(), one.chunks_per_rank() * split);
          for (int r = 0; r < N; ++r) {
            EXPECT_EQ(fine.positions(r), one.positions(r));
            int64_t off = 0;
            for (int c : fine.chunks_of(r)) {
              const Chunk& ch = fine.chunk(c);
              EXPECT_EQ(ch.owner, r);
              EXPECT_EQ(ch.local_offset, off);
              EXPECT_GT(ch.length, 0);
              off += ch.length;
            }
          }
        }
  EXPECT_THROW(SeqLayout(LayoutKind::Contiguous, 7, 1, 8), Error);  // 8 pieces of 7 positions
  EXPECT_THROW(SeqLayout(LayoutKind::Contiguous, 70, 1, 0), Error);
}

TEST(SeqLayout, ClearErrorWhenALayoutCannotTakeALength) {
  try {
    SeqLayout(LayoutKind::Zigzag, 7, 4);
    ADD_FAILURE() << "zigzag took 7 positions over 4 ranks";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("needs at least 8 positions"), std::string::npos) << m;
    EXPECT_NE(m.find("contiguous"), std::string::npos) << m;
  }
  EXPECT_THROW(SeqLayout(LayoutKind::Contiguous, 3, 4), Error);
  EXPECT_THROW(SeqLayout(LayoutKind::Contiguous, 3, 0), Error);
  EXPECT_EQ(parse_layout("zigzag"), LayoutKind::Zigzag);
  EXPECT_THROW(parse_layout("striped"), Error);
}

// Tokens [B, L] int32, q-like [B, L, H, d] double and lse-like [B, H, L] (sequence on
// axis 2): shard, gather back, identical; position shards match the layout.
TEST(Shard, RoundTripsTokensTensorsAndPositions) {
  Communicator& c = world();
  for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Zigzag}) {
    const SeqLayout lay(k, 61, c.size());
    View2<int32_t, HostSpace> tok("tok", 2, 61);
    View4<double> q_dev("q", 2, 61, 3, 5);
    View3<double> lse_dev("lse", 2, 3, 61);
    const auto q = host_mirror(q_dev);
    const auto lse = host_mirror(lse_dev);
    for (size_t i = 0; i < tok.span(); ++i) tok.data()[i] = int32_t(7 * i + 1);
    for (size_t i = 0; i < q.span(); ++i) q.data()[i] = 0.5 * double(i);
    for (size_t i = 0; i < lse.span(); ++i) lse.data()[i] = -double(i);
    Kokkos::deep_copy(q_dev, q);
    Kokkos::deep_copy(lse_dev, lse);
    const auto tl = shard_view(tok, lay, c.rank());
    const auto ql_dev = shard_view(q_dev, lay, c.rank());
    const auto ll_dev = shard_view(lse_dev, lay, c.rank(), 2);
    const auto ql = on_host(ql_dev);
    const auto ll = on_host(ll_dev);
    ASSERT_EQ(int64_t(tl.extent(1)), lay.local_length(c.rank()));
    const auto pos = shard_positions(lay, c.rank(), 2);
    for (int64_t i = 0; i < int64_t(tl.extent(1)); ++i) {
      EXPECT_EQ(tl(1, i), tok(1, pos(1, i)));
      EXPECT_EQ(ql(1, i, 2, 4), q(1, pos(1, i), 2, 4));
      EXPECT_EQ(ll(1, 2, i), lse(1, 2, pos(1, i)));
    }
    const auto tg = gather_view(c, tl, lay);
    const auto qg = on_host(gather_view(c, ql_dev, lay));
    const auto lg = on_host(gather_view(c, ll_dev, lay, 2));
    for (size_t i = 0; i < tok.span(); ++i) EXPECT_EQ(tg.data()[i], tok.data()[i]);
    for (size_t i = 0; i < q.span(); ++i) EXPECT_EQ(qg.data()[i], q.data()[i]);
    for (size_t i = 0; i < lse.span(); ++i) EXPECT_EQ(lg.data()[i], lse.data()[i]);
    // place_shard puts one rank's rows in place without communication.
    View4<double> back("back", 2, 61, 3, 5);
    place_shard(ql_dev, lay, c.rank(), back);
    const auto back_h = on_host(back);
    for (auto p : lay.positions(c.rank())) EXPECT_EQ(back_h(0, p, 1, 3), q(0, p, 1, 3));
  }
}

// Merging per-block (o, lse) equals softmax attention over the union, with -inf rows.
TEST(RingMerge, EqualsAttentionOverTheUnionOfKeys) {
  const int B = 2, L = 3, H = 2, Dv = 4, nblk = 3;
  const double ninf = -std::numeric_limits<double>::infinity();
  std::mt19937_64 rng(5);
  std::normal_distribution<double> n01(0, 3);
  // Block k gives row i some logits s and values; row (b=1, i=2) sees no key in block 1.
  std::vector<View4<double>> o_dev(nblk);
  std::vector<View3<double>> lse_dev(nblk);
  View4<double, HostSpace> num("num", B, L, H, Dv);
  View3<double, HostSpace> den("den", B, H, L);
  for (int k = 0; k < nblk; ++k) {
    o_dev[k] = View4<double>("o", B, L, H, Dv);
    lse_dev[k] = View3<double>("lse", B, H, L);
    const auto o = host_mirror(o_dev[k]);
    const auto lse = host_mirror(lse_dev[k]);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < L; ++i) {
          if (k == 1 && b == 1 && i == 2) {
            lse(b, h, i) = ninf;
            continue;
          }
          double z = 0;
          std::vector<double> ov(Dv, 0.0);
          for (int j = 0; j < 3; ++j) {
            const double s = n01(rng) + 40.0 * k;  // blocks far apart in scale: stability
            std::vector<double> v(Dv);
            for (auto& x : v) x = n01(rng);
            const double w = std::exp(s - 80.0);
            z += w;
            for (int d = 0; d < Dv; ++d) ov[d] += w * v[d];
          }
          den(b, h, i) += z;
          lse(b, h, i) = std::log(z) + 80.0;
          for (int d = 0; d < Dv; ++d) {
            o(b, i, h, d) = ov[d] / z;
            num(b, i, h, d) += ov[d];
          }
        }
    Kokkos::deep_copy(o_dev[k], o);
    Kokkos::deep_copy(lse_dev[k], lse);
  }
  View4<double> acc_dev("acc", B, L, H, Dv);
  View3<double> acc_lse_dev("acc_lse", B, H, L);
  reset_partial(acc_dev, acc_lse_dev);
  for (int k = 0; k < nblk; ++k) ring_merge<double>(acc_dev, acc_lse_dev, o_dev[k], lse_dev[k]);
  const auto acc = on_host(acc_dev);
  const auto acc_lse = on_host(acc_lse_dev);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < L; ++i) {
        EXPECT_NEAR(acc_lse(b, h, i), std::log(den(b, h, i)) + 80.0, 1e-12);
        for (int d = 0; d < Dv; ++d)
          EXPECT_NEAR(acc(b, i, h, d), num(b, i, h, d) / den(b, h, i), 1e-12);
      }
  // Two empty sides stay empty.
  View4<double> eo("eo", 1, 1, 1, 1);
  View3<double> el("el", 1, 1, 1), el2("el2", 1, 1, 1);
  reset_partial(eo, el);
  Kokkos::deep_copy(el2, ninf);
  ring_merge<double>(eo, el, eo, el2);
  EXPECT_EQ(on_host(el)(0, 0, 0), ninf);
  EXPECT_EQ(on_host(eo)(0, 0, 0, 0), 0.0);
}

// The cross-rank prefix equals the cumulative sum over the full sequence, and its
// backward equals the suffix sum, in both layouts.
TEST(FoxPrefix, GlobalCumulativeGatesAndTheirGradient) {
  Communicator& c = world();
  const int B = 2, H = 3;
  const int64_t L = 61;
  View3<double> lf_dev("lf", B, L, H), dc_dev("dc", B, L, H);
  const auto lf = host_mirror(lf_dev);
  const auto dc = host_mirror(dc_dev);
  std::mt19937_64 rng(9);
  std::normal_distribution<double> n01(0, 1);
  for (size_t i = 0; i < lf.span(); ++i) {
    lf.data()[i] = -std::log1p(std::exp(-2.0 - n01(rng)));
    dc.data()[i] = n01(rng);
  }
  Kokkos::deep_copy(lf_dev, lf);
  Kokkos::deep_copy(dc_dev, dc);
  for (LayoutKind k : {LayoutKind::Contiguous, LayoutKind::Zigzag}) {
    const SeqLayout lay(k, L, c.size());
    const auto lf_l = shard_view(lf_dev, lay, c.rank());
    const auto dc_l = shard_view(dc_dev, lay, c.rank());
    View3<double> c_l("c", B, lf_l.extent(1), H), g_l("g", B, lf_l.extent(1), H);
    fox_global_cumulative<double>(c, lay, lf_l, c_l);
    fox_global_cumulative_backward<double>(c, lay, dc_l, g_l);
    const auto cg = on_host(gather_view(c, c_l, lay));
    const auto gg = on_host(gather_view(c, g_l, lay));
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) {
        double pre = 0, suf = 0;
        for (int64_t t = 0; t < L; ++t) {
          pre += lf(b, t, h);
          EXPECT_NEAR(cg(b, t, h), pre, 1e-12);
        }
        for (int64_t t = L - 1; t >= 0; --t) {
          suf += dc(b, t, h);
          EXPECT_NEAR(gg(b, t, h), suf, 1e-12);
        }
      }
  }
  const SeqLayout lay(LayoutKind::Contiguous, L, c.size());
  View3<double> wrong("wrong", B, L + 1, H), out("out", B, L + 1, H);
  EXPECT_THROW(fox_global_cumulative<double>(c, lay, wrong, out), Error);
}

}  // namespace
}  // namespace lcr::test
