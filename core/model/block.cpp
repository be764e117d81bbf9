#include "core/model/block.hpp"

#include "core/model/fox.hpp"
#include "core/model/gemm.hpp"
#include "core/model/layers.hpp"
#include "core/model/path.hpp"

namespace lcr {

template <class T>
BlockParams<T> block_params(const ModelLayout& m, const View1<T>& buf, int l) {
  const LayerSlices& s = m.layer(l);
  const int64_t D = m.D(), F = m.F(), H = m.H(), Hkv = m.Hkv(), dq = m.dq(), dv = m.dv();
  T* base = buf.data();
  auto v1 = [&](int64_t off, int64_t n) { return View1<T>(base + off, n); };
  auto v2 = [&](int64_t off, int64_t r, int64_t c) { return View2<T>(base + off, r, c); };
  BlockParams<T> p;
  p.attn_norm = v1(s.attn_norm, D);
  p.wq = v2(s.wq, D, H * dq);
  p.wk = v2(s.wk, D, Hkv * dq);
  p.wv = v2(s.wv, D, Hkv * dv);
  p.wo = v2(s.wo, H * dv, D);
  p.attn = attention_params(m, buf, l);
  if (s.fox_w >= 0) {
    p.fox_w = v2(s.fox_w, D, H);
    p.fox_b = v1(s.fox_b, H);
  }
  if (s.path_u >= 0) {
    const int64_t d = m.config().attention.head_dim;
    p.path_u = v2(s.path_u, D, Hkv * d);
    p.path_conv = View3<T>(base + s.path_conv, Hkv, d, 3);
    p.path_beta_w = v2(s.path_beta_w, D, Hkv);
    p.path_beta_b = v1(s.path_beta_b, Hkv);
  }
  p.mlp_norm = v1(s.mlp_norm, D);
  p.w_gate = v2(s.w_gate, D, F);
  p.w_up = v2(s.w_up, D, F);
  p.w_down = v2(s.w_down, F, D);
  return p;
}

namespace {

// The attention call's inputs built from the layer's buffers (positions: runner.hpp).
template <class T>
AttentionInputs<T> attn_inputs(const LayerActivations<T>& a, const std::vector<RowSegment>& segs) {
  AttentionInputs<T> in;
  in.q = a.q;
  in.k = a.k;
  in.v = a.v;
  in.q_pos0 = in.k_pos0 = segs.front().pos0;
  if (a.fox_c.extent(0) > 0) {
    in.fox_cq = a.fox_c;
    in.fox_ck = a.fox_c;
  }
  if (a.path_w.extent(0) > 0) {
    in.path_w = a.path_w;
    in.path_beta = a.path_beta;
  }
  return in;
}

// [B, L, H, d] or [B, L, H] tensors seen as [R, cols] for the GEMMs.
template <class V>
int64_t cols(const V& v) {
  int64_t c = 1;
  for (unsigned r = 2; r < V::rank; ++r) c *= int64_t(v.extent(r));
  return c;
}

}  // namespace

template <class T>
void block_forward(const ModelLayout& m, const BlockParams<T>& p, const View2<const T>& x_in,
                   LayerActivations<T>& a, const View2<T>& x_out, AttentionRunner<T>& runner,
                   const std::vector<RowSegment>& segs) {
  const int64_t R = x_in.extent(0), D = m.D(), F = m.F();
  const T eps = T(m.config().norm_eps);
  const auto N = Trans::No;
  rmsnorm_forward<T>(x_in, p.attn_norm, eps, a.xn1, a.rstd1);
  const T* xn1 = a.xn1.data();
  gemm<T>(N, N, R, cols(a.q), D, 1, xn1, p.wq.data(), 0, a.q.data());
  gemm<T>(N, N, R, cols(a.k), D, 1, xn1, p.wk.data(), 0, a.k.data());
  gemm<T>(N, N, R, cols(a.v), D, 1, xn1, p.wv.data(), 0, a.v.data());
  if (a.fox_z.extent(0) > 0) {
    const int64_t H = m.H();
    gemm<T>(N, N, R, H, D, 1, xn1, p.fox_w.data(), 0, a.fox_z.data());
    add_bias<T>(p.fox_b, View2<T>(a.fox_z.data(), R, H));
    fox_gates_forward<T>(a.fox_z, runner, a.fox_c, fox_gate_scale(m.config().attention));
  }
  if (a.path_u.extent(0) > 0) path_forward<T>(m, p, a, runner, segs);
  runner.forward(m.config().attention, attn_inputs(a, segs), p.attn, {a.o, a.lse});
  copy_values<T>(R * D, x_in.data(), a.x_mid.data());
  gemm<T>(N, N, R, D, cols(a.o), 1, a.o.data(), p.wo.data(), 1, a.x_mid.data());
  rmsnorm_forward<T>(a.x_mid, p.mlp_norm, eps, a.xn2, a.rstd2);
  gemm<T>(N, N, R, F, D, 1, a.xn2.data(), p.w_gate.data(), 0, a.gate.data());
  gemm<T>(N, N, R, F, D, 1, a.xn2.data(), p.w_up.data(), 0, a.up.data());
  swiglu_forward<T>(a.gate, a.up, a.h);
  copy_values<T>(R * D, a.x_mid.data(), x_out.data());
  gemm<T>(N, N, R, D, F, 1, a.h.data(), p.w_down.data(), 1, x_out.data());
}

template <class T>
void block_backward(const ModelLayout& m, const BlockParams<T>& p, const BlockParams<T>& g,
                    const View2<const T>& x_in, const LayerActivations<T>& a, BackwardWork<T>& w,
                    AttentionRunner<T>& runner, const std::vector<RowSegment>& segs) {
  const int64_t R = x_in.extent(0), D = m.D(), F = m.F();
  const auto N = Trans::No, Y = Trans::Yes;
  T* dres = w.dres.data();
  T* dxn = w.dxn.data();
  // MLP branch: x_out = x_mid + h Wdown.
  gemm<T>(N, Y, R, F, D, 1, dres, p.w_down.data(), 0, w.dh.data());
  gemm<T>(Y, N, F, D, R, 1, a.h.data(), dres, 1, g.w_down.data());
  swiglu_backward<T>(a.gate, a.up, w.dh, w.dgate, w.dup);
  gemm<T>(N, Y, R, D, F, 1, w.dgate.data(), p.w_gate.data(), 0, dxn);
  gemm<T>(N, Y, R, D, F, 1, w.dup.data(), p.w_up.data(), 1, dxn);
  gemm<T>(Y, N, D, F, R, 1, a.xn2.data(), w.dgate.data(), 1, g.w_gate.data());
  gemm<T>(Y, N, D, F, R, 1, a.xn2.data(), w.dup.data(), 1, g.w_up.data());
  rmsnorm_backward<T>(a.x_mid, p.mlp_norm, a.rstd2, w.dxn, w.dres, g.mlp_norm);  // dres: d x_mid
  // Attention branch: x_mid = x_in + o Wo.
  const int64_t HO = cols(a.o);
  gemm<T>(N, Y, R, HO, D, 1, dres, p.wo.data(), 0, w.dout.data());
  gemm<T>(Y, N, HO, D, R, 1, a.o.data(), dres, 1, g.wo.data());
  const AttentionInputs<T> in = attn_inputs(a, segs);
  runner.backward(m.config().attention, in, p.attn, {a.o, a.lse}, w.dout, w.attn);
  axpy<T>(g.attn.data.extent(0), T(1), w.attn.dparams.data.data(), g.attn.data.data());
  const T* xn1 = a.xn1.data();
  const int64_t CQ = cols(a.q), CK = cols(a.k), CV = cols(a.v);
  gemm<T>(N, Y, R, D, CQ, 1, w.attn.dq.data(), p.wq.data(), 0, dxn);
  gemm<T>(N, Y, R, D, CK, 1, w.attn.dk.data(), p.wk.data(), 1, dxn);
  gemm<T>(N, Y, R, D, CV, 1, w.attn.dv.data(), p.wv.data(), 1, dxn);
  gemm<T>(Y, N, D, CQ, R, 1, xn1, w.attn.dq.data(), 1, g.wq.data());
  gemm<T>(Y, N, D, CK, R, 1, xn1, w.attn.dk.data(), 1, g.wk.data());
  gemm<T>(Y, N, D, CV, R, 1, xn1, w.attn.dv.data(), 1, g.wv.data());
  if (a.fox_z.extent(0) > 0) {
    // c feeds both the query lane (+c_i) and the key lane (-c_j): dc = dcq + dck.
    const int64_t H = m.H(), n = R * H;
    copy_values<T>(n, w.attn.dfox_cq.data(), w.dfox_c.data());
    axpy<T>(n, T(1), w.attn.dfox_ck.data(), w.dfox_c.data());
    fox_gates_backward<T>(a.fox_z, runner, w.dfox_c, w.dfox_z,
                          fox_gate_scale(m.config().attention));
    const T* dz = w.dfox_z.data();
    gemm<T>(N, Y, R, D, H, 1, dz, p.fox_w.data(), 1, dxn);
    gemm<T>(Y, N, D, H, R, 1, xn1, dz, 1, g.fox_w.data());
    bias_backward<T>(View2<const T>(dz, R, H), g.fox_b);
  }
  if (a.path_u.extent(0) > 0) path_backward<T>(m, p, g, a, w, runner, segs);    // dxn +=
  rmsnorm_backward<T>(x_in, p.attn_norm, a.rstd1, w.dxn, w.dres, g.attn_norm);  // dres: d x_in
}

#define LCR_INSTANTIATE(T)                                                                         \
  template BlockParams<T> block_params<T>(const ModelLayout&, const View1<T>&, int);               \
  template void block_forward<T>(const ModelLayout&, const BlockParams<T>&, const View2<const T>&, \
                                 LayerActivations<T>&, const View2<T>&, AttentionRunner<T>&,       \
                                 const std::vector<RowSegment>&);                                  \
  template void block_backward<T>(const ModelLayout&, const BlockParams<T>&,                       \
                                  const BlockParams<T>&, const View2<const T>&,                    \
                                  const LayerActivations<T>&, BackwardWork<T>&,                    \
                                  AttentionRunner<T>&, const std::vector<RowSegment>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
