// The attention-runner contract for context parallelism, checked on one process: a model
// whose local rows are a PERMUTATION of the sequence (a zigzag layout's local order) with a
// runner that maps them to global positions must give the loss and gradients of the plain
// single-segment model. This exercises what the ring relies on: the model takes every
// position-dependent sum (FoX's cumulative gates, both directions) and PaTH's convolution
// prefix rows (and their gradient) from the runner, runs PaTH's convolution per segment,
// and keeps its own row order everywhere else.
#include <gtest/gtest.h>

#include <cmath>

#include "model_test_util.hpp"

namespace lcr {
namespace {

// Local row r holds global position perm[r]; attention runs on the un-permuted tensors.
template <class T>
class PermutedRunner : public AttentionRunner<T> {
 public:
  PermutedRunner(std::vector<int64_t> perm, std::vector<RowSegment> segs)
      : perm_(std::move(perm)), segs_(std::move(segs)) {}

  std::vector<RowSegment> segments(int64_t L) const override {
    require(L == int64_t(perm_.size()), "PermutedRunner built for L = ", perm_.size());
    return segs_;
  }
  void global_cumsum(const View3<const T>& x, const View3<T>& out, bool reverse) override {
    // This process holds every chunk: scan in global order, then back to local order.
    const auto g = global_copy(x, 1);
    View3<T> gout("gout", g.layout());
    local_cumsum<T>(g, gout, reverse);
    move_rows(gout, out, 1, false);
  }
  // Rows at global positions pos0 - 2, pos0 - 1 of each segment, read from the local rows.
  std::vector<View4<T>> rows_before_segments(const View4<const T>& u) override {
    auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), u);
    std::vector<View4<T>> out;
    for (const RowSegment& s : segs_) {
      View4<T> rows("rows", u.extent(0), 2, u.extent(2), u.extent(3));
      auto hr = Kokkos::create_mirror_view(rows);
      for (int64_t k = 0; k < 2; ++k) {
        const int64_t r = local_row(s.pos0 - 2 + k);
        if (r < 0) continue;
        for (size_t b = 0; b < u.extent(0); ++b)
          for (size_t x = 0; x < u.extent(2); ++x)
            for (size_t y = 0; y < u.extent(3); ++y) hr(b, k, x, y) = h(b, r, x, y);
      }
      Kokkos::deep_copy(rows, hr);
      out.push_back(rows);
    }
    return out;
  }
  void rows_before_segments_backward(const std::vector<View4<T>>& drows,
                                     const View4<T>& du) override {
    auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), du);
    for (size_t i = 0; i < segs_.size(); ++i) {
      auto hd = Kokkos::create_mirror_view_and_copy(HostSpace(), drows[i]);
      for (int64_t k = 0; k < 2; ++k) {
        const int64_t r = local_row(segs_[i].pos0 - 2 + k);
        if (r < 0) continue;
        for (size_t b = 0; b < du.extent(0); ++b)
          for (size_t x = 0; x < du.extent(2); ++x)
            for (size_t y = 0; y < du.extent(3); ++y) h(b, r, x, y) += hd(b, k, x, y);
      }
    }
    Kokkos::deep_copy(du, h);
  }
  void forward(const AttentionSpec& spec, const AttentionInputs<T>& in, const ParamSet<T>& params,
               const AttentionOutputs<T>& out) override {
    const AttentionInputs<T> g = to_global(in);
    const AttentionOutputs<T> go = make_outputs(spec, g);
    attention_forward(spec, g, params, go);
    move_rows(go.o, out.o, 1, false);
    move_rows(go.lse, out.lse, 2, false);
  }
  void backward(const AttentionSpec& spec, const AttentionInputs<T>& in, const ParamSet<T>& params,
                const AttentionOutputs<T>& out, const View4<const T>& dout,
                AttentionGrads<T>& grads) override {
    const AttentionInputs<T> g = to_global(in);
    AttentionOutputs<T> go = make_outputs(spec, g);
    move_rows(out.o, go.o, 1, true);
    move_rows(out.lse, go.lse, 2, true);
    View4<T> gdout("gdout", dout.extent(0), dout.extent(1), dout.extent(2), dout.extent(3));
    move_rows(dout, gdout, 1, true);
    AttentionGrads<T> gg = make_grads(spec, g);
    attention_backward(spec, g, params, go, View4<const T>(gdout), gg);
    move_rows(gg.dq, grads.dq, 1, false);
    move_rows(gg.dk, grads.dk, 1, false);
    move_rows(gg.dv, grads.dv, 1, false);
    Kokkos::deep_copy(grads.dparams.data, gg.dparams.data);
    if (gg.dfox_cq.extent(0) > 0) {
      move_rows(gg.dfox_cq, grads.dfox_cq, 1, false);
      move_rows(gg.dfox_ck, grads.dfox_ck, 1, false);
    }
    if (gg.dpath_w.extent(0) > 0) {
      move_rows(gg.dpath_w, grads.dpath_w, 1, false);
      move_rows(gg.dpath_beta, grads.dpath_beta, 1, false);
    }
  }

 private:
  // to_global: dst[.., perm[r], ..] = src[.., r, ..]; otherwise dst[.., r, ..] = src[.., perm[r],
  // ..].
  template <class S, class D>
  void move_rows(const S& src, const D& dst, int axis, bool to_global) const {
    auto s = Kokkos::create_mirror_view_and_copy(HostSpace(), src);
    auto d = Kokkos::create_mirror_view(dst);
    int64_t outer = 1, inner = 1;
    for (int a = 0; a < axis; ++a) outer *= int64_t(src.extent(a));
    for (unsigned a = unsigned(axis) + 1; a < S::rank; ++a) inner *= int64_t(src.extent(a));
    const int64_t L = int64_t(perm_.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t r = 0; r < L; ++r)
        for (int64_t e = 0; e < inner; ++e) {
          const int64_t lr = (o * L + r) * inner + e, gr = (o * L + perm_[size_t(r)]) * inner + e;
          if (to_global)
            d.data()[gr] = s.data()[lr];
          else
            d.data()[lr] = s.data()[gr];
        }
    Kokkos::deep_copy(dst, d);
  }
  template <class V>
  V global_copy(const V& local, int axis) const {
    typename V::non_const_type g("global", local.layout());
    move_rows(local, g, axis, true);
    return g;
  }
  AttentionInputs<T> to_global(const AttentionInputs<T>& in) const {
    AttentionInputs<T> g;
    g.q = global_copy(in.q, 1);
    g.k = global_copy(in.k, 1);
    g.v = global_copy(in.v, 1);
    if (in.fox_cq.extent(0) > 0) {
      g.fox_cq = global_copy(in.fox_cq, 1);
      g.fox_ck = global_copy(in.fox_ck, 1);
    }
    if (in.path_w.extent(0) > 0) {
      g.path_w = global_copy(in.path_w, 1);
      g.path_beta = global_copy(in.path_beta, 1);
    }
    return g;  // positions 0..L-1 in order
  }
  // The local row holding global position p, or -1 before the sequence.
  int64_t local_row(int64_t p) const {
    for (size_t r = 0; r < perm_.size(); ++r)
      if (perm_[r] == p) return int64_t(r);
    return -1;
  }

  std::vector<int64_t> perm_;
  std::vector<RowSegment> segs_;
};

