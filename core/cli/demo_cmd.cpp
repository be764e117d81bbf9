// `lcr demo`: the main job's small default for now. For every position scheme the
// attention API supports, draw random inputs, run the Kokkos forward and backward in
// float64 and compare with the float64 reference (kernels/attention/reference): the
// output o, the log-normaliser lse, and the backward along one random direction of every
// input at once (<grad, u> against the reference's exact dual-number derivative).
#include <spdlog/spdlog.h>

#include <cmath>
#include <map>
#include <random>

#include "core/cli/verbs.hpp"
#include "core/config/attention_config.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/attention/reference/path.hpp"
#include "kernels/attention/reference/reference.hpp"

namespace lcr::cli {
namespace {

struct DemoOptions {
  int batch = 1, length = 257;
  uint64_t seed = 1;
  double tolerance = 1e-9;
  bool strict = false;  // a scheme the API does not support yet fails the demo
  std::string config;
  std::vector<std::string> overrides;
};

template <class T>
using H3 = View3<T, HostSpace>;
template <class T>
using H4 = View4<T, HostSpace>;

// One problem in float64 on the host.
struct Problem {
  AttentionSpec spec;
  H4<double> q, k, v, dout;
  H3<double> fox_cq, fox_ck;  // FoX only
  H4<double> path_w;          // PaTH only
  H3<double> path_beta;
  ParamSet<double, HostSpace> params;
};

// Parameter draws that keep every logit O(1) at the demo sizes, by parameter name.
double draw_param(const std::string& name, std::mt19937_64& rng) {
  std::normal_distribution<double> n01;
  if (name == "pope.delta") return -6.283185307179586 * std::uniform_real_distribution<>()(rng);
  if (name.rfind("qk_norm.", 0) == 0) return 1.0 + 0.2 * n01(rng);
  if (name == "goat.lambda") return 0.002 * n01(rng);  // lambda * j stays O(1)
  return 0.5 * n01(rng);
}

Problem draw(const AttentionSpec& s, const DemoOptions& o, std::mt19937_64& rng) {
  std::normal_distribution<double> n01;
  const int B = o.batch, L = o.length, dq = input_qk_dim(s);
  Problem p{s,
            H4<double>("q", B, L, s.heads, dq),
            H4<double>("k", B, L, s.kv_heads, dq),
            H4<double>("v", B, L, s.kv_heads, s.v_dim()),
            H4<double>("dout", B, L, s.heads, s.v_dim()),
            {},
            {},
            {},
            {},
            ParamSet<double, HostSpace>(attention_param_layout(s))};
  for (auto* x : {&p.q, &p.k, &p.v, &p.dout})
    for (size_t i = 0; i < x->span(); ++i) x->data()[i] = n01(rng);
  if (uses_fox(s.scheme)) {  // cumulative log forget gates c_t = sum_{u <= t} log sigmoid(2 + n)
    p.fox_cq = H3<double>("fox_cq", B, L, s.heads);
    p.fox_ck = H3<double>("fox_ck", B, L, s.heads);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int t = 0; t < L; ++t) {
          const double prev = t ? p.fox_cq(b, t - 1, h) : 0.0;
          p.fox_cq(b, t, h) = p.fox_ck(b, t, h) = prev - std::log1p(std::exp(-(2.0 + n01(rng))));
        }
  }
  if (is_path(s.scheme)) {  // unit directions w_t, strengths beta_t = 2 sigmoid(n) in (0, 2)
    p.path_w = H4<double>("path_w", B, L, s.kv_heads, s.head_dim);
    p.path_beta = H3<double>("path_beta", B, L, s.kv_heads);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < L; ++t)
        for (int h = 0; h < s.kv_heads; ++h) {
          double nn = 0;
          for (int c = 0; c < s.head_dim; ++c) nn += std::pow(p.path_w(b, t, h, c) = n01(rng), 2);
          for (int c = 0; c < s.head_dim; ++c) p.path_w(b, t, h, c) /= std::sqrt(nn);
          p.path_beta(b, t, h) = 2.0 / (1.0 + std::exp(-n01(rng)));
        }
  }
  for (const auto& e : p.params.layout.entries())
    for (int64_t i = 0; i < e.size(); ++i) p.params.data(e.offset + i) = draw_param(e.name, rng);
  return p;
}

template <class V>
auto to_device(const V& h) {
  return Kokkos::create_mirror_view_and_copy(MemSpace(), h);
}

AttentionInputs<double> device_inputs(const Problem& p) {
  AttentionInputs<double> in;
  in.q = to_device(p.q), in.k = to_device(p.k), in.v = to_device(p.v);
  if (uses_fox(p.spec.scheme)) in.fox_cq = to_device(p.fox_cq), in.fox_ck = to_device(p.fox_ck);
  if (is_path(p.spec.scheme))
    in.path_w = to_device(p.path_w), in.path_beta = to_device(p.path_beta);
  return in;
}

