// PaTH and PaTH-FoX in the model (core/model/path.hpp): parameter slices, init and decay
// groups; the layer's w and beta against their definition; the attention output and the
// probe statistics against attention computed from explicit d x d transition products.
// Gradients are in test_model_gradients.cpp, segments in test_runner_segments.cpp, context
// parallelism in mpi/test_model_ring.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/model/optimizer.hpp"
#include "core/model/stats.hpp"
#include "kernels/schemes/path/params.hpp"
#include "model_test_util.hpp"

namespace lcr {
namespace {

using HostMat = std::vector<std::vector<double>>;

// Host copy of a named parameter slice.
std::vector<double> slice(const Model<double>& m, const std::string& name) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), m.params());
  const auto& e = m.layout().params().at(name);
  return std::vector<double>(h.data() + e.offset, h.data() + e.offset + e.size());
}

ModelConfig path_config(Scheme s) {
  ModelConfig c = test::tiny_config(s);
  c.attention.numerics.sink = true;
  c.attention.numerics.qk_norm = true;
  c.attention.numerics.softcap = 2.5;
  return c;
}

TEST(PathModel, SlicesInitAndDecayGroups) {
  ModelConfig c = test::tiny_config(Scheme::PaTHFoX);
  c.init_std = 0.02;
  Model<double> m(c, 7);
  const ModelLayout& L = m.layout();
  const auto& P = L.params();
  EXPECT_EQ(P.at("layers.1.path_u").shape, (std::vector<int64_t>{16, 1 * 8}));  // [D, Hkv d]
  EXPECT_EQ(P.at("layers.1.path_conv").shape, (std::vector<int64_t>{1, 8, 3}));
  EXPECT_EQ(P.at("layers.0.path_beta_w").shape, (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(P.at("layers.0.path_beta_b").shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(P.at("layers.0.fox_w").shape, (std::vector<int64_t>{16, 2}));  // PaTH-FoX gate
  EXPECT_EQ(L.kind(P.at("layers.0.path_u")), ParamKind::Matrix);
  EXPECT_EQ(L.kind(P.at("layers.0.path_conv")), ParamKind::Filter);
  EXPECT_EQ(L.kind(P.at("layers.0.path_beta_b")), ParamKind::Bias);
  for (const auto& r : model_param_ranges(L, AdamWConfig{})) {
    if (r.name.find("path_") == std::string::npos) continue;
    const bool matrix = r.name.find("path_u") != std::string::npos ||
                        r.name.find("path_beta_w") != std::string::npos;
    EXPECT_EQ(r.decay, matrix) << r.name;
  }
  EXPECT_EQ(slice(m, "layers.0.path_beta_b"), std::vector<double>{0.0});  // beta = 1 at init
  double ss = 0;
  for (double x : slice(m, "layers.1.path_conv")) ss += x * x;
  EXPECT_GT(std::sqrt(ss / 24), 0.005);  // N(0, 0.02^2) draws, not zeros
  EXPECT_FALSE(ModelLayout(test::tiny_config(Scheme::FoX)).params().has("layers.0.path_u"));
}

// w_t = y_t / |y_t| with y = silu(conv3(xn1 Wu)) (zeros before position 0) and
// beta_t = 2 sigmoid(xn1 Wb + b), recomputed on the host from the saved xn1.
TEST(PathModel, WAndBetaFollowTheirDefinition) {
  for (int64_t Lseq : {1, 7, 129}) {
    for (bool silu : {true, false}) {
      SCOPED_TRACE("L = " + std::to_string(Lseq) + (silu ? " silu" : " plain"));
      ModelConfig c = test::tiny_config(Scheme::PaTH);
      c.path_w_silu = silu;
      c.attention.kv_heads = 2;
      Model<double> m(c, 3);
      test::jitter_params(m, 0.2, 5);
      const int64_t B = 2, D = 16, K = 2, d = 8;
      const auto batch = test::random_batch(B, Lseq, c.vocab_size, 9);
      LocalAttention<double> attn;
      m.forward(batch.tokens, batch.labels, attn);
      for (int l = 0; l < 2; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        const auto Wu = slice(m, p + "path_u"), conv = slice(m, p + "path_conv");
        const auto Wb = slice(m, p + "path_beta_w"), bb = slice(m, p + "path_beta_b");
        auto xn = Kokkos::create_mirror_view_and_copy(HostSpace(), m.activations().layers[l].xn1);
        const auto in = m.attention_inputs(l);
        auto w = Kokkos::create_mirror_view_and_copy(HostSpace(), in.path_w);
        auto beta = Kokkos::create_mirror_view_and_copy(HostSpace(), in.path_beta);
        auto u = [&](int64_t b, int64_t t, int64_t col) {
          if (t < 0) return 0.0;
          double s = 0;
          for (int64_t e = 0; e < D; ++e) s += xn(b * Lseq + t, e) * Wu[size_t(e * K * d + col)];
          return s;
        };
        for (int64_t b = 0; b < B; ++b)
          for (int64_t t = 0; t < Lseq; ++t)
            for (int64_t h = 0; h < K; ++h) {
              std::vector<double> y(static_cast<size_t>(d));
              double nrm = 0;
              for (int64_t ch = 0; ch < d; ++ch) {
                const int64_t col = h * d + ch;
                double z = 0;
                for (int64_t k = 0; k < 3; ++k)
                  z += conv[size_t(col * 3 + k)] * u(b, t - 2 + k, col);
                y[size_t(ch)] = silu ? z / (1 + std::exp(-z)) : z;
                nrm += y[size_t(ch)] * y[size_t(ch)];
              }
              for (int64_t ch = 0; ch < d; ++ch)
                ASSERT_NEAR(w(b, t, h, ch), y[size_t(ch)] / std::sqrt(nrm), 1e-12);
              double z = bb[size_t(h)];
              for (int64_t e = 0; e < D; ++e) z += xn(b * Lseq + t, e) * Wb[size_t(e * K + h)];
              ASSERT_NEAR(beta(b, t, h), 2 / (1 + std::exp(-z)), 1e-13);
            }
      }
    }
  }
}

// Attention of layer l by the definition with explicit matrices M = H_{j+1} ... H_i:
// logit = softcap(k_j^T M q_i / sqrt(d) + c_i - c_j), softmax with the sink. Returns
// p[b][h][i][j] (sink mass left out).
std::vector<std::vector<HostMat>> reference_probs(const Model<double>& m, int l) {
  const AttentionSpec& s = m.config().attention;
  const auto in = m.attention_inputs(l);
  auto q = Kokkos::create_mirror_view_and_copy(HostSpace(), in.q);
  auto k = Kokkos::create_mirror_view_and_copy(HostSpace(), in.k);
  auto w = Kokkos::create_mirror_view_and_copy(HostSpace(), in.path_w);
  auto beta = Kokkos::create_mirror_view_and_copy(HostSpace(), in.path_beta);
  auto c = Kokkos::create_mirror_view_and_copy(HostSpace(), in.fox_cq);
  const std::string p = "layers." + std::to_string(l) + ".attn.";
  const auto gq = slice(m, p + "qk_norm.q_gain"), gk = slice(m, p + "qk_norm.k_gain");
  const auto sink = slice(m, p + "sink");
  const int64_t B = q.extent(0), L = q.extent(1), d = s.head_dim;
  const double eps = s.numerics.qk_norm_eps, cap = s.numerics.softcap;
  auto normed = [&](auto& x, int64_t b, int64_t t, int64_t h, const std::vector<double>& g) {
    double ms = 0;
    for (int64_t e = 0; e < d; ++e) ms += x(b, t, h, e) * x(b, t, h, e) / double(d);
    std::vector<double> y(static_cast<size_t>(d));
    for (int64_t e = 0; e < d; ++e)
      y[size_t(e)] = x(b, t, h, e) / std::sqrt(ms + eps) * g[size_t(e)];
    return y;
  };
  std::vector<std::vector<HostMat>> out(size_t(B), std::vector<HostMat>(size_t(s.heads)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t hk = h / s.group();
      HostMat& P = out[size_t(b)][size_t(h)];
      P.assign(size_t(L), std::vector<double>(size_t(L), 0.0));
      for (int64_t i = 0; i < L; ++i) {
        const auto qi = normed(q, b, i, h, gq);
        HostMat M(size_t(d), std::vector<double>(size_t(d), 0.0));  // H_{j+1} ... H_i
        for (int64_t e = 0; e < d; ++e) M[size_t(e)][size_t(e)] = 1;
        std::vector<double> logit(size_t(i + 1));
        double mx = sink[size_t(h)];
        for (int64_t j = i; j >= 0; --j) {
          const auto kj = normed(k, b, j, hk, gk);
          double raw = 0;
          for (int64_t r = 0; r < d; ++r)
            for (int64_t e = 0; e < d; ++e)
              raw += kj[size_t(r)] * M[size_t(r)][size_t(e)] * qi[size_t(e)];
          double x = raw / std::sqrt(double(d));
          if (uses_fox(s.scheme)) x += c(b, i, h) - c(b, j, h);
          logit[size_t(j)] = cap * std::tanh(x / cap);
          mx = std::max(mx, logit[size_t(j)]);
          // M <- H_j M = M - beta_j w_j (w_j^T M)
          std::vector<double> wm(size_t(d), 0.0);
          for (int64_t r = 0; r < d; ++r)
            for (int64_t e = 0; e < d; ++e)
              wm[size_t(e)] += w(b, j, hk, r) * M[size_t(r)][size_t(e)];
          for (int64_t r = 0; r < d; ++r)
            for (int64_t e = 0; e < d; ++e)
              M[size_t(r)][size_t(e)] -= beta(b, j, hk) * w(b, j, hk, r) * wm[size_t(e)];
        }
        double z = std::exp(sink[size_t(h)] - mx);
        for (int64_t j = 0; j <= i; ++j) z += std::exp(logit[size_t(j)] - mx);
        for (int64_t j = 0; j <= i; ++j)
          P[size_t(i)][size_t(j)] = std::exp(logit[size_t(j)] - mx) / z;
      }
    }
  return out;
}

// The model's attention output (the blockwise kernel on the model's w, beta) and the probe
// statistics (vector walk over keys) both against the explicit-matrix definition.
// Tolerance 1e-10: float64 sums of O(L d^2) terms of size O(1) differ by ~1e-14.
TEST(PathModel, AttentionAndProbeStatsMatchExplicitTransitions) {
  for (Scheme sc : {Scheme::PaTH, Scheme::PaTHFoX}) {
    for (int64_t L : {7, 40}) {
      SCOPED_TRACE(std::string(scheme_name(sc)) + " L = " + std::to_string(L));
      Model<double> m(path_config(sc), 21);
      test::jitter_params(m, 0.3, 2);
      const auto batch = test::random_batch(2, L, 11, 13);
      LocalAttention<double> attn;
      m.forward(batch.tokens, batch.labels, attn);
      const auto stats = attention_probe_stats(m, {int(L), 1});  // every row of sequence 0
      for (int l = 0; l < 2; ++l) {
        const auto P = reference_probs(m, l);
        const auto in = m.attention_inputs(l);
        auto v = Kokkos::create_mirror_view_and_copy(HostSpace(), in.v);
        auto o = Kokkos::create_mirror_view_and_copy(HostSpace(), m.attention_outputs(l).o);
        const int H = m.config().attention.heads, group = m.config().attention.group();
        const int dv = int(v.extent(3));
        for (int64_t b = 0; b < 2; ++b)
          for (int h = 0; h < H; ++h)
            for (int64_t i = 0; i < L; ++i)
              for (int e = 0; e < dv; ++e) {
                double ref = 0;
                for (int64_t j = 0; j <= i; ++j)
                  ref += P[size_t(b)][size_t(h)][size_t(i)][size_t(j)] * v(b, j, h / group, e);
                ASSERT_NEAR(o(b, i, h, e), ref, 1e-10)
                    << "layer " << l << " b " << b << " h " << h << " i " << i;
              }
        for (int h = 0; h < H; ++h) {
          const HostMat& p0 = P[0][size_t(h)];
          double ent = 0, first = 0;
          for (int64_t i = 0; i < L; ++i) {
            double sum = 0;
            for (int64_t j = 0; j <= i; ++j) {
              const double x = p0[size_t(i)][size_t(j)];
              ent -= x > 0 ? x * std::log(x) : 0.0;
              sum += x;
            }
            const double ps = 1 - sum;  // the sink's share
            ent -= ps > 0 ? ps * std::log(ps) : 0.0;
            first += p0[size_t(i)][0];
          }
          EXPECT_NEAR(stats[size_t(l)][size_t(h)].entropy, ent / double(L), 1e-10);
          EXPECT_NEAR(stats[size_t(l)][size_t(h)].first_token_mass, first / double(L), 1e-10);
          EXPECT_LE(stats[size_t(l)][size_t(h)].max_logit, 2.5);  // softcap
        }
      }
    }
  }
}

}  // namespace
}  // namespace lcr
