#pragma once
// Test problems for PaTH / PaTH-FoX (the shared attention harness has no w / beta): random
// inputs in float64 on the host, the Kokkos path through the attention API in float32 or
// float64, the float64 reference and its dual-number directional derivatives.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/attention/reference/path.hpp"
#include "kernels/attention_harness.hpp"

namespace lcr::test::pathtest {

// How beta is drawn: over the whole of (0, 2) with a third of the positions near 2
// (within 1e-3, H close to a reflection) and a third at or near 1 (H close to or exactly
// singular); or all near 2; or all near 1.
enum class BetaDraw { Mixed, NearTwo, NearOne };

struct PathCase {
  std::string name;
  AttentionSpec spec;
  int B = 1, L = 7;
  int64_t pos0 = 0;
  BetaDraw beta = BetaDraw::Mixed;
  uint64_t seed = 1;
};

// gtest prints parameters with this (instead of a byte dump).
inline void PrintTo(const PathCase& c, std::ostream* os) { *os << c.name; }

struct PathProblem {
  PathCase c;
  H4<double> q, k, v, w, dout;
  H3<double> beta, fox_cq, fox_ck;
  ParamSet<double, HostSpace> params;
  bool fox() const { return uses_fox(c.spec.scheme); }
};

inline double draw_beta(BetaDraw how, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const int kind = how == BetaDraw::Mixed ? int(rng() % 3) : how == BetaDraw::NearTwo ? 1 : 2;
  if (kind == 0) return 2.0 * u01(rng);
  if (kind == 1) return 2.0 - 1e-3 * u01(rng) - 1e-9;
  const double x = u01(rng);
  return x < 0.3 ? 1.0 : 1.0 + 2e-4 * (x - 0.65);
}

inline PathProblem make_path_problem(const PathCase& c) {
  validate(c.spec);
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<double> n01(0.0, 1.0);
  const auto& s = c.spec;
  const int d = s.head_dim, H = s.heads, Hkv = s.kv_heads;
  PathProblem p;
  p.c = c;
  p.q = H4<double>("q", c.B, c.L, H, d);
  p.k = H4<double>("k", c.B, c.L, Hkv, d);
  p.v = H4<double>("v", c.B, c.L, Hkv, s.v_dim());
  p.w = H4<double>("path_w", c.B, c.L, Hkv, d);
  p.dout = H4<double>("dout", c.B, c.L, H, s.v_dim());
  p.beta = H3<double>("path_beta", c.B, c.L, Hkv);
  for (auto* x : {&p.q, &p.k, &p.v, &p.dout, &p.w})
    for (size_t i = 0; i < x->span(); ++i) x->data()[i] = n01(rng);
  for (size_t r = 0; r < p.w.span() / d; ++r) {
    double ss = 0;
    for (int c2 = 0; c2 < d; ++c2) ss += p.w.data()[r * d + c2] * p.w.data()[r * d + c2];
    for (int c2 = 0; c2 < d; ++c2) p.w.data()[r * d + c2] /= std::sqrt(ss);
  }
  for (size_t i = 0; i < p.beta.span(); ++i) p.beta.data()[i] = draw_beta(c.beta, rng);
  if (p.fox()) {  // cumulative log gates over GLOBAL positions, f = sigmoid(2 + N(0,1))
    p.fox_cq = H3<double>("fox_cq", c.B, c.L, H);
    p.fox_ck = H3<double>("fox_ck", c.B, c.L, H);
    for (int b = 0; b < c.B; ++b)
      for (int h = 0; h < H; ++h) {
        double acc = 0;
        for (int64_t t = 0; t < c.pos0 + c.L; ++t) {
          acc -= std::log1p(std::exp(-(2.0 + n01(rng))));
          if (t >= c.pos0) p.fox_cq(b, t - c.pos0, h) = p.fox_ck(b, t - c.pos0, h) = acc;
        }
      }
  }
  p.params = ParamSet<double, HostSpace>(attention_param_layout(s), "params");
  for (const auto& e : p.params.layout.entries())
    for (int64_t i = 0; i < e.size(); ++i)
      p.params.data(e.offset + i) =
          e.name.rfind("qk_norm.", 0) == 0 ? 1.0 + 0.2 * n01(rng) : 0.5 * n01(rng);
  if (s.numerics.off_by_one)  // the sink logits are fixed at 0: not drawn, not perturbed
    for (int64_t i = 0; i < p.params.layout.at("sink").size(); ++i)
      p.params.data(p.params.layout.at("sink").offset + i) = 0;
  return p;
}

inline std::vector<std::string> path_input_names(const PathProblem& p) {
  std::vector<std::string> n{"q", "k", "v", "path_w", "path_beta"};
  if (p.fox()) {
    n.push_back("fox_cq");
    n.push_back("fox_ck");
  }
  for (const auto& e : p.params.layout.entries())
    if (!(p.c.spec.numerics.off_by_one && e.name == "sink")) n.push_back(e.name);
  return n;
}

inline double* path_input_data(PathProblem& p, const std::string& name) {
  if (name == "q") return p.q.data();
  if (name == "k") return p.k.data();
  if (name == "v") return p.v.data();
  if (name == "path_w") return p.w.data();
  if (name == "path_beta") return p.beta.data();
  if (name == "fox_cq") return p.fox_cq.data();
  if (name == "fox_ck") return p.fox_ck.data();
  return p.params.data.data() + p.params.layout.at(name).offset;
}

inline size_t path_input_size(PathProblem& p, const std::string& name) {
  if (name.rfind("qk_norm.", 0) == 0 || name == "sink") return p.params.layout.at(name).size();
  const double* base = path_input_data(p, name);
  for (auto* x : {&p.q, &p.k, &p.v, &p.w, &p.dout})
    if (x->data() == base) return x->span();
  for (auto* x : {&p.beta, &p.fox_cq, &p.fox_ck})
    if (x->data() == base) return x->span();
  return 0;
}

template <class VD, class VH>
VD copy_to_device(const VH& h, const std::string& label) {
  VD d(label, h.layout());
  auto m = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < h.span(); ++i) m.data()[i] = typename VD::value_type(h.data()[i]);
  Kokkos::deep_copy(d, m);
  return d;
}
template <class T>
View4<T> to_device(const H4<double>& h, const std::string& label) {
  return copy_to_device<View4<T>>(h, label);
}
template <class T>
View3<T> to_device(const H3<double>& h, const std::string& label) {
  return copy_to_device<View3<T>>(h, label);
}
template <class T>
View1<T> to_device(const View1<double, HostSpace>& h, const std::string& label) {
  return copy_to_device<View1<T>>(h, label);
}