// The float64 reference of the problem on scalar S (double, or ref::Dual with tangent
// u[name] on every input): the dot-product reference, or PaTH's own.
template <class S>
ref::RefOutputs<S> reference(const Problem& p, std::map<std::string, std::vector<double>>* u) {
  auto lift = [&](const auto& x, auto y, const std::string& name) {
    for (size_t i = 0; i < x.span(); ++i) {
      if constexpr (std::is_same_v<S, ref::Dual>)
        y.data()[i] = ref::Dual(x.data()[i], (*u)[name][i]);
      else
        y.data()[i] = x.data()[i];
    }
    return y;
  };
  auto lift4 = [&](const H4<double>& x, const char* n) {
    return lift(x, H4<S>(std::string(n), x.layout()), n);
  };
  auto lift3 = [&](const H3<double>& x, const char* n) {
    return lift(x, H3<S>(std::string(n), x.layout()), n);
  };
  ParamSet<S, HostSpace> params(p.params.layout, "ref_params");
  lift(p.params.data, params.data, "params");
  if (is_path(p.spec.scheme)) {
    ref::PathRefInputs<S> r;
    r.q = lift4(p.q, "q"), r.k = lift4(p.k, "k"), r.v = lift4(p.v, "v");
    r.w = lift4(p.path_w, "path_w"), r.beta = lift3(p.path_beta, "path_beta");
    if (uses_fox(p.spec.scheme))
      r.fox_cq = lift3(p.fox_cq, "fox_cq"), r.fox_ck = lift3(p.fox_ck, "fox_ck");
    r.params = params;
    return ref::path_reference_forward<S>(p.spec, r);
  }
  ref::RefInputs<S> r;
  r.q = lift4(p.q, "q"), r.k = lift4(p.k, "k"), r.v = lift4(p.v, "v");
  if (uses_fox(p.spec.scheme))
    r.fox_cq = lift3(p.fox_cq, "fox_cq"), r.fox_ck = lift3(p.fox_ck, "fox_ck");
  r.params = params;
  return ref::reference_forward<S>(p.spec, r);
}

double max_abs_diff(const double* a, const double* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) m = std::max(m, std::isnan(a[i] - b[i]) ? INFINITY : std::abs(a[i] - b[i]));
  return m;
}

template <class V, class W>
double dot(const V& grad, const W& u) {
  auto g = Kokkos::create_mirror_view_and_copy(HostSpace(), grad);
  double s = 0;
  for (size_t i = 0; i < g.span(); ++i) s += g.data()[i] * u[i];
  return s;
}

struct Row {
  double o_err, lse_err, grad_err, fwd_ms, bwd_ms;
};

Row run_scheme(const Problem& p) {
  const AttentionSpec& s = p.spec;
  const AttentionInputs<double> in = device_inputs(p);
  ParamSet<double> params(p.params.layout);
  Kokkos::deep_copy(params.data, p.params.data);

  Row r{};
  Kokkos::Timer timer;
  const auto out = make_outputs<double>(s, in);
  attention_forward<double>(s, in, params, out);
  Kokkos::fence();
  r.fwd_ms = 1e3 * timer.seconds();
  auto g = make_grads<double>(s, in);
  timer.reset();
  attention_backward<double>(s, in, params, out, to_device(p.dout), g);
  Kokkos::fence();
  r.bwd_ms = 1e3 * timer.seconds();

  const auto ref = reference<double>(p, nullptr);
  const auto o = Kokkos::create_mirror_view_and_copy(HostSpace(), out.o);
  const auto lse = Kokkos::create_mirror_view_and_copy(HostSpace(), out.lse);
  r.o_err = max_abs_diff(o.data(), ref.o.data(), o.span());
  r.lse_err = max_abs_diff(lse.data(), ref.lse.data(), lse.span());

  // d/de <dout, o(x + e u)> two ways: sum over inputs of <grad_x, u_x> (Kokkos backward)
  // and the reference run on dual numbers. Relative to max(1, |derivative|).
  std::mt19937_64 rng(12345);
  std::normal_distribution<double> n01;
  std::map<std::string, std::vector<double>> u;
  auto direction = [&](const std::string& name, size_t n) -> const std::vector<double>& {
    u[name].resize(n);
    for (auto& x : u[name]) x = n01(rng);
    return u[name];
  };
  double kokkos = dot(g.dq, direction("q", p.q.span())) + dot(g.dk, direction("k", p.k.span())) +
                  dot(g.dv, direction("v", p.v.span())) +
                  dot(g.dparams.data, direction("params", p.params.data.span()));
  if (uses_fox(s.scheme))
    kokkos += dot(g.dfox_cq, direction("fox_cq", p.fox_cq.span())) +
              dot(g.dfox_ck, direction("fox_ck", p.fox_ck.span()));
  if (is_path(s.scheme))  // dpath_w: the plain partial derivative, w not held to the unit sphere
    kokkos += dot(g.dpath_w, direction("path_w", p.path_w.span())) +
              dot(g.dpath_beta, direction("path_beta", p.path_beta.span()));
  const auto dual = reference<ref::Dual>(p, &u);
  double exact = 0;
  for (size_t i = 0; i < dual.o.span(); ++i) exact += dual.o.data()[i].t * p.dout.data()[i];
  r.grad_err = std::abs(kokkos - exact) / std::max(1.0, std::abs(exact));
  return r;
}

