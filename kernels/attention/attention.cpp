#include "kernels/attention/attention.hpp"

#include <cmath>
#include <string>

#include "kernels/attention/kokkos/sdpa.hpp"
#include "kernels/base/error.hpp"
#include "kernels/schemes/goat/goat.hpp"
#include "kernels/schemes/numerics/qk_norm.hpp"
#include "kernels/schemes/path/path.hpp"
#include "kernels/schemes/pope/pope.hpp"
#include "kernels/schemes/rope/rope.hpp"

namespace lcr {
namespace {

// What the scheme hands the SDPA kernel.
template <class T>
struct Lanes {
  View4<const T> q2, k2;
  double scale = 1.0;
};

template <class T>
Lanes<T> build_lanes(const AttentionSpec& spec, const LaneArgs<T>& a) {
  const int B = a.q.extent(0), Lq = a.q.extent(1), Lk = a.k.extent(1);
  // Every scheme's lanes_forward writes every element: no zero fill (a pass over memory).
  auto alloc = [&](int width, View4<T>& q2, View4<T>& k2) {
    q2 = View4<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::q_lanes"), B, Lq,
                  spec.heads, width);
    k2 = View4<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::k_lanes"), B, Lk,
                  spec.kv_heads, width);
  };
  Lanes<T> out;
  View4<T> q2, k2;
  switch (spec.scheme) {
    case Scheme::RoPE:
      alloc(rope::lanes_width(spec), q2, k2);
      rope::lanes_forward(a, q2, k2);
      out.scale = rope::sdpa_scale(spec);
      break;
    case Scheme::GOAT:
    case Scheme::GOAT2D:
      alloc(goat::lanes_width(spec), q2, k2);
      goat::lanes_forward(a, q2, k2);
      out.scale = goat::sdpa_scale(spec);
      break;
    case Scheme::PoPE:
      alloc(pope::lanes_width(spec), q2, k2);
      pope::lanes_forward(a, q2, k2);
      out.scale = pope::sdpa_scale(spec);
      break;
    default:  // NoPE, ALiBi, FoX: the kernel sees q and k as they are
      out.q2 = a.q;
      out.k2 = a.k;
      out.scale = 1.0 / std::sqrt(double(spec.head_dim));
      return out;
  }
  out.q2 = q2;
  out.k2 = k2;
  return out;
}

template <class T>
void lanes_backward(const AttentionSpec& spec, const LaneArgs<T>& a, const View4<const T>& dq2,
                    const View4<const T>& dk2, const View4<T>& dq, const View4<T>& dk,
                    ParamSet<T>& dparams) {
  switch (spec.scheme) {
    case Scheme::RoPE:
      return rope::lanes_backward(a, dq2, dk2, dq, dk, dparams);
    case Scheme::GOAT:
    case Scheme::GOAT2D:
      return goat::lanes_backward(a, dq2, dk2, dq, dk, dparams);
    case Scheme::PoPE:
      return pope::lanes_backward(a, dq2, dk2, dq, dk, dparams);
    default:
      Kokkos::deep_copy(dq, dq2);
      Kokkos::deep_copy(dk, dk2);
  }
}

template <class T>
View1<T> alibi_slopes(int heads, AlibiSlopes slopes) {
  std::vector<T> h(heads);
  for (int i = 0; i < heads; ++i) h[i] = T(alibi_slope(i, heads, slopes));
  return device_copy("lcr::alibi_slopes", h);
}

template <class V>
void expect_shape(const char* name, const V& v, std::vector<int64_t> want) {
  require(shape_of(v) == want, name, " has shape ", shape_string(shape_of(v)), ", expected ",
          shape_string(want));
}

}  // namespace

template <class T>
PreparedAttention<T> prepare_attention(const AttentionSpec& spec, const AttentionInputs<T>& in,
                                       const ParamSet<T>& params) {
  require(!is_path(spec.scheme),
          "prepare_attention is the dot-product path; PaTH's ring quantities are in "
          "kernels/schemes/path/ring.hpp");
  PreparedAttention<T> p;
  p.qn = in.q;
  p.kn = in.k;
  if (spec.numerics.qk_norm) {
    View4<T> qn("lcr::q_normed", in.q.extent(0), in.q.extent(1), in.q.extent(2), in.q.extent(3));
    View4<T> kn("lcr::k_normed", in.k.extent(0), in.k.extent(1), in.k.extent(2), in.k.extent(3));
    const T eps = T(spec.numerics.qk_norm_eps);
    rms_norm_heads_forward<T>(in.q, params.v1("qk_norm.q_gain"), eps, qn);
    rms_norm_heads_forward<T>(in.k, params.v1("qk_norm.k_gain"), eps, kn);
    p.qn = qn;
    p.kn = kn;
  }
  LaneArgs<T> la{&spec, &params, p.qn, p.kn, in.q_pos0, in.k_pos0};
  const Lanes<T> lanes = build_lanes(spec, la);
  p.sdpa.q = lanes.q2;
  p.sdpa.k = lanes.k2;
  p.sdpa.v = in.v;
  p.sdpa.q_pos0 = in.q_pos0;
  p.sdpa.k_pos0 = in.k_pos0;
  p.sdpa.scale = T(lanes.scale);
  p.sdpa.softcap = T(spec.numerics.softcap);
  if (spec.scheme == Scheme::ALiBi)
    p.sdpa.alibi_slopes = alibi_slopes<T>(spec.heads, spec.alibi.slopes);
  if (uses_fox(spec.scheme)) {
    p.sdpa.bias_q = in.fox_cq;
    p.sdpa.bias_k = in.fox_ck;
  }
  return p;
}

