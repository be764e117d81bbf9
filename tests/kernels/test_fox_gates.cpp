// FoX forget gates (kernels/schemes/fox): c = offset + cumsum(log sigmoid(x)) against the
// definition, c_i - c_j against the explicit bias sum_{s=j+1..i} log f_s, the ring's
// prefix offset, the backward (reverse cumulative sum), and the whole training chain
// gates -> c -> FoX / PaTH-FoX attention -> d gates against dual numbers.
#include <gtest/gtest.h>

#include "kernels/schemes/fox/fox.hpp"
#include "kernels/test_path_support.hpp"

namespace lcr::test::pathtest {
namespace {

H3<double> random_gates(int B, int L, int H, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01;
  H3<double> x("x", B, L, H);
  for (size_t i = 0; i < x.span(); ++i) x.data()[i] = 2.0 + 1.5 * n01(rng);
  return x;
}

// out = a + b. Device lambdas live outside TEST bodies: gtest puts those in private
// member functions, where CUDA forbids extended lambdas.
void add_elementwise(const View3<double>& a, const View3<double>& b, const View3<double>& out) {
  Kokkos::parallel_for(
      "sum", out.span(), KOKKOS_LAMBDA(int i) { out.data()[i] = a.data()[i] + b.data()[i]; });
}

TEST(FoxGates, CumulativeMatchesDefinitionAndExplicitBias) {
  const int B = 2, L = 31, H = 3;
  const H3<double> x = random_gates(B, L, H, 4);
  View2<double, HostSpace> off("off", B, H);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) off(b, h) = -3.0 * (b + h);
  const auto want = ref::fox_cumulative<double>(x, off);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    View2<T> offd("off", B, H);
    auto m = Kokkos::create_mirror_view(offd);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) m(b, h) = T(off(b, h));
    Kokkos::deep_copy(offd, m);
    View3<T> c("c", B, L, H);
    fox::cumulative_log_gates<T>(to_device<T>(x, "x"), offd, c);
    return flat(c);
  };
  const auto c64 = run(double()), c32 = run(float());
  for (size_t i = 0; i < c64.size(); ++i) {
    EXPECT_NEAR(c64[i], want.data()[i], 1e-13);
    // float32: only the final rounding of |c| <= ~40 (the sum is kept in double)
    EXPECT_NEAR(c32[i], want.data()[i], 4e-6);
  }
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < L; ++i)
        for (int j = 0; j <= i; ++j)
          EXPECT_NEAR(c64[(b * L + i) * H + h] - c64[(b * L + j) * H + h],
                      ref::fox_explicit_bias(x, b, h, i, j), 1e-12);
}

// A context-parallel rank: c of the second shard, with the first shard's c at its last
// position as offset, equals the global c.
TEST(FoxGates, OffsetMakesShardsGlobal) {
  const int L = 40, m = 17;
  const H3<double> x = random_gates(1, L, 2, 8);
  View3<double> c("c", 1, L, 2), c1("c1", 1, m, 2), c2("c2", 1, L - m, 2);
  fox::cumulative_log_gates<double>(to_device<double>(x, "x"), {}, c);
  H3<double> x1("x1", 1, m, 2), x2("x2", 1, L - m, 2);
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < 2; ++h) (t < m ? x1(0, t, h) : x2(0, t - m, h)) = x(0, t, h);
  fox::cumulative_log_gates<double>(to_device<double>(x1, "x1"), {}, c1);
  View2<double> off("off", 1, 2);
  Kokkos::deep_copy(Kokkos::subview(off, 0, Kokkos::ALL),
                    Kokkos::subview(c1, 0, m - 1, Kokkos::ALL));
  fox::cumulative_log_gates<double>(to_device<double>(x2, "x2"), off, c2);
  const auto whole = flat(c), tail = flat(c2);
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_NEAR(tail[i], whole[m * 2 + i], 1e-12);
}