template <class V>
std::vector<double> flat(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  std::vector<double> out(h.span());
  for (size_t i = 0; i < h.span(); ++i) out[i] = double(h.data()[i]);
  return out;
}

template <class T>
AttentionInputs<T> device_inputs(const PathProblem& p) {
  AttentionInputs<T> in;
  in.q = to_device<T>(p.q, "q");
  in.k = to_device<T>(p.k, "k");
  in.v = to_device<T>(p.v, "v");
  in.path_w = to_device<T>(p.w, "path_w");
  in.path_beta = to_device<T>(p.beta, "path_beta");
  in.q_pos0 = in.k_pos0 = p.c.pos0;
  if (p.fox()) {
    in.fox_cq = to_device<T>(p.fox_cq, "fox_cq");
    in.fox_ck = to_device<T>(p.fox_ck, "fox_ck");
  }
  return in;
}

// The Kokkos PaTH through the attention API, in precision T.
template <class T>
Result run_path(const PathProblem& p, bool backward) {
  const auto& s = p.c.spec;
  const AttentionInputs<T> in = device_inputs<T>(p);
  ParamSet<T> params(p.params.layout);
  params.data = to_device<T>(p.params.data, "params");
  auto out = make_outputs<T>(s, in);
  attention_forward<T>(s, in, params, out);
  Result r;
  r.o = flat(out.o);
  r.lse = flat(out.lse);
  if (!backward) return r;
  auto g = make_grads<T>(s, in);
  attention_backward<T>(s, in, params, out, to_device<T>(p.dout, "dout"), g);
  r.grad["q"] = flat(g.dq);
  r.grad["k"] = flat(g.dk);
  r.grad["v"] = flat(g.dv);
  r.grad["path_w"] = flat(g.dpath_w);
  r.grad["path_beta"] = flat(g.dpath_beta);
  if (p.fox()) {
    r.grad["fox_cq"] = flat(g.dfox_cq);
    r.grad["fox_ck"] = flat(g.dfox_ck);
  }
  const auto all = flat(g.dparams.data);
  for (const auto& e : g.dparams.layout.entries())
    r.grad[e.name] = std::vector<double>(all.begin() + e.offset, all.begin() + e.offset + e.size());
  return r;
}