template <class T>
void prepared_backward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                       const ParamSet<T>& params, const PreparedAttention<T>& p,
                       const View4<const T>& dq2, const View4<const T>& dk2, const View4<T>& dq,
                       const View4<T>& dk, ParamSet<T>& dparams) {
  LaneArgs<T> la{&spec, &params, p.qn, p.kn, in.q_pos0, in.k_pos0};
  if (!spec.numerics.qk_norm) {
    lanes_backward<T>(spec, la, dq2, dk2, dq, dk, dparams);
    return;
  }
  View4<T> dqn("lcr::dq_normed", in.q.extent(0), in.q.extent(1), in.q.extent(2), in.q.extent(3));
  View4<T> dkn("lcr::dk_normed", in.k.extent(0), in.k.extent(1), in.k.extent(2), in.k.extent(3));
  lanes_backward<T>(spec, la, dq2, dk2, dqn, dkn, dparams);
  const T eps = T(spec.numerics.qk_norm_eps);
  rms_norm_heads_backward<T>(in.q, params.v1("qk_norm.q_gain"), eps, dqn, dq,
                             dparams.v1("qk_norm.q_gain"));
  rms_norm_heads_backward<T>(in.k, params.v1("qk_norm.k_gain"), eps, dkn, dk,
                             dparams.v1("qk_norm.k_gain"));
}

template <class T>
void check_inputs(const AttentionSpec& spec, const AttentionInputs<T>& in,
                  const ParamSet<T>& params) {
  validate(spec);
  const int64_t B = in.q.extent(0), Lq = in.q.extent(1), Lk = in.k.extent(1);
  const int64_t dq = input_qk_dim(spec);
  expect_shape("q", in.q, {B, Lq, spec.heads, dq});
  expect_shape("k", in.k, {B, Lk, spec.kv_heads, dq});
  expect_shape("v", in.v, {B, Lk, spec.kv_heads, spec.v_dim()});
  require(in.q_pos0 >= 0 && in.k_pos0 >= 0, "positions must be >= 0 (q_pos0 ", in.q_pos0,
          ", k_pos0 ", in.k_pos0, ")");
  if (uses_fox(spec.scheme)) {
    expect_shape("fox_cq", in.fox_cq, {B, Lq, spec.heads});
    expect_shape("fox_ck", in.fox_ck, {B, Lk, spec.heads});
  } else {
    require(in.fox_cq.extent(0) == 0 && in.fox_ck.extent(0) == 0,
            "FoX gates were given but the "
            "scheme is '",
            scheme_name(spec.scheme), "'; use scheme 'fox' or drop the gates");
  }
  const auto want = attention_param_layout(spec);
  require(params.layout.total() == want.total() && params.data.extent(0) == size_t(want.total()),
          "parameter buffer has ", params.data.extent(0), " values; scheme '",
          scheme_name(spec.scheme), "' with these options needs ", want.total(),
          " (build it from attention_param_layout(spec))");
  if (spec.numerics.off_by_one) {  // the sink machinery with its logits fixed at 0
    const auto sink = Kokkos::create_mirror_view_and_copy(HostSpace(), params.v1("sink"));
    for (int h = 0; h < spec.heads; ++h)
      require(sink(h) == T(0),
              "numerics.off_by_one fixes the sink logits at 0, but the 'sink' "
              "parameter of head ",
              h, " is ", sink(h), "; zero it (the trainer keeps it at 0)");
  }
  if (is_path(spec.scheme))
    path::check_inputs(spec, in);  // self-attention span, w, beta shapes and values
  else
    require(in.path_w.extent(0) == 0 && in.path_beta.extent(0) == 0,
            "PaTH inputs (path_w, path_beta) were given but the scheme is '",
            scheme_name(spec.scheme), "'; use scheme 'path' or 'path_fox' or drop them");
}

template <class T>
AttentionOutputs<T> make_outputs(const AttentionSpec& spec, const AttentionInputs<T>& in) {
  const int B = in.q.extent(0), Lq = in.q.extent(1);
  return {View4<T>("lcr::o", B, Lq, spec.heads, spec.v_dim()),
          View3<T>("lcr::lse", B, spec.heads, Lq)};
}