TEST(FoxGates, BackwardIsReverseCumulativeSum) {
  const int B = 1, L = 13, H = 2;
  H3<double> x = random_gates(B, L, H, 2), dc = random_gates(B, L, H, 3);
  View3<double> dx("dx", B, L, H);
  View2<double> doff("doff", B, H);
  fox::cumulative_log_gates_backward<double>(to_device<double>(x, "x"), to_device<double>(dc, "dc"),
                                             dx, doff);
  const auto g = flat(dx), go = flat(doff);
  auto loss = [&](const H3<double>& xx, double shift) {
    View2<double, HostSpace> off("off", B, H);
    Kokkos::deep_copy(off, shift);
    const auto c = ref::fox_cumulative<double>(xx, off);
    double l = 0;
    for (size_t i = 0; i < c.span(); ++i) l += dc.data()[i] * c.data()[i];
    return l;
  };
  for (size_t i = 0; i < x.span(); ++i) {
    const double x0 = x.data()[i];
    x.data()[i] = x0 + 1e-6;
    const double lp = loss(x, 0);
    x.data()[i] = x0 - 1e-6;
    const double lm = loss(x, 0);
    x.data()[i] = x0;
    // loss ~ 1e2: rounding 1e-16 * 1e2 / 1e-6 = 1e-8, truncation ~1e-12
    EXPECT_NEAR(g[i], (lp - lm) / 2e-6, 1e-7 * std::max(1.0, std::abs(g[i])));
  }
  // every c_t moves one-for-one with the offset: d loss / d offset[b, h] = sum_t dc_t
  EXPECT_NEAR(go[0] + go[1], (loss(x, 1e-3) - loss(x, -1e-3)) / 2e-3, 1e-9);
}

// The training chain for PaTH-FoX: gate logits x -> c (this unit) -> attention -> dc =
// dfox_cq + dfox_ck -> dx, against the exact directional derivative of the reference
// built from x. Also for the dot-product FoX scheme (sdpa bias lanes).
TEST(FoxGates, GatesThroughAttentionMatchDualReference) {
  for (Scheme scheme : {Scheme::PaTHFoX, Scheme::FoX}) {
    SCOPED_TRACE(scheme_name(scheme));
    PathCase pc;
    pc.spec.scheme = scheme;
    pc.spec.heads = 2;
    pc.spec.kv_heads = 1;
    pc.spec.head_dim = 8;
    pc.spec.path.block_size = 4;
    pc.L = 19;
    pc.pos0 = 50;
    pc.seed = 77;
    PathProblem p = make_path_problem(pc);
    const H3<double> x = random_gates(1, pc.L, 2, 5);
    View2<double> off("off", 1, 2);
    Kokkos::deep_copy(off, -4.0);  // the gates of positions 0..49 (another rank's)
    const View3<double> xd = to_device<double>(x, "x");
    View3<double> c("c", 1, pc.L, 2);
    fox::cumulative_log_gates<double>(xd, off, c);
    AttentionInputs<double> in = device_inputs<double>(p);
    in.fox_cq = in.fox_ck = c;
    if (!is_path(scheme)) in.path_w = {}, in.path_beta = {};
    ParamSet<double> params(p.params.layout);
    auto out = make_outputs<double>(pc.spec, in);
    attention_forward<double>(pc.spec, in, params, out);
    auto g = make_grads<double>(pc.spec, in);
    attention_backward<double>(pc.spec, in, params, out, to_device<double>(p.dout, "dout"), g);
    View3<double> dc("dc", 1, pc.L, 2), dx("dx", 1, pc.L, 2);
    add_elementwise(g.dfox_cq, g.dfox_ck, dc);
    fox::cumulative_log_gates_backward<double>(xd, dc, dx, {});
    const auto gx = flat(dx);

    std::mt19937_64 rng(9);
    std::normal_distribution<double> n01;
    H3<ref::Dual> xdual("xdual", 1, pc.L, 2);
    double ug = 0;
    for (size_t i = 0; i < x.span(); ++i) {
      const double u = n01(rng);
      xdual.data()[i] = ref::Dual(x.data()[i], u);
      ug += u * gx[i];
    }
    View2<ref::Dual, HostSpace> offd("offd", 1, 2);
    Kokkos::deep_copy(offd, ref::Dual(-4.0));
    const auto cdual = ref::fox_cumulative<ref::Dual>(xdual, offd);
    double exact = 0;
    if (is_path(scheme)) {
      auto r = to_ref<ref::Dual>(p, "", {});
      r.fox_cq = r.fox_ck = cdual;
      const auto o = ref::path_reference_forward<ref::Dual>(pc.spec, r).o;
      for (size_t i = 0; i < o.span(); ++i) exact += o.data()[i].t * p.dout.data()[i];
    } else {
      auto r = to_ref<ref::Dual>(p, "", {});
      ref::RefInputs<ref::Dual> ri;
      ri.q = r.q;
      ri.k = r.k;
      ri.v = r.v;
      ri.q_pos0 = ri.k_pos0 = pc.pos0;
      ri.fox_cq = ri.fox_ck = cdual;
      ri.params = r.params;
      const auto o = ref::reference_forward<ref::Dual>(pc.spec, ri).o;
      for (size_t i = 0; i < o.span(); ++i) exact += o.data()[i].t * p.dout.data()[i];
    }
    EXPECT_NEAR(ug, exact, 1e-10 * (1 + std::abs(exact)));
  }
}

}  // namespace
}  // namespace lcr::test::pathtest
