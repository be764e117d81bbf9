// The algebra the context-parallel ring relies on (DESIGN.md section 5), on the functions
// of kernels/schemes/path/ring.hpp: split a sequence into chunks, fold keys right and
// queries left per chunk, chain the chunk transitions, and reproduce the unsplit logits
// k_j^T H_{j+1} ... H_i q_i; each quantity against its definition; every backward
// against dual-number directional derivatives and finite differences.
#include <gtest/gtest.h>

#include "kernels/schemes/path/ring.hpp"
#include "kernels/test_path_support.hpp"

namespace lcr::test::pathtest {
namespace {

using HV4 = H4<double>;

// Rows [s, s + n) of a host tensor [B, L, X, d], as a device view in precision T.
template <class T>
View4<T> rows4(const HV4& x, int s, int n) {
  HV4 part("part", x.extent(0), n, x.extent(2), x.extent(3));
  for (size_t b = 0; b < x.extent(0); ++b)
    for (int i = 0; i < n; ++i)
      for (size_t h = 0; h < x.extent(2); ++h)
        for (size_t c = 0; c < x.extent(3); ++c) part(b, i, h, c) = x(b, s + i, h, c);
  return to_device<T>(part, "rows");
}
template <class T>
View3<T> rows3(const H3<double>& x, int s, int n) {
  H3<double> part("part", x.extent(0), n, x.extent(2));
  for (size_t b = 0; b < x.extent(0); ++b)
    for (int i = 0; i < n; ++i)
      for (size_t h = 0; h < x.extent(2); ++h) part(b, i, h) = x(b, s + i, h);
  return to_device<T>(part, "rows");
}

// One chunk's ring quantities, on the host in float64.
struct ChunkQuantities {
  int s, n;
  std::vector<double> k_fold, q_fold, p;  // flat [1, n, Hkv, d], [1, n, H, d], [1, Hkv, d, d]
};

template <class T>
ChunkQuantities chunk_quantities(const PathProblem& pr, int s, int n, int block) {
  const int Hkv = pr.c.spec.kv_heads, d = pr.c.spec.head_dim;
  const View4<T> w = rows4<T>(pr.w, s, n), k = rows4<T>(pr.k, s, n), q = rows4<T>(pr.q, s, n);
  const View3<T> beta = rows3<T>(pr.beta, s, n);
  View4<T> kf("kf", 1, n, Hkv, d), qf("qf", 1, n, pr.c.spec.heads, d), p("p", 1, Hkv, d, d);
  path::fold_keys_right<T>(w, beta, k, block, kf);
  path::fold_queries_left<T>(w, beta, q, block, qf);
  path::chunk_transition<T>(w, beta, block, p);
  return {s, n, flat(kf), flat(qf), flat(p)};
}

// Runs the ring algebra in precision T and returns the largest logit error against the
// explicit unsplit product (and checks each folded quantity against its definition).
template <class T>
double ring_logit_error(const PathProblem& pr, const std::vector<int>& bounds, int block) {
  const int H = pr.c.spec.heads, Hkv = pr.c.spec.kv_heads, d = pr.c.spec.head_dim, G = H / Hkv;
  const auto in = to_ref<double>(pr, "", {});
  std::vector<ChunkQuantities> ch;
  for (size_t c = 0; c + 1 < bounds.size(); ++c)
    ch.push_back(chunk_quantities<T>(pr, bounds[c], bounds[c + 1] - bounds[c], block));
  double err = 0;
  auto upd = [&](double a, double b) { err = std::max(err, std::abs(a - b)); };
  for (const auto& c : ch)  // folded quantities against their definitions
    for (int h = 0; h < H; ++h) {
      const int hk = h / G;
      const auto P = ref::transition_matrix(in.w, in.beta, 0, hk, c.s, c.s + c.n - 1);
      for (int x = 0; x < d * d; ++x) upd(c.p[hk * d * d + x], P[x]);
      for (int i = 0; i < c.n; ++i) {
        const auto kf = ref::fold_key_right(in, 0, hk, c.s + i, c.s + c.n - 1);
        const auto qf = ref::fold_query_left(in, 0, h, hk, c.s + i, c.s);
        for (int x = 0; x < d; ++x) {
          upd(c.k_fold[(i * Hkv + hk) * d + x], kf[x]);
          upd(c.q_fold[(i * H + h) * d + x], qf[x]);
        }
      }
    }
  // Cross-chunk logits: y = P_{b+1} ... P_{a-1} q~_i (multiplied right to left), k~_j . y.
  for (size_t a = 1; a < ch.size(); ++a)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < ch[a].n; ++i) {
        const int hk = h / G;
        std::vector<double> y(&ch[a].q_fold[(i * H + h) * d], &ch[a].q_fold[(i * H + h) * d] + d);
        for (size_t b = a; b-- > 0;) {
          for (int j = 0; j < ch[b].n; ++j) {
            double dot = 0;
            for (int x = 0; x < d; ++x) dot += ch[b].k_fold[(j * Hkv + hk) * d + x] * y[x];
            upd(dot, ref::path_logit_explicit(in, 0, h, hk, ch[a].s + i, ch[b].s + j));
          }
          std::vector<double> z(d, 0.0);  // y <- P_b y before the next chunk to the left
          for (int r = 0; r < d; ++r)
            for (int x = 0; x < d; ++x) z[r] += ch[b].p[hk * d * d + r * d + x] * y[x];
          y = z;
        }
      }
  return err;
}

PathProblem ring_problem(int L, int H, int Hkv, int d, uint64_t seed) {
  PathCase c;
  c.spec.scheme = Scheme::PaTH;
  c.spec.heads = H;
  c.spec.kv_heads = Hkv;
  c.spec.head_dim = d;
  c.L = L;
  c.seed = seed;
  return make_path_problem(c);
}

// Chunks of unequal lengths, block sizes that do not divide them; float64 to rounding,
// float32 to its precision over chains of up to ~L/B products.
TEST(PathRing, ChunksReproduceUnsplitLogits) {
  const PathProblem pr = ring_problem(61, 4, 2, 8, 11);
  const std::vector<int> bounds{0, 13, 14, 35, 61};  // a chunk of length 1 too
  EXPECT_LT(ring_logit_error<double>(pr, bounds, 4), 1e-12);
  EXPECT_LT(ring_logit_error<double>(pr, bounds, 64), 1e-12);  // one block per chunk
  EXPECT_LT(ring_logit_error<float>(pr, bounds, 5), 2e-5);
}

// Backward of the three chunk functions and apply_transition: loss = <Rk, k~> + <Rq, q~> +
// <RP, P> + <Ry, P x>, gradients against dual numbers (exact) and finite differences.
struct RingLoss {
  const PathProblem& pr;
  std::vector<double> rk, rq, rp;
  template <class S>
  S operator()(const ref::PathRefInputs<S>& in) const {
    const int L = pr.c.L, H = pr.c.spec.heads, Hkv = pr.c.spec.kv_heads;
    const int d = pr.c.spec.head_dim, G = H / Hkv;
    S loss = S(0);
    for (int hk = 0; hk < Hkv; ++hk) {
      const auto P = ref::transition_matrix(in.w, in.beta, 0, hk, 0, L - 1);
      for (int x = 0; x < d * d; ++x) loss += rp[hk * d * d + x] * P[x];
    }
    for (int i = 0; i < L; ++i)
      for (int h = 0; h < H; ++h) {
        const auto qf = ref::fold_query_left(in, 0, h, h / G, i, 0);
        for (int x = 0; x < d; ++x) loss += rq[(i * H + h) * d + x] * qf[x];
        if (h % G) continue;
        const auto kf = ref::fold_key_right(in, 0, h / G, i, L - 1);
        for (int x = 0; x < d; ++x) loss += rk[(i * Hkv + h / G) * d + x] * kf[x];
      }
    return loss;
  }
};

TEST(PathRing, BackwardMatchesDualAndFiniteDifferences) {
  PathProblem pr = ring_problem(19, 2, 1, 6, 23);
  const int L = 19, H = 2, Hkv = 1, d = 6, block = 4;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> n01;
  RingLoss f{pr, {}, {}, {}};
  for (auto* r : {&f.rk, &f.rq, &f.rp}) {
    const size_t n = r == &f.rk ? L * Hkv * d : r == &f.rq ? L * H * d : Hkv * d * d;
    for (size_t i = 0; i < n; ++i) r->push_back(n01(rng));
  }
  auto dev = [&](const std::vector<double>& v, std::vector<int64_t> s) {
    HV4 h("r", s[0], s[1], s[2], s[3]);
    for (size_t i = 0; i < v.size(); ++i) h.data()[i] = v[i];
    return to_device<double>(h, "r");
  };
  const View4<double> w = to_device<double>(pr.w, "w"), q = to_device<double>(pr.q, "q");
  const View4<double> k = to_device<double>(pr.k, "k");
  const View3<double> beta = to_device<double>(pr.beta, "beta");
  View4<double> dq("dq", 1, L, H, d), dk("dk", 1, L, Hkv, d), dw("dw", 1, L, Hkv, d);
  View3<double> dbeta("dbeta", 1, L, Hkv);
  path::fold_keys_right_backward<double>(w, beta, k, block, dev(f.rk, {1, L, Hkv, d}), dk, dw,
                                         dbeta);
  path::fold_queries_left_backward<double>(w, beta, q, block, dev(f.rq, {1, L, H, d}), dq, dw,
                                           dbeta);
  path::chunk_transition_backward<double>(w, beta, block, dev(f.rp, {1, Hkv, d, d}), dw, dbeta);
  const std::map<std::string, std::vector<double>> grad{
      {"q", flat(dq)}, {"k", flat(dk)}, {"path_w", flat(dw)}, {"path_beta", flat(dbeta)}};
  for (const auto& [name, g] : grad) {
    SCOPED_TRACE("input " + name);
    std::vector<double> u(g.size());
    double ug = 0, uu = 0, gg = 0;
    for (size_t i = 0; i < u.size(); ++i) {
      u[i] = n01(rng);
      ug += u[i] * g[i];
      uu += u[i] * u[i];
      gg += g[i] * g[i];
    }
    const double exact = f(to_ref<ref::Dual>(pr, name, u)).t;
    EXPECT_NEAR(ug, exact, 1e-10 * std::sqrt(uu * gg));
    for (size_t s = 0; s < 12; ++s) {  // finite differences, step 1e-6
      const size_t i = rng() % g.size();
      double* x = path_input_data(pr, name) + i;
      const double x0 = *x;
      *x = x0 + 1e-6;
      const double lp = f(to_ref<double>(pr, "", {}));
      *x = x0 - 1e-6;
      const double lm = f(to_ref<double>(pr, "", {}));
      *x = x0;
      EXPECT_NEAR(g[i], (lp - lm) / 2e-6, 1e-6 * std::max(1.0, std::abs(g[i]))) << "element " << i;
    }
  }
}

TEST(PathRing, ApplyTransitionAndBackward) {
  const int B = 2, L = 5, H = 4, Hkv = 2, d = 3;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n01;
  HV4 p("p", B, Hkv, d, d), x("x", B, L, H, d), dy("dy", B, L, H, d);
  for (auto* v : {&p, &x, &dy})
    for (size_t i = 0; i < v->span(); ++i) v->data()[i] = n01(rng);
  View4<double> y("y", B, L, H, d), dp("dp", B, Hkv, d, d), dx("dx", B, L, H, d);
  const auto pd = to_device<double>(p, "p"), xd = to_device<double>(x, "x");
  path::apply_transition<double>(pd, xd, y);
  path::apply_transition_backward<double>(pd, xd, to_device<double>(dy, "dy"), dp, dx);
  const auto yh = flat(y), dph = flat(dp), dxh = flat(dx);
  HV4 dp_ref("dp_ref", B, Hkv, d, d);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < L; ++i)
      for (int h = 0; h < H; ++h)
        for (int r = 0; r < d; ++r) {
          double yr = 0, dxr = 0;
          for (int c = 0; c < d; ++c) {
            yr += p(b, h / 2, r, c) * x(b, i, h, c);
            dxr += p(b, h / 2, c, r) * dy(b, i, h, c);
            dp_ref(b, h / 2, r, c) += dy(b, i, h, r) * x(b, i, h, c);
          }
          EXPECT_NEAR(yh[((b * L + i) * H + h) * d + r], yr, 1e-13);
          EXPECT_NEAR(dxh[((b * L + i) * H + h) * d + r], dxr, 1e-13);
        }
  for (size_t i = 0; i < dp_ref.span(); ++i) EXPECT_NEAR(dph[i], dp_ref.data()[i], 1e-12);
}

}  // namespace
}  // namespace lcr::test::pathtest
