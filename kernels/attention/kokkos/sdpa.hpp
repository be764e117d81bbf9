#pragma once
// The one scaled-dot-product kernel every dot-product scheme ends in. Schemes turn their
// inputs into (q', k') lanes (RoPE rotation, GOAT prior lanes, PoPE real/imag parts) and
// call this. Per (b, h, i, j) with global positions p_i = q_pos0 + i, p_j = k_pos0 + j:
//   x_ij = scale <q_i, k_j> - slope_h (p_i - p_j) + bias_q[b,i,h] - bias_k[b,j,h]
//   s_ij = softcap > 0 ? softcap tanh(x_ij / softcap) : x_ij,   masked unless p_j <= p_i
//   lse_i = log sum_j exp(s_ij),  o_i = sum_j exp(s_ij - lse_i) v_j
// A row that sees no key gets lse = -inf and o = 0 (the ring merge relies on that).
// Tiled with online softmax: memory O(L) per head, never an L x L matrix. Backward
// recomputes the probabilities from lse (FlashAttention-2 style): one pass over key
// tiles for dK/dV, one over query tiles for dQ, no atomics. A team owns a 64 x 64 tile at a
// time; its products (QK^T, PV, dP, dV, dK, dQ) are register-blocked (tile.hpp) and its
// per-row passes are contiguous loops (sdpa_rows.hpp), so a CPU core runs them as SIMD.
#include "kernels/base/tensor.hpp"

namespace lcr {

template <class T>
struct SdpaArgs {
  View4<const T> q;  // [B, Lq, H, D]
  View4<const T> k;  // [B, Lk, Hkv, D]
  View4<const T> v;  // [B, Lk, Hkv, Dv]
  int64_t q_pos0 = 0;
  int64_t k_pos0 = 0;
  T scale = T(1);
  View1<const T> alibi_slopes;  // [H] or empty: the -slope_h (p_i - p_j) term
  View3<const T> bias_q;        // [B, Lq, H] or empty (FoX: cumulative log gate c_i)
  View3<const T> bias_k;        // [B, Lk, H] or empty (FoX: c_j)
  T softcap = T(0);
};

template <class T>
void check_sdpa_args(const SdpaArgs<T>& a);

// o [B, Lq, H, Dv], lse [B, H, Lq] are overwritten.
template <class T>
void sdpa_forward(const SdpaArgs<T>& a, const View4<T>& o, const View3<T>& lse);

// delta[b,h,i] = <dO_i, O_i>, the softmax backward's row term.
template <class T>
void sdpa_row_delta(const View4<const T>& o, const View4<const T>& dout, const View3<T>& delta);

// Gradients given lse (the final normaliser, sink included) and delta. dq, dk, dv are
// overwritten; dbias_q / dbias_k are overwritten when non-empty.
template <class T>
void sdpa_backward(const SdpaArgs<T>& a, const View3<const T>& lse, const View3<const T>& delta,
                   const View4<const T>& dout, const View4<T>& dq, const View4<T>& dk,
                   const View4<T>& dv, const View3<T>& dbias_q, const View3<T>& dbias_k);

// Learned sink: lse <- log(exp(lse) + exp(s_h)), o <- o exp(lse_old - lse_new).
template <class T>
void sdpa_apply_sink(const View1<const T>& sink, const View4<T>& o, const View3<T>& lse);

// dsink[h] = -sum_{b,i} exp(s_h - lse_i) delta_i (the sink's value vector is zero).
template <class T>
void sdpa_sink_backward(const View1<const T>& sink, const View3<const T>& lse,
                        const View3<const T>& delta, const View1<T>& dsink);

// Which form of the kernels runs. Automatic: a GPU build runs the GPU form
// (sdpa_*_gpu.hpp: tiles in level-0 scratch, the transposed backward), a CPU build the CPU
// form, whose backward is one pass (a team a KV head also adds dQ) when the KV heads keep
// every thread busy, else two (a team a key tile, then a team a query tile). Tests pin each
// form so that every CI run checks all of them against the references.
enum class SdpaForm { Automatic, Gpu, CpuOnePass, CpuTwoPass };
void sdpa_use_form(SdpaForm form);
SdpaForm sdpa_form();

}  // namespace lcr
