#pragma once
// PaTH and PaTH-FoX behind the attention API (attention.hpp dispatches here):
//   logit_ij = k_j^T H_{j+1} ... H_i q_i / sqrt(d) [+ c_i - c_j],  H_t = I - beta_t w_t w_t^T,
// causal softmax, o and lse like every scheme. Transitions are per KV head: the query
// heads of a GQA group share their KV head's w and beta (and its keys), as they share K/V.
// Numerics options: QK-RMSNorm (on q and k before the transitions), softcap (on the final
// logit), learned sink (after the softmax) all work as for the dot-product schemes.
//
// Inputs (AttentionInputs): q [B, L, H, d], k [B, L, Hkv, d], v [B, L, Hkv, dv],
// path_w [B, L, Hkv, d] with unit rows, path_beta [B, L, Hkv] in [0, 2), and for
// PaTH-FoX the cumulative log gates fox_cq, fox_ck [B, L, H] (same positions, so usually
// the same values; kernels/schemes/fox builds them from gate logits). Self-attention only:
// Lq == Lk and q_pos0 == k_pos0 (the transitions between a query and a key are those of
// the positions between them; a ring over chunks uses ring.hpp instead).
// Gradients (AttentionGrads): dq, dk, dv, dpath_w (unconstrained: the derivative with
// respect to w as a free vector; params.hpp maps it back through the normalisation),
// dpath_beta, dfox_cq, dfox_ck, and dparams (sink, QK-norm gains).
#include "kernels/attention/attention.hpp"

namespace lcr::path {

// |<w, w> - 1| allowed for a "unit" w: rows normalised in float32 are within ~1e-6; a
// row that was never normalised is almost never this close.
constexpr double kUnitNormTolerance = 1e-3;

// Shapes (naming the tensor and the shape expected), self-attention, block size, and
// values: every input finite, beta in [0, 2), w of unit norm. Throws lcr::Error.
template <class T>
void check_inputs(const AttentionSpec& spec, const AttentionInputs<T>& in);

template <class T>
void attention_forward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                       const ParamSet<T>& params, const AttentionOutputs<T>& out);

template <class T>
void attention_backward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                        const ParamSet<T>& params, const AttentionOutputs<T>& out,
                        const View4<const T>& dout, AttentionGrads<T>& grads);

}  // namespace lcr::path
