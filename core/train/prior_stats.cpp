#include "core/train/prior_stats.hpp"

#include <cmath>
#include <limits>

#include "core/model/stats.hpp"
#include "kernels/base/error.hpp"
#include "kernels/schemes/goat/goat.hpp"
#include "kernels/schemes/rope/rope.hpp"

namespace lcr::train {
namespace {

// One layer's attention parameters as a float64 host ParamSet (what goat:: statistics take).
template <class T>
ParamSet<double, HostSpace> host_params(const Model<T>& model, int l) {
  const ParamSet<T> p = model.attention_params(l);
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), p.data);
  ParamSet<double, HostSpace> out(p.layout, "probe_params");
  for (size_t i = 0; i < h.extent(0); ++i) out.data(i) = double(h(i));
  return out;
}

// Mean over (batch, rows) of the norm of each (head, pair) of x [B, L, Hx, width], where pair
// m is the lanes (a(m), b(m)). Returns [Hx * pairs] row-major.
template <class V, class Pair>
std::vector<double> mean_pair_norms(const V& x, int64_t pairs, Pair pair) {
  const int64_t B = x.extent(0), L = x.extent(1), Hx = x.extent(2);
  std::vector<double> out(size_t(Hx * pairs), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t h = 0; h < Hx; ++h)
        for (int64_t m = 0; m < pairs; ++m) {
          const auto ab = pair(m);
          const double u = double(x(b, i, h, ab.first)), v = double(x(b, i, h, ab.second));
          out[size_t(h * pairs + m)] += std::sqrt(u * u + v * v);
        }
  for (double& o : out) o /= double(B * L);
  return out;
}

}  // namespace

std::vector<int64_t> prior_lags(int64_t max_len) {
  std::vector<int64_t> lags;
  for (int64_t l = 0; l < std::min<int64_t>(32, max_len); ++l) lags.push_back(l);
  for (double x = 32; x < double(max_len - 1); x *= std::pow(2.0, 1.0 / 8)) {
    const int64_t l = int64_t(std::llround(x));
    if (l > lags.back() && l < max_len - 1) lags.push_back(l);
  }
  if (max_len - 1 > lags.back()) lags.push_back(max_len - 1);
  return lags;
}

io::PriorShapes prior_shapes(const TrainConfig& cfg) {
  const AttentionSpec& a = cfg.model.attention;
  io::PriorShapes s;
  s.scheme = scheme_name(a.scheme);
  s.layers = cfg.model.n_layers;
  s.heads = a.heads;
  s.kv_heads = a.kv_heads;
  if (is_goat(a.scheme)) {
    s.goat_modes = a.goat.modes;
    s.goat_lags = prior_lags(cfg.train.seq_len * cfg.eval.max_length_factor);
    s.goat_positions = s.goat_lags;
  } else if (a.scheme == Scheme::PoPE) {
    s.pope_dim = a.head_dim;
  } else if (a.scheme == Scheme::RoPE) {
    s.rope_pairs = rope::rotary_dim(a) / 2;
  }
  return s;
}

