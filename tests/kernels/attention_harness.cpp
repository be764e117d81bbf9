#include "kernels/attention_harness.hpp"

#include <cmath>
#include <type_traits>

#include "../bf16_round.hpp"  // tests/bf16_round.hpp

namespace lcr::test {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// Parameter draws that keep every logit O(1) at the test sizes, by parameter name.
double draw_param(const std::string& name, std::mt19937_64& rng) {
  std::normal_distribution<double> n01(0.0, 1.0);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  if (name == "pope.delta") return -kTwoPi * u01(rng);  // the clamp range [-2pi, 0]
  if (name.rfind("qk_norm.", 0) == 0) return 1.0 + 0.2 * n01(rng);
  if (name == "goat.lambda") return 0.002 * n01(rng);  // lambda j stays O(1) for j <= 1000
  // The authors' recency slope softplus(s) ~ e^s in [e^-8, e^-6]: softplus(s) j stays O(1).
  if (name == "goat.slope") return -7.0 + 0.5 * n01(rng);
  // Query gate: softplus(scale) ~ 0.05 keeps softplus(scale) |q_c| O(1) at d_c <= 128, so g
  // sits mid-range where its gradients are large.
  if (name == "goat.gate_scale") return -3.0 + 0.5 * n01(rng);
  return 0.5 * n01(rng);
}

template <class V>
void fill_normal(const V& v, std::mt19937_64& rng, double sd = 1.0) {
  std::normal_distribution<double> n01(0.0, sd);
  for (size_t i = 0; i < v.span(); ++i) v.data()[i] = n01(rng);
}

template <class T, class V>
std::vector<double> flat(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  std::vector<double> out(h.span());
  for (size_t i = 0; i < h.span(); ++i) out[i] = double(h.data()[i]);
  return out;
}

template <class T, class VD, class VH>
VD to_device(const VH& h, const std::string& label) {
  VD d(label, h.layout());
  auto m = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < h.span(); ++i) m.data()[i] = T(h.data()[i]);
  Kokkos::deep_copy(d, m);
  return d;
}

template <class S>
S lift(double x, double t) {
  if constexpr (std::is_same_v<S, ref::Dual>)
    return ref::Dual(x, t);
  else
    return x + 0 * t;
}

// Converts the float64 problem to reference inputs of scalar S; the input named `name`
// (if any) gets tangent u.
template <class S>
ref::RefInputs<S> to_ref(const Problem& p, const std::string& name, const std::vector<double>& u) {
  auto conv4 = [&](const H4<double>& x, const std::string& nm) {
    H4<S> y(nm, x.layout());
    for (size_t i = 0; i < x.span(); ++i) y.data()[i] = lift<S>(x.data()[i], nm == name ? u[i] : 0);
    return y;
  };
  auto conv3 = [&](const H3<double>& x, const std::string& nm) {
    H3<S> y(nm, x.layout());
    for (size_t i = 0; i < x.span(); ++i) y.data()[i] = lift<S>(x.data()[i], nm == name ? u[i] : 0);
    return y;
  };
  ref::RefInputs<S> r;
  r.q = conv4(p.q, "q");
  r.k = conv4(p.k, "k");
  r.v = conv4(p.v, "v");
  r.q_pos0 = p.c.q_pos0;
  r.k_pos0 = p.c.k_pos0;
  if (uses_fox(p.c.spec.scheme)) {
    r.fox_cq = conv3(p.fox_cq, "fox_cq");
    r.fox_ck = conv3(p.fox_ck, "fox_ck");
  }
  r.params = ParamSet<S, HostSpace>(p.params.layout, "ref_params");
  for (const auto& e : p.params.layout.entries())
    for (int64_t i = 0; i < e.size(); ++i) {
      const double x = p.params.data(e.offset + i);
      r.params.data(e.offset + i) = lift<S>(x, e.name == name ? u[i] : 0);
    }
  return r;
}

}  // namespace

Problem make_problem(const Case& c) {
  validate(c.spec);
  std::mt19937_64 rng(c.seed);
  const auto& s = c.spec;
  const int dq = input_qk_dim(s);
  Problem p;
  p.c = c;
  p.q = H4<double>("q", c.B, c.Lq, s.heads, dq);
  p.k = H4<double>("k", c.B, c.Lk, s.kv_heads, dq);
  p.v = H4<double>("v", c.B, c.Lk, s.kv_heads, s.v_dim());
  p.dout = H4<double>("dout", c.B, c.Lq, s.heads, s.v_dim());
  for (auto* v : {&p.q, &p.k, &p.v, &p.dout}) fill_normal(*v, rng);
  if (uses_fox(p.c.spec.scheme)) {
    // Cumulative log forget gates over GLOBAL positions 0..max: c_t = sum_{s<=t} log f_s.
    const int64_t n = std::max(c.q_pos0 + c.Lq, c.k_pos0 + c.Lk);
    std::normal_distribution<double> n01(0.0, 1.0);
    p.fox_cq = H3<double>("fox_cq", c.B, c.Lq, s.heads);
    p.fox_ck = H3<double>("fox_ck", c.B, c.Lk, s.heads);
    for (int b = 0; b < c.B; ++b)
      for (int h = 0; h < s.heads; ++h) {
        double acc = 0;
        for (int64_t t = 0; t < n; ++t) {
          acc += std::log(1.0 / (1.0 + std::exp(-(2.0 + n01(rng)))));
          if (t >= c.q_pos0 && t < c.q_pos0 + c.Lq) p.fox_cq(b, t - c.q_pos0, h) = acc;
          if (t >= c.k_pos0 && t < c.k_pos0 + c.Lk) p.fox_ck(b, t - c.k_pos0, h) = acc;
        }
      }
  }
  p.params = ParamSet<double, HostSpace>(attention_param_layout(s), "params");
  for (const auto& e : p.params.layout.entries())
    for (int64_t i = 0; i < e.size(); ++i) p.params.data(e.offset + i) = draw_param(e.name, rng);
  if (s.numerics.off_by_one)  // the sink logits are fixed at 0: not drawn, not perturbed
    for (int64_t i = 0; i < p.params.layout.at("sink").size(); ++i)
      p.params.data(p.params.layout.at("sink").offset + i) = 0;
  return p;
}

