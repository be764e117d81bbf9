#include "core/model/activations.hpp"

namespace lcr {

template <class T>
Activations<T> make_activations(const ModelLayout& m, int64_t B, int64_t L) {
  const int64_t R = B * L, D = m.D(), F = m.F(), H = m.H(), Hkv = m.Hkv();
  const Scheme scheme = m.config().attention.scheme;
  const bool fox = uses_fox(scheme), path = is_path(scheme);
  const int64_t d = m.config().attention.head_dim;
  Activations<T> a;
  a.B = B;
  a.L = L;
  a.tokens = View2<int32_t>("lcr::tokens", B, L);
  a.labels = View2<int32_t>("lcr::labels", B, L);
  for (int l = 0; l <= m.config().n_layers; ++l) a.x.push_back(View2<T>("lcr::x", R, D));
  for (int l = 0; l < m.config().n_layers; ++l) {
    LayerActivations<T> la;
    la.xn1 = View2<T>("lcr::xn1", R, D);
    la.rstd1 = View1<T>("lcr::rstd1", R);
    la.q = View4<T>("lcr::q", B, L, H, m.dq());
    la.k = View4<T>("lcr::k", B, L, Hkv, m.dq());
    la.v = View4<T>("lcr::v", B, L, Hkv, m.dv());
    if (fox) {
      la.fox_z = View3<T>("lcr::fox_z", B, L, H);
      la.fox_c = View3<T>("lcr::fox_c", B, L, H);
    }
    if (path) {
      la.path_u = View4<T>("lcr::path_u", B, L, Hkv, d);
      la.path_w = View4<T>("lcr::path_w", B, L, Hkv, d);
      la.path_z = View3<T>("lcr::path_z", B, L, Hkv);
      la.path_beta = View3<T>("lcr::path_beta", B, L, Hkv);
    }
    la.o = View4<T>("lcr::o", B, L, H, m.dv());
    la.lse = View3<T>("lcr::lse", B, H, L);
    la.x_mid = View2<T>("lcr::x_mid", R, D);
    la.xn2 = View2<T>("lcr::xn2", R, D);
    la.rstd2 = View1<T>("lcr::rstd2", R);
    la.gate = View2<T>("lcr::gate", R, F);
    la.up = View2<T>("lcr::up", R, F);
    la.h = View2<T>("lcr::h", R, F);
    a.layers.push_back(la);
  }
  a.xf = View2<T>("lcr::xf", R, D);
  a.rstdf = View1<T>("lcr::rstdf", R);
  a.logits = View2<T>("lcr::logits", R, m.V());
  a.lse = View1<T>("lcr::logit_lse", R);
  a.row_loss = View1<T>("lcr::row_loss", R);
  return a;
}

template <class T>
BackwardWork<T> make_backward_work(const ModelLayout& m, int64_t B, int64_t L) {
  const int64_t R = B * L, D = m.D(), F = m.F(), H = m.H(), Hkv = m.Hkv();
  BackwardWork<T> w;
  w.dres = View2<T>("lcr::dres", R, D);
  w.dxn = View2<T>("lcr::dxn", R, D);
  w.dh = View2<T>("lcr::dh", R, F);
  w.dgate = View2<T>("lcr::dgate", R, F);
  w.dup = View2<T>("lcr::dup", R, F);
  w.dout = View4<T>("lcr::dout", B, L, H, m.dv());
  w.attn.dq = View4<T>("lcr::dq", B, L, H, m.dq());
  w.attn.dk = View4<T>("lcr::dk", B, L, Hkv, m.dq());
  w.attn.dv = View4<T>("lcr::dv", B, L, Hkv, m.dv());
  w.attn.dparams = ParamSet<T>(m.attention(), "lcr::dattn_params");
  if (uses_fox(m.config().attention.scheme)) {
    w.attn.dfox_cq = View3<T>("lcr::dfox_cq", B, L, H);
    w.attn.dfox_ck = View3<T>("lcr::dfox_ck", B, L, H);
    w.dfox_c = View3<T>("lcr::dfox_c", B, L, H);
    w.dfox_z = View3<T>("lcr::dfox_z", B, L, H);
  }
  if (is_path(m.config().attention.scheme)) {
    const int64_t d = m.config().attention.head_dim;
    w.attn.dpath_w = View4<T>("lcr::dpath_w", B, L, Hkv, d);
    w.attn.dpath_beta = View3<T>("lcr::dpath_beta", B, L, Hkv);
    w.dpath_u = View4<T>("lcr::dpath_u", B, L, Hkv, d);
    w.dpath_z = View3<T>("lcr::dpath_z", B, L, Hkv);
  }
  return w;
}

template Activations<float> make_activations<float>(const ModelLayout&, int64_t, int64_t);
template Activations<double> make_activations<double>(const ModelLayout&, int64_t, int64_t);
template BackwardWork<float> make_backward_work<float>(const ModelLayout&, int64_t, int64_t);
template BackwardWork<double> make_backward_work<double>(const ModelLayout&, int64_t, int64_t);

}  // namespace lcr
