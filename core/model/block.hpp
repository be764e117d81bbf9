#pragma once
// One pre-norm transformer block, forward and backward (llm.c style):
//   xn1 = RMSNorm(x_in; attn_norm)
//   q = xn1 Wq, k = xn1 Wk, v = xn1 Wv              (FoX: z = xn1 fox_w + fox_b -> c)
//                                                   (PaTH: xn1 -> w, beta; path.hpp)
//   o = attention(q, k, v; scheme)                  (through the injected runner)
//   x_mid = x_in + o Wo
//   xn2 = RMSNorm(x_mid; mlp_norm)
//   x_out = x_mid + (silu(xn2 Wgate) * (xn2 Wup)) Wdown
#include <vector>

#include "core/model/activations.hpp"
#include "core/model/runner.hpp"

namespace lcr {

// Views of one layer's slices inside the parameter buffer, or inside the gradient buffer
// (same layout). They alias the buffer: no copies.
template <class T>
struct BlockParams {
  View1<T> attn_norm;             // [D]
  View2<T> wq, wk, wv, wo;        // [D, H dq], [D, Hkv dq], [D, Hkv dv], [H dv, D]
  ParamSet<T> attn;               // the layer's attn.* block
  View2<T> fox_w;                 // [D, H] (FoX only)
  View1<T> fox_b;                 // [H]
  View2<T> path_u;                // [D, Hkv d] (PaTH only)
  View3<T> path_conv;             // [Hkv, d, 3]
  View2<T> path_beta_w;           // [D, Hkv]
  View1<T> path_beta_b;           // [Hkv]
  View1<T> mlp_norm;              // [D]
  View2<T> w_gate, w_up, w_down;  // [D, F], [D, F], [F, D]
};

template <class T>
BlockParams<T> block_params(const ModelLayout& layout, const View1<T>& buffer, int l);

// Fills a (every buffer of the layer) and x_out [R, D].
template <class T>
void block_forward(const ModelLayout& layout, const BlockParams<T>& p, const View2<const T>& x_in,
                   LayerActivations<T>& a, const View2<T>& x_out, AttentionRunner<T>& runner,
                   const std::vector<RowSegment>& segs);

// On entry w.dres holds dL/dx_out; on exit dL/dx_in. Parameter gradients are ADDED into g.
template <class T>
void block_backward(const ModelLayout& layout, const BlockParams<T>& p, const BlockParams<T>& g,
                    const View2<const T>& x_in, const LayerActivations<T>& a, BackwardWork<T>& w,
                    AttentionRunner<T>& runner, const std::vector<RowSegment>& segs);

}  // namespace lcr