int run_demo(const DemoOptions& o) {
  require(o.batch > 0 && o.length > 0, "--batch and --length must be positive");
  // The demo's default shapes, under whatever the config and overrides say.
  config::Document root = config::table_from_values({{"attention.heads", int64_t(4)},
                                                     {"attention.kv_heads", int64_t(2)},
                                                     {"attention.head_dim", int64_t(64)},
                                                     {"attention.goat.grid_width", int64_t(16)}});
  config::merge(root, config::load_config(o.config, o.overrides));
  const AttentionSpec base = config::attention_spec_from(root);
  const bool one_scheme = root.has("attention.scheme");
  spdlog::info("demo: B={} L={} H={} Hkv={} head_dim={}, float64 Kokkos vs float64 reference",
               o.batch, o.length, base.heads, base.kv_heads, base.head_dim);
  spdlog::info("{:<9} {:>12} {:>12} {:>12} {:>9} {:>9}", "scheme", "max|do|", "max|dlse|",
               "grad rel", "fwd ms", "bwd ms");
  int failed = 0, ran = 0;
  std::vector<std::string> skipped;
  std::mt19937_64 rng(o.seed);
  for (const auto& name : scheme_names()) {
    AttentionSpec s = base;
    s.scheme = parse_scheme(name);
    if (one_scheme && s.scheme != base.scheme) continue;
    Problem p;
    try {  // does the API support this scheme with these options?
      validate(s);
      p = draw(s, o, rng);
      check_inputs<double>(s, device_inputs(p), ParamSet<double>(p.params.layout));
    } catch (const Error& e) {
      spdlog::warn("{:<9} skipped: {}", name, e.what());
      skipped.push_back(name);
      continue;
    }
    ++ran;
    Row r;
    try {  // past the support check, any error is a failure
      r = run_scheme(p);
    } catch (const Error& e) {
      spdlog::error("{:<9} FAILED: {}", name, e.what());
      ++failed;
      continue;
    }
    const bool ok = r.o_err <= o.tolerance && r.lse_err <= o.tolerance && r.grad_err <= o.tolerance;
    failed += ok ? 0 : 1;
    spdlog::log(ok ? spdlog::level::info : spdlog::level::err,
                "{:<9} {:>12.3e} {:>12.3e} {:>12.3e} {:>9.1f} {:>9.1f}{}", name, r.o_err, r.lse_err,
                r.grad_err, r.fwd_ms, r.bwd_ms, ok ? "" : "  FAILED");
  }
  spdlog::info("demo: {} schemes ran, {} beyond tolerance {:.0e}, {} not supported yet{}", ran,
               failed, o.tolerance, skipped.size(), o.strict ? " (--strict)" : "");
  if (ran == 0) spdlog::error("demo: no scheme ran");
  return (failed > 0 || ran == 0 || (o.strict && !skipped.empty())) ? 1 : 0;
}

}  // namespace

void add_demo_verb(CLI::App& app, Runner& run) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* sub = app.add_subcommand(
      "demo",
      "Run every position scheme on random inputs (Kokkos, float64) and print its max error "
      "against the float64 reference; exit 1 if any exceeds the tolerance");
  sub->add_option("-L,--length", o->length, "sequence length")->capture_default_str();
  sub->add_option("-B,--batch", o->batch, "batch size")->capture_default_str();
  sub->add_option("--seed", o->seed, "random seed")->capture_default_str();
  sub->add_option("--tolerance", o->tolerance, "max allowed error")->capture_default_str();
  sub->add_flag("--strict", o->strict, "fail if a scheme is not supported yet");
  sub->add_option("-c,--config", o->config, "TOML file with an [attention] table")
      ->check(CLI::ExistingFile);
  sub->add_option("overrides", o->overrides,
                  "config overrides (defaults: attention.heads=4 attention.kv_heads=2 "
                  "attention.head_dim=64); attention.scheme=X runs only X");
  sub->callback([o, &run] { run = [o] { return run_demo(*o); }; });
}

}  // namespace lcr::cli
