#pragma once
// QK-RMSNorm: per-head RMSNorm of q and k before the position scheme (Qwen3 / Gemma 3 /
// OLMo 2 convention): y = x / sqrt(mean(x^2) + eps) * gain, gain [dq] shared by heads.
#include "kernels/base/tensor.hpp"

namespace lcr {

// x [B, L, H, d] -> y [B, L, H, d]
template <class T>
void rms_norm_heads_forward(const View4<const T>& x, const View1<const T>& gain, T eps,
                            const View4<T>& y);

// dx overwritten; dgain ADDED (reduced over B, L, H).
template <class T>
void rms_norm_heads_backward(const View4<const T>& x, const View1<const T>& gain, T eps,
                             const View4<const T>& dy, const View4<T>& dx, const View1<T>& dgain);

}  // namespace lcr