std::vector<std::string> input_names(const Problem& p) {
  std::vector<std::string> n{"q", "k", "v"};
  if (uses_fox(p.c.spec.scheme)) {
    n.push_back("fox_cq");
    n.push_back("fox_ck");
  }
  for (const auto& e : p.params.layout.entries())
    if (!(p.c.spec.numerics.off_by_one && e.name == "sink")) n.push_back(e.name);
  return n;
}

double* input_data(Problem& p, const std::string& name) {
  if (name == "q") return p.q.data();
  if (name == "k") return p.k.data();
  if (name == "v") return p.v.data();
  if (name == "fox_cq") return p.fox_cq.data();
  if (name == "fox_ck") return p.fox_ck.data();
  return p.params.data.data() + p.params.layout.at(name).offset;
}

size_t input_size(const Problem& p, const std::string& name) {
  if (name == "q") return p.q.span();
  if (name == "k") return p.k.span();
  if (name == "v") return p.v.span();
  if (name == "fox_cq") return p.fox_cq.span();
  if (name == "fox_ck") return p.fox_ck.span();
  return p.params.layout.at(name).size();
}

template <class T>
Result run_kokkos(const Problem& p, bool backward, bool bf16_o) {
  const auto& s = p.c.spec;
  AttentionInputs<T> in;
  in.q = to_device<T, View4<T>>(p.q, "q");
  in.k = to_device<T, View4<T>>(p.k, "k");
  in.v = to_device<T, View4<T>>(p.v, "v");
  in.q_pos0 = p.c.q_pos0;
  in.k_pos0 = p.c.k_pos0;
  if (uses_fox(p.c.spec.scheme)) {
    in.fox_cq = to_device<T, View3<T>>(p.fox_cq, "fox_cq");
    in.fox_ck = to_device<T, View3<T>>(p.fox_ck, "fox_ck");
  }
  ParamSet<T> params(p.params.layout);
  params.data = to_device<T, View1<T>>(p.params.data, "params");
  auto out = make_outputs<T>(s, in);
  attention_forward<T>(s, in, params, out);
  Result r;
  r.o = flat<T>(out.o);
  r.lse = flat<T>(out.lse);
  if (!backward) return r;
  if (bf16_o) {
    auto h = Kokkos::create_mirror_view(out.o);
    Kokkos::deep_copy(h, out.o);
    for (size_t i = 0; i < h.span(); ++i) h.data()[i] = T(nearest_bf16(float(h.data()[i])));
    Kokkos::deep_copy(out.o, h);
  }
  auto g = make_grads<T>(s, in);
  View4<T> dout = to_device<T, View4<T>>(p.dout, "dout");
  attention_backward<T>(s, in, params, out, dout, g);
  r.grad["q"] = flat<T>(g.dq);
  r.grad["k"] = flat<T>(g.dk);
  r.grad["v"] = flat<T>(g.dv);
  if (uses_fox(p.c.spec.scheme)) {
    r.grad["fox_cq"] = flat<T>(g.dfox_cq);
    r.grad["fox_ck"] = flat<T>(g.dfox_ck);
  }
  const auto all = flat<T>(g.dparams.data);
  for (const auto& e : g.dparams.layout.entries())
    r.grad[e.name] = std::vector<double>(all.begin() + e.offset, all.begin() + e.offset + e.size());
  return r;
}

Result run_reference(const Problem& p) {
  auto out = ref::reference_forward<double>(p.c.spec, to_ref<double>(p, "", {}));
  Result r;
  r.o.assign(out.o.data(), out.o.data() + out.o.span());
  r.lse.assign(out.lse.data(), out.lse.data() + out.lse.span());
  return r;
}

double reference_loss(const Problem& p) {
  const Result r = run_reference(p);
  double l = 0;
  for (size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * p.dout.data()[i];
  return l;
}

double reference_directional(const Problem& p, const std::string& name,
                             const std::vector<double>& u) {
  auto out = ref::reference_forward<ref::Dual>(p.c.spec, to_ref<ref::Dual>(p, name, u));
  double d = 0;
  for (size_t i = 0; i < out.o.span(); ++i) d += out.o.data()[i].t * p.dout.data()[i];
  return d;
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a)
    if (std::isfinite(x)) m = std::max(m, std::abs(x));
  return m;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;  // also equal infinities (rows that see no key)
    const double d = std::abs(a[i] - b[i]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m;
}

template Result run_kokkos<float>(const Problem&, bool, bool);
template Result run_kokkos<double>(const Problem&, bool, bool);

}  // namespace lcr::test
