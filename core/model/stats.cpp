#include "core/model/stats.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/base/error.hpp"
#include "kernels/schemes/numerics/qk_norm.hpp"
#include "kernels/schemes/path/path.hpp"

namespace lcr {
namespace {

// The probe rows: n rows spaced evenly over [0, L), the last one included.
std::vector<int64_t> probe_rows(int64_t L, int n) {
  std::vector<int64_t> rows;
  const int64_t k = std::min<int64_t>(n, L);
  for (int64_t i = 0; i < k; ++i) rows.push_back((i + 1) * L / k - 1);
  return rows;
}

// Fills s[0..i] with the final logits of query row i of head h against keys j <= i (one
// segment: key j <= query i is causal), recomputed in float64 from the kernel's inputs.
using RowLogits = std::function<void(int64_t b, int64_t i, int h, std::vector<double>& s)>;

// Dot-product schemes: the SDPA lanes prepare_attention builds (scheme lanes, scale, ALiBi,
// FoX bias, softcap).
template <class T>
RowLogits dot_product_logits(const AttentionSpec& spec, const AttentionInputs<T>& in,
                             const ParamSet<T>& params) {
  const PreparedAttention<T> p = prepare_attention(spec, in, params);
  auto q = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.q);
  auto k = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.k);
  auto slopes = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.alibi_slopes);
  auto bq = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.bias_q);
  auto bk = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.bias_k);
  const int64_t Dk = q.extent(3), group = spec.group();
  const double scale = double(p.sdpa.scale), cap = double(p.sdpa.softcap);
  return [=](int64_t b, int64_t i, int h, std::vector<double>& s) {
    const int64_t hk = h / group;
    for (int64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < Dk; ++d) dot += double(q(b, i, h, d)) * double(k(b, j, hk, d));
      double x = scale * dot;
      if (slopes.extent(0) > 0) x -= double(slopes(h)) * double(i - j);
      if (bq.extent(0) > 0) x += double(bq(b, i, h)) - double(bk(b, j, h));
      if (cap > 0) x = cap * std::tanh(x / cap);
      s[size_t(j)] = x;
    }
  };
}

// PaTH / PaTH-FoX by the definition: logit_ij = k_j^T H_{j+1} ... H_i q_i / sqrt(d)
// [+ c_i - c_j], H_t = I - beta_t w_t w_t^T. Walking j from i down to 0 carries
// x = H_{j+1} ... H_i q_i and applies H_j after using it: O(i d) per row.
template <class T>
RowLogits path_logits(const AttentionSpec& spec, const AttentionInputs<T>& in,
                      const ParamSet<T>& params) {
  View4<const T> qn = in.q, kn = in.k;
  if (spec.numerics.qk_norm) {  // the kernel normalises q and k before the transitions
    const T eps = T(spec.numerics.qk_norm_eps);
    View4<T> a("lcr::probe_qn", in.q.layout()), c("lcr::probe_kn", in.k.layout());
    rms_norm_heads_forward<T>(in.q, params.v1("qk_norm.q_gain"), eps, a);
    rms_norm_heads_forward<T>(in.k, params.v1("qk_norm.k_gain"), eps, c);
    qn = a;
    kn = c;
  }
  auto q = Kokkos::create_mirror_view_and_copy(HostSpace(), qn);
  auto k = Kokkos::create_mirror_view_and_copy(HostSpace(), kn);
  auto w = Kokkos::create_mirror_view_and_copy(HostSpace(), in.path_w);
  auto beta = Kokkos::create_mirror_view_and_copy(HostSpace(), in.path_beta);
  auto cq = Kokkos::create_mirror_view_and_copy(HostSpace(), in.fox_cq);
  auto ck = Kokkos::create_mirror_view_and_copy(HostSpace(), in.fox_ck);
  const bool fox = uses_fox(spec.scheme);
  const int64_t d = q.extent(3), group = spec.group();
  const double scale = 1.0 / std::sqrt(double(spec.head_dim)), cap = spec.numerics.softcap;
  return [=](int64_t b, int64_t i, int h, std::vector<double>& s) {
    const int64_t hk = h / group;
    std::vector<double> x(static_cast<size_t>(d));
    for (int64_t c = 0; c < d; ++c) x[size_t(c)] = double(q(b, i, h, c));
    for (int64_t j = i; j >= 0; --j) {
      double dot = 0, wx = 0;
      for (int64_t c = 0; c < d; ++c) {
        dot += double(k(b, j, hk, c)) * x[size_t(c)];
        wx += double(w(b, j, hk, c)) * x[size_t(c)];
      }
      double v = scale * dot;
      if (fox) v += double(cq(b, i, h)) - double(ck(b, j, h));
      if (cap > 0) v = cap * std::tanh(v / cap);
      s[size_t(j)] = v;
      const double f = double(beta(b, j, hk)) * wx;  // x <- H_j x for the next key
      for (int64_t c = 0; c < d; ++c) x[size_t(c)] -= f * double(w(b, j, hk, c));
    }
  };
}