template <class T>
AttentionGrads<T> make_grads(const AttentionSpec& spec, const AttentionInputs<T>& in) {
  AttentionGrads<T> g;
  g.dq = View4<T>("lcr::dq", in.q.extent(0), in.q.extent(1), in.q.extent(2), in.q.extent(3));
  g.dk = View4<T>("lcr::dk", in.k.extent(0), in.k.extent(1), in.k.extent(2), in.k.extent(3));
  g.dv = View4<T>("lcr::dv", in.v.extent(0), in.v.extent(1), in.v.extent(2), in.v.extent(3));
  g.dparams = ParamSet<T>(attention_param_layout(spec), "lcr::dparams");
  if (uses_fox(spec.scheme)) {
    g.dfox_cq = View3<T>("lcr::dfox_cq", in.q.extent(0), in.q.extent(1), spec.heads);
    g.dfox_ck = View3<T>("lcr::dfox_ck", in.k.extent(0), in.k.extent(1), spec.heads);
  }
  if (is_path(spec.scheme)) {
    g.dpath_w = View4<T>("lcr::dpath_w", in.path_w.extent(0), in.path_w.extent(1),
                         in.path_w.extent(2), in.path_w.extent(3));
    g.dpath_beta = View3<T>("lcr::dpath_beta", in.path_beta.extent(0), in.path_beta.extent(1),
                            in.path_beta.extent(2));
  }
  return g;
}

template <class T>
void attention_forward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                       const ParamSet<T>& params, const AttentionOutputs<T>& out) {
  check_inputs(spec, in, params);
  expect_shape("o", out.o,
               {int64_t(in.q.extent(0)), int64_t(in.q.extent(1)), spec.heads, spec.v_dim()});
  expect_shape("lse", out.lse, {int64_t(in.q.extent(0)), spec.heads, int64_t(in.q.extent(1))});
  if (is_path(spec.scheme)) return path::attention_forward<T>(spec, in, params, out);
  const PreparedAttention<T> p = prepare_attention(spec, in, params);
  sdpa_forward(p.sdpa, out.o, out.lse);
  if (spec.numerics.has_sink()) sdpa_apply_sink<T>(params.v1("sink"), out.o, out.lse);
}

template <class T>
void attention_backward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                        const ParamSet<T>& params, const AttentionOutputs<T>& out,
                        const View4<const T>& dout, AttentionGrads<T>& g) {
  check_inputs(spec, in, params);
  expect_shape("dout", dout, shape_of(out.o));
  if (is_path(spec.scheme)) return path::attention_backward<T>(spec, in, params, out, dout, g);
  const PreparedAttention<T> p = prepare_attention(spec, in, params);
  const int B = in.q.extent(0), Lq = in.q.extent(1), H = spec.heads;
  Kokkos::deep_copy(g.dparams.data, T(0));

  // delta, dq2 and dk2 are written whole (sdpa_row_delta; sdpa_backward stores every row of
  // dq and dk, zeros where no pair contributes): no zero fill.
  const auto no_init = [](const std::string& name) {  // a const char* would be a pointer
    return Kokkos::view_alloc(Kokkos::WithoutInitializing, name);
  };
  View3<T> delta(no_init("lcr::delta"), B, H, Lq);
  sdpa_row_delta<T>(out.o, dout, delta);
  View4<T> dq2(no_init("lcr::dq_lanes"), p.sdpa.q.extent(0), p.sdpa.q.extent(1), p.sdpa.q.extent(2),
               p.sdpa.q.extent(3));
  View4<T> dk2(no_init("lcr::dk_lanes"), p.sdpa.k.extent(0), p.sdpa.k.extent(1), p.sdpa.k.extent(2),
               p.sdpa.k.extent(3));
  sdpa_backward<T>(p.sdpa, out.lse, delta, dout, dq2, dk2, g.dv, g.dfox_cq, g.dfox_ck);
  if (spec.numerics.has_sink())
    sdpa_sink_backward<T>(params.v1("sink"), out.lse, delta, g.dparams.v1("sink"));
  prepared_backward<T>(spec, in, params, p, dq2, dk2, g.dq, g.dk, g.dparams);
}

#define LCR_INSTANTIATE(T)                                                                       \
  template PreparedAttention<T> prepare_attention<T>(                                            \
      const AttentionSpec&, const AttentionInputs<T>&, const ParamSet<T>&);                      \
  template void prepared_backward<T>(const AttentionSpec&, const AttentionInputs<T>&,            \
                                     const ParamSet<T>&, const PreparedAttention<T>&,            \
                                     const View4<const T>&, const View4<const T>&,               \
                                     const View4<T>&, const View4<T>&, ParamSet<T>&);            \
  template void check_inputs<T>(const AttentionSpec&, const AttentionInputs<T>&,                 \
                                const ParamSet<T>&);                                             \
  template AttentionOutputs<T> make_outputs<T>(const AttentionSpec&, const AttentionInputs<T>&); \
  template AttentionGrads<T> make_grads<T>(const AttentionSpec&, const AttentionInputs<T>&);     \
  template void attention_forward<T>(const AttentionSpec&, const AttentionInputs<T>&,            \
                                     const ParamSet<T>&, const AttentionOutputs<T>&);            \
  template void attention_backward<T>(const AttentionSpec&, const AttentionInputs<T>&,           \
                                      const ParamSet<T>&, const AttentionOutputs<T>&,            \
                                      const View4<const T>&, AttentionGrads<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
