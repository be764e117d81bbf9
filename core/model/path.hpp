#pragma once
// PaTH's per-layer parameterisation in the model (seed 004 section 2.1, DESIGN.md section 3):
//   u    = xn1 Wu                     xn1 [R, D] (the attention RMSNorm output),
//                                     Wu = path_u [D, Hkv d]            -> u [B, L, Hkv, d]
//   w    = y / |y|,  y = act(conv3(u))  per KV head and channel; conv = path_conv [Hkv, d, 3],
//                                     act = SiLU (model.path_w_silu) or the identity
//   z    = xn1 Wb + b                 Wb = path_beta_w [D, Hkv], b = path_beta_b [Hkv]
//   beta = min(2 sigmoid(z), kBetaMax)                                   -> beta [B, L, Hkv]
// then H_t = I - beta_t w_t w_t^T inside the attention (kernels/schemes/path). The pointwise
// maps and their backward are kernels/schemes/path/params.hpp; this unit adds the
// projections and the sequence bookkeeping.
//
// The convolution is causal over GLOBAL positions, so each runner segment (runner.hpp) needs
// u at the two positions before its first one: runner.rows_before_segments gives them (rows
// of another chunk or rank under context parallelism, zeros before the sequence's first
// row), and the backward hands their gradient back through rows_before_segments_backward,
// which adds it to the rows they came from. A multi-segment (zigzag) shard runs the
// convolution per segment on a contiguous copy of the segment's rows.
#include <vector>

#include "core/model/activations.hpp"
#include "core/model/block.hpp"
#include "core/model/runner.hpp"

namespace lcr {

// Fills a.path_u, a.path_z, a.path_beta, a.path_prefix and a.path_w from a.xn1.
template <class T>
void path_forward(const ModelLayout& m, const BlockParams<T>& p, LayerActivations<T>& a,
                  AttentionRunner<T>& runner, const std::vector<RowSegment>& segs);

// On entry w.attn.dpath_w [B, L, Hkv, d] and w.attn.dpath_beta [B, L, Hkv] hold the
// attention's gradients. ADDS dL/d xn1 into w.dxn and the parameter gradients into g's
// path_* slices; uses w.dpath_u and w.dpath_z as scratch.
template <class T>
void path_backward(const ModelLayout& m, const BlockParams<T>& p, const BlockParams<T>& g,
                   const LayerActivations<T>& a, BackwardWork<T>& w, AttentionRunner<T>& runner,
                   const std::vector<RowSegment>& segs);

}  // namespace lcr
