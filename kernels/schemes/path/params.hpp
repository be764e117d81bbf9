#pragma once
// PaTH's layer-level parameterisation (seed 004 section 2.1), with backward, so a model
// layer can train it. The model owns the projections (x -> u for w, x -> logits for
// beta); this unit owns what follows them:
//   w_t   = y_t / |y_t|,  y = conv3(u) (optionally SiLU(conv3(u))), per KV head
//   beta_t = min(2 sigmoid(x_t), kBetaMax)
// The causal width-3 depthwise convolution runs over time, per channel (h, c):
//   y_t[h, c] = sum_{k=0..2} weight[h, c, k] u_{t-2+k}[h, c]
// (PyTorch conv1d layout with padding 2: k = 2 is the current position). The two rows
// before the span come from `prefix` [B, 2, Hkv, d] (prefix[:, 1] is position start-1);
// an empty prefix means zeros, i.e. the start of the sequence. A context-parallel rank
// passes the previous shard's last two rows of u and gets their gradient back.
#include "kernels/base/tensor.hpp"

namespace lcr::path {

// beta stays strictly below 2 in every precision: 2 sigmoid(x) rounds to exactly 2 in
// float32 from x ~ 17 on, and beta = 2 is an exact reflection whose products do not
// decay, which the paper reports as a source of divergence. 2 - 2^-10 is exact in
// float16/float32/float64 and keeps the eigenvalue 1 - beta >= -0.999.
constexpr double kBetaMax = 2.0 - 1.0 / 1024.0;
// A conv output row with norm at or below this has no usable direction: Error.
constexpr double kMinWNorm = 1e-12;

// x [B, L, Hkv] -> beta [B, L, Hkv]
template <class T>
void beta_forward(const View3<const T>& x, const View3<T>& beta);
// dx = dbeta * d beta / dx (0 where beta is clamped); dx overwritten.
template <class T>
void beta_backward(const View3<const T>& x, const View3<const T>& dbeta, const View3<T>& dx);

struct WConv {
  bool silu = false;  // SiLU after the convolution (flash-linear-attention's ShortConvolution)
};

// u [B, L, Hkv, d], weight [Hkv, d, 3], prefix [B, 2, Hkv, d] or empty -> w [B, L, Hkv, d].
// Throws lcr::Error naming the row when |y_t| <= kMinWNorm or is not finite.
template <class T>
void w_forward(const WConv& opt, const View4<const T>& u, const View3<const T>& weight,
               const View4<const T>& prefix, const View4<T>& w);

// Given dw (the gradient with respect to w as a free vector, e.g. AttentionGrads::dpath_w):
// du overwritten, dweight ADDED (so several calls can share one gradient buffer),
// dprefix overwritten when non-empty.
template <class T>
void w_backward(const WConv& opt, const View4<const T>& u, const View3<const T>& weight,
                const View4<const T>& prefix, const View4<const T>& dw, const View4<T>& du,
                const View3<T>& dweight, const View4<T>& dprefix);

}  // namespace lcr::path