// Zigzag, L = 7 over 2 ranks (4 chunks [0,2) [2,4) [4,6) [6,7)), both ranks' rows on this
// process: rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2. Local order 0 1 6 2 3 4 5.
const std::vector<int64_t> kPerm = {0, 1, 6, 2, 3, 4, 5};
const std::vector<RowSegment> kSegs = {{0, 2, 0}, {2, 1, 6}, {3, 2, 2}, {5, 2, 4}};

void expect_same_as_single_segment(const ModelConfig& cfg) {
  const int64_t B = 2, L = 7;
  const auto batch = test::random_batch(B, L, cfg.vocab_size, 3);
  Model<double> a(cfg, 42), b(cfg, 42);
  test::jitter_params(a, 0.2, 8);
  test::jitter_params(b, 0.2, 8);
  // The permuted batch: local row r of b is global position kPerm[r].
  test::Batch pb{View2<int32_t>("pt", B, L), View2<int32_t>("pl", B, L)};
  auto t = Kokkos::create_mirror_view_and_copy(HostSpace(), batch.tokens);
  auto y = Kokkos::create_mirror_view_and_copy(HostSpace(), batch.labels);
  auto pt = Kokkos::create_mirror_view(pb.tokens);
  auto pl = Kokkos::create_mirror_view(pb.labels);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t r = 0; r < L; ++r) {
      pt(i, r) = t(i, kPerm[size_t(r)]);
      pl(i, r) = y(i, kPerm[size_t(r)]);
    }
  Kokkos::deep_copy(pb.tokens, pt);
  Kokkos::deep_copy(pb.labels, pl);

  LocalAttention<double> local;
  PermutedRunner<double> zigzag(kPerm, kSegs);
  a.zero_grad();
  b.zero_grad();
  const double la = a.forward(batch.tokens, batch.labels, local);
  const double lb = b.forward(pb.tokens, pb.labels, zigzag);
  a.backward(local);
  b.backward(zigzag);
  // Only summation order differs (rows in another order): agreement to ~1e-15 relative.
  EXPECT_NEAR(la, lb, 1e-12 * std::abs(la));
  auto ga = Kokkos::create_mirror_view_and_copy(HostSpace(), a.grads());
  auto gb = Kokkos::create_mirror_view_and_copy(HostSpace(), b.grads());
  double scale = 0;
  for (size_t i = 0; i < ga.extent(0); ++i) scale = std::max(scale, std::abs(ga(i)));
  for (const auto& e : a.layout().params().entries())
    for (int64_t j = 0; j < e.size(); ++j)
      ASSERT_NEAR(ga(e.offset + j), gb(e.offset + j), 1e-12 * scale) << e.name << "[" << j << "]";
}

TEST(RunnerSegments, FoXZigzagEqualsSingleSegment) {
  expect_same_as_single_segment(test::tiny_config(Scheme::FoX));
}

TEST(RunnerSegments, GOATZigzagEqualsSingleSegment) {
  expect_same_as_single_segment(test::tiny_config(Scheme::GOAT));
}

// PaTH's convolution crosses segment boundaries: the one-row segment at position 6 reads
// positions 4 and 5 from another segment, the segment at 2 reads 0 and 1.
TEST(RunnerSegments, PaTHZigzagEqualsSingleSegment) {
  expect_same_as_single_segment(test::tiny_config(Scheme::PaTH));
}

TEST(RunnerSegments, PaTHFoXZigzagEqualsSingleSegment) {
  expect_same_as_single_segment(test::tiny_config(Scheme::PaTHFoX));
}

}  // namespace
}  // namespace lcr
