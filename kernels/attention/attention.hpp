#pragma once
// The attention API (DESIGN.md section 4): one forward and one backward for every
// scheme. forward -> (o, lse); backward -> (dq, dk, dv, d scheme parameters, d scheme
// inputs). Shapes are in spec.hpp; parameters in params.hpp.
//
// Data path of the dot-product family:
//   q, k --QK-RMSNorm (optional)--> scheme lanes (RoPE rotation, GOAT prior lanes, PoPE
//   real/imag parts) --> sdpa (scale, ALiBi slope, FoX bias lanes, softcap) --> sink.
// The backward runs the same stages in reverse, recomputing the cheap O(L d) stages.
#include "kernels/attention/kokkos/sdpa.hpp"
#include "kernels/attention/params.hpp"
#include "kernels/attention/spec.hpp"
#include "kernels/base/tensor.hpp"

namespace lcr {

template <class T>
struct AttentionInputs {
  View4<const T> q;    // [B, Lq, H, input_qk_dim(spec)]
  View4<const T> k;    // [B, Lk, Hkv, input_qk_dim(spec)]
  View4<const T> v;    // [B, Lk, Hkv, v_dim]
  int64_t q_pos0 = 0;  // global position of query row 0
  int64_t k_pos0 = 0;  // global position of key row 0
  // FoX / PaTH-FoX: cumulative log forget gates at GLOBAL positions,
  // c_t = sum_{s <= t} log f_s (kernels/schemes/fox computes them from gates).
  View3<const T> fox_cq;  // [B, Lq, H]
  View3<const T> fox_ck;  // [B, Lk, H]
  // PaTH / PaTH-FoX (self-attention: Lq == Lk, q_pos0 == k_pos0): H_t = I - beta_t w_t w_t^T
  // per position and KV head (query heads of a GQA group share their KV head's
  // transitions). w_t unit vectors, 0 <= beta_t < 2 (kernels/schemes/path/params.hpp
  // builds both from layer activations).
  View4<const T> path_w;     // [B, L, Hkv, head_dim]
  View3<const T> path_beta;  // [B, L, Hkv]
};

template <class T>
struct AttentionOutputs {
  View4<T> o;    // [B, Lq, H, v_dim]
  View3<T> lse;  // [B, H, Lq], sink included
};

template <class T>
struct AttentionGrads {
  View4<T> dq, dk, dv;        // shapes of q, k, v
  ParamSet<T> dparams;        // same layout as the parameters
  View3<T> dfox_cq, dfox_ck;  // FoX only
  View4<T> dpath_w;           // PaTH only: unconstrained gradient w.r.t. path_w
  View3<T> dpath_beta;        // PaTH only
};

// Allocates outputs / gradients of the right shapes for these inputs.
template <class T>
AttentionOutputs<T> make_outputs(const AttentionSpec& spec, const AttentionInputs<T>& in);
template <class T>
AttentionGrads<T> make_grads(const AttentionSpec& spec, const AttentionInputs<T>& in);

// Checks shapes against the spec; throws an Error naming the tensor and the shape expected.
template <class T>
void check_inputs(const AttentionSpec& spec, const AttentionInputs<T>& in,
                  const ParamSet<T>& params);

template <class T>
void attention_forward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                       const ParamSet<T>& params, const AttentionOutputs<T>& out);

// out is the forward result for the same inputs; dout [B, Lq, H, v_dim].
template <class T>
void attention_backward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                        const ParamSet<T>& params, const AttentionOutputs<T>& out,
                        const View4<const T>& dout, AttentionGrads<T>& grads);

// The kernel-level form of a dot-product attention call: what the context-parallel ring
// and other kernel implementations consume. prepare_attention runs QK-RMSNorm and the
// scheme's lanes (with the GLOBAL positions in `in`) and fills the SDPA arguments;
// prepared_backward maps lane gradients dq2 [like sdpa.q], dk2 [like sdpa.k] back to
// dq, dk (overwritten) and ADDS lane/QK-norm parameter gradients into dparams. The sink
// is not part of it (apply it once, after all key blocks are merged).
template <class T>
struct PreparedAttention {
  View4<const T> qn, kn;  // q, k after QK-RMSNorm (or q, k themselves)
  SdpaArgs<T> sdpa;       // q', k', v, positions, scale, ALiBi, FoX lanes, softcap
};

template <class T>
PreparedAttention<T> prepare_attention(const AttentionSpec& spec, const AttentionInputs<T>& in,
                                       const ParamSet<T>& params);

template <class T>
void prepared_backward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                       const ParamSet<T>& params, const PreparedAttention<T>& p,
                       const View4<const T>& dq2, const View4<const T>& dk2, const View4<T>& dq,
                       const View4<T>& dk, ParamSet<T>& dparams);

}  // namespace lcr