// Reference inputs of scalar S; the input `name` (if any) gets tangent u.
template <class S>
ref::PathRefInputs<S> to_ref(const PathProblem& p, const std::string& name,
                             const std::vector<double>& u) {
  auto lift = [&](double x, double t) {
    if constexpr (std::is_same_v<S, ref::Dual>)
      return ref::Dual(x, t);
    else
      return x + 0 * t;
  };
  auto conv = [&](const auto& x, const std::string& nm) {
    using VH = std::decay_t<decltype(x)>;
    using VS = Kokkos::View<typename std::conditional<VH::rank == 4, S****, S***>::type,
                            Kokkos::LayoutRight, HostSpace>;
    VS y(nm, x.layout());
    for (size_t i = 0; i < x.span(); ++i) y.data()[i] = lift(x.data()[i], nm == name ? u[i] : 0);
    return y;
  };
  ref::PathRefInputs<S> r;
  r.q = conv(p.q, "q");
  r.k = conv(p.k, "k");
  r.v = conv(p.v, "v");
  r.w = conv(p.w, "path_w");
  r.beta = conv(p.beta, "path_beta");
  if (p.fox()) {
    r.fox_cq = conv(p.fox_cq, "fox_cq");
    r.fox_ck = conv(p.fox_ck, "fox_ck");
  }
  r.params = ParamSet<S, HostSpace>(p.params.layout, "ref_params");
  for (const auto& e : p.params.layout.entries())
    for (int64_t i = 0; i < e.size(); ++i)
      r.params.data(e.offset + i) = lift(p.params.data(e.offset + i), e.name == name ? u[i] : 0);
  return r;
}

inline Result run_path_reference(const PathProblem& p) {
  auto out = ref::path_reference_forward<double>(p.c.spec, to_ref<double>(p, "", {}));
  Result r;
  r.o.assign(out.o.data(), out.o.data() + out.o.span());
  r.lse.assign(out.lse.data(), out.lse.data() + out.lse.span());
  return r;
}

// <dout, o> of the reference.
inline double path_reference_loss(const PathProblem& p) {
  const Result r = run_path_reference(p);
  double l = 0;
  for (size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * p.dout.data()[i];
  return l;
}

// d/de <dout, o(x + e u)> at e = 0, exactly (dual numbers), u on the input `name`.
inline double path_reference_directional(const PathProblem& p, const std::string& name,
                                         const std::vector<double>& u) {
  auto out = ref::path_reference_forward<ref::Dual>(p.c.spec, to_ref<ref::Dual>(p, name, u));
  double dsum = 0;
  for (size_t i = 0; i < out.o.span(); ++i) dsum += out.o.data()[i].t * p.dout.data()[i];
  return dsum;
}

}  // namespace lcr::test::pathtest