template <class T>
std::vector<std::pair<std::string, io::Row>> prior_rows(const Model<T>& model,
                                                        const io::PriorShapes& shapes,
                                                        int probe_rows) {
  const AttentionSpec& spec = model.config().attention;
  ProbeOptions po;
  po.rows = probe_rows;
  po.batch = 1;
  const auto stats = attention_probe_stats(model, po);
  const int H = spec.heads, K = spec.kv_heads;
  std::vector<std::pair<std::string, io::Row>> out;
  for (int l = 0; l < model.config().n_layers; ++l) {
    io::Row row;
    auto& ent = row["entropy"];
    auto& mx = row["max_logit"];
    auto& ftm = row["first_token_mass"];
    for (const HeadAttentionStats& h : stats[size_t(l)]) {
      ent.push_back(h.entropy);
      mx.push_back(h.max_logit);
      ftm.push_back(h.first_token_mass);
    }
    if (is_goat(spec.scheme)) {
      const auto P = host_params(model, l);
      // alpha, beta per query head (recipe "authors": their per-KV-head values, repeated).
      const auto lane = goat::host_lane_params(spec, P);
      const auto alpha = lane.v2("goat.alpha"), beta = lane.v2("goat.beta");
      auto& curve = row["prior_curve"];
      for (int h = 0; h < H; ++h) {
        const auto m = goat::mode_amplitudes(spec, P, h);
        for (int r = 0; r < spec.goat.modes; ++r) {  // no per-mode columns when R = 0
          row["alpha"].push_back(alpha(h, r));
          row["beta"].push_back(beta(h, r));
          row["amplitude"].push_back(m[size_t(r)]);
          const double aa = std::abs(alpha(h, r)), bb = std::abs(beta(h, r));
          row["beta_alpha_ratio"].push_back(aa > 0 ? bb / aa
                                                   : std::numeric_limits<double>::infinity());
        }
        const auto c = goat::relative_prior(spec, P, h, shapes.goat_lags);
        curve.insert(curve.end(), c.begin(), c.end());
      }
      auto& u = row["u"];
      for (int hk = 0; hk < K; ++hk) {
        const auto x = goat::key_bias(spec, P, hk, shapes.goat_positions);
        u.insert(u.end(), x.begin(), x.end());
      }
    } else if (spec.scheme == Scheme::PoPE || spec.scheme == Scheme::RoPE) {
      const auto in = model.attention_inputs(l);
      const auto params = model.attention_params(l);
      const PreparedAttention<T> p = prepare_attention(spec, in, params);
      if (spec.scheme == Scheme::PoPE) {
        // Lanes [.., 2d] = [mu cos(phase), mu sin(phase)]: mu_c is the norm of lanes (c, d + c).
        const int64_t d = spec.head_dim;
        const auto pair = [d](int64_t c) { return std::make_pair(c, d + c); };
        row["q_usage"] =
            mean_pair_norms(Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.q), d, pair);
        row["k_usage"] =
            mean_pair_norms(Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.k), d, pair);
        const auto P = host_params(model, l);
        const auto delta = P.v2("pope.delta");
        auto& dl = row["delta"];
        for (int hk = 0; hk < K; ++hk)
          for (int64_t c = 0; c < d; ++c) dl.push_back(delta(hk, c));
      } else {
        // The rotation keeps each pair's norm: measure on q, k after QK-norm, before RoPE.
        const int64_t r = rope::rotary_dim(spec), half = r / 2;
        const bool inter = spec.rope.pairing == RopePairing::Interleaved;
        const auto pair = [inter, half](int64_t m) {
          return inter ? std::make_pair(2 * m, 2 * m + 1) : std::make_pair(m, m + half);
        };
        row["q_pair_norm"] =
            mean_pair_norms(Kokkos::create_mirror_view_and_copy(HostSpace(), p.qn), half, pair);
        row["k_pair_norm"] =
            mean_pair_norms(Kokkos::create_mirror_view_and_copy(HostSpace(), p.kn), half, pair);
      }
    } else if (is_path(spec.scheme)) {
      // beta [B, L, Hkv] of the probe forward, per KV head over every position: mean, std,
      // min, max (beta > 1 flips the sign along w; near 0 the transition is the identity).
      auto beta =
          Kokkos::create_mirror_view_and_copy(HostSpace(), model.attention_inputs(l).path_beta);
      auto& bs = row["beta_stats"];
      const int64_t n = int64_t(beta.extent(0) * beta.extent(1));
      for (int hk = 0; hk < K; ++hk) {
        double sum = 0, sq = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
        for (size_t b = 0; b < beta.extent(0); ++b)
          for (size_t t = 0; t < beta.extent(1); ++t) {
            const double x = double(beta(b, t, size_t(hk)));
            sum += x;
            sq += x * x;
            lo = std::min(lo, x);
            hi = std::max(hi, x);
          }
        const double mean = sum / double(n);
        bs.insert(bs.end(), {mean, std::sqrt(std::max(0.0, sq / double(n) - mean * mean)), lo, hi});
      }
    }
    out.emplace_back("priors/layer_" + std::to_string(l), std::move(row));
  }
  return out;
}

template std::vector<std::pair<std::string, io::Row>> prior_rows<float>(const Model<float>&,
                                                                        const io::PriorShapes&,
                                                                        int);
template std::vector<std::pair<std::string, io::Row>> prior_rows<double>(const Model<double>&,
                                                                         const io::PriorShapes&,
                                                                         int);

}  // namespace lcr::train