template <class T>
std::vector<HeadAttentionStats> layer_stats(const Model<T>& model, int l, const ProbeOptions& opt) {
  const AttentionSpec& spec = model.config().attention;
  const AttentionInputs<T> in = model.attention_inputs(l);
  const ParamSet<T> params = model.attention_params(l);
  const RowLogits logits =
      is_path(spec.scheme) ? path_logits(spec, in, params) : dot_product_logits(spec, in, params);
  const bool sink = spec.numerics.has_sink();
  std::vector<double> sink_logit(size_t(spec.heads), 0.0);
  if (sink) {
    auto s = Kokkos::create_mirror_view_and_copy(HostSpace(), params.v1("sink"));
    for (int h = 0; h < spec.heads; ++h) sink_logit[size_t(h)] = double(s(h));
  }
  const int64_t B = std::min<int64_t>(in.q.extent(0), std::max(opt.batch, 1));
  const int64_t L = in.q.extent(1), pos0 = in.q_pos0;
  const auto rows = probe_rows(L, std::max(opt.rows, 1));

  std::vector<HeadAttentionStats> out(size_t(spec.heads));
  std::vector<double> s(static_cast<size_t>(L));
  for (int h = 0; h < spec.heads; ++h) {
    double ent = 0, first = 0, mx = -std::numeric_limits<double>::infinity();
    int64_t count = 0;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t i : rows) {
        logits(b, i, h, s);
        double m = sink ? sink_logit[size_t(h)] : -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          mx = std::max(mx, s[size_t(j)]);
          m = std::max(m, s[size_t(j)]);
        }
        double z = sink ? std::exp(sink_logit[size_t(h)] - m) : 0.0;
        for (int64_t j = 0; j <= i; ++j) z += std::exp(s[size_t(j)] - m);
        const double lz = std::log(z);
        double e = 0;
        auto term = [&](double logit) {
          const double lp = logit - m - lz;
          if (std::exp(lp) > 0) e -= std::exp(lp) * lp;
        };
        for (int64_t j = 0; j <= i; ++j) term(s[size_t(j)]);
        if (sink) term(sink_logit[size_t(h)]);
        ent += e;
        if (pos0 == 0) first += std::exp(s[0] - m - lz);
        ++count;
      }
    }
    out[size_t(h)].entropy = ent / double(count);
    out[size_t(h)].max_logit = mx;
    out[size_t(h)].first_token_mass =
        pos0 == 0 ? first / double(count) : std::numeric_limits<double>::quiet_NaN();
  }
  return out;
}

}  // namespace

template <class T>
std::vector<std::vector<HeadAttentionStats>> attention_probe_stats(const Model<T>& model,
                                                                   const ProbeOptions& opt) {
  require(model.activations().B > 0, "attention_probe_stats needs a forward pass first");
  require(model.segments().size() == 1,
          "attention_probe_stats needs a single-segment forward (LocalAttention); with context "
          "parallelism run a separate single-rank probe forward");
  std::vector<std::vector<HeadAttentionStats>> out;
  for (int l = 0; l < model.config().n_layers; ++l) out.push_back(layer_stats(model, l, opt));
  return out;
}

template std::vector<std::vector<HeadAttentionStats>> attention_probe_stats<float>(
    const Model<float>&, const ProbeOptions&);
template std::vector<std::vector<HeadAttentionStats>> attention_probe_stats<double>(
    const Model<double>&, const ProbeOptions&);

}  // namespace lcr
