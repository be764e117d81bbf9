#include "core/model/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace lcr {
namespace {

// The probe rows: n rows spaced evenly over [0, L), the last one included.
std::vector<int64_t> probe_rows(int64_t L, int n) {
  std::vector<int64_t> rows;
  const int64_t k = std::min<int64_t>(n, L);
  for (int64_t i = 0; i < k; ++i) rows.push_back((i + 1) * L / k - 1);
  return rows;
}

template <class T>
std::vector<HeadAttentionStats> layer_stats(const Model<T>& model, int l, const ProbeOptions& opt) {
  const AttentionSpec& spec = model.config().attention;
  const AttentionInputs<T> in = model.attention_inputs(l);
  const ParamSet<T> params = model.attention_params(l);
  const PreparedAttention<T> p = prepare_attention(spec, in, params);
  auto q = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.q);
  auto k = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.k);
  auto slopes = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.alibi_slopes);
  auto bq = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.bias_q);
  auto bk = Kokkos::create_mirror_view_and_copy(HostSpace(), p.sdpa.bias_k);
  const bool sink = spec.numerics.sink;
  std::vector<double> sink_logit(size_t(spec.heads), 0.0);
  if (sink) {
    auto s = Kokkos::create_mirror_view_and_copy(HostSpace(), params.v1("sink"));
    for (int h = 0; h < spec.heads; ++h) sink_logit[size_t(h)] = double(s(h));
  }
  const int64_t B = std::min<int64_t>(q.extent(0), std::max(opt.batch, 1));
  const int64_t L = q.extent(1), Dk = q.extent(3), group = spec.group();
  const int64_t pos0 = p.sdpa.q_pos0;
  const double scale = double(p.sdpa.scale), cap = double(p.sdpa.softcap);
  const auto rows = probe_rows(L, std::max(opt.rows, 1));

  std::vector<HeadAttentionStats> out(size_t(spec.heads));
  std::vector<double> s(static_cast<size_t>(L));
  for (int h = 0; h < spec.heads; ++h) {
    const int64_t hk = h / group;
    double ent = 0, first = 0, mx = -std::numeric_limits<double>::infinity();
    int64_t count = 0;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t i : rows) {
        double m = sink ? sink_logit[size_t(h)] : -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {  // one segment: key j <= query i is causal
          double dot = 0;
          for (int64_t d = 0; d < Dk; ++d) dot += double(q(b, i, h, d)) * double(k(b, j, hk, d));
          double x = scale * dot;
          if (slopes.extent(0) > 0) x -= double(slopes(h)) * double(i - j);
          if (bq.extent(0) > 0) x += double(bq(b, i, h)) - double(bk(b, j, h));
          if (cap > 0) x = cap * std::tanh(x / cap);
          s[size_t(j)] = x;
          mx = std::max(mx, x);
          m = std::max(m, x);
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
