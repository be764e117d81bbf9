#pragma once
// What a context-parallel ring needs from PaTH (DESIGN.md section 5). A rank holds one
// or more chunks, each a contiguous span of GLOBAL positions s..e; for each chunk it
// computes, from that chunk's w, beta, q and k alone:
//   k~_j = H_e H_{e-1} ... H_{j+1} k_j      keys folded to the chunk's right end
//   q~_i = H_s H_{s+1} ... H_i q_i          queries folded to the chunk's left end
//   P    = H_s H_{s+1} ... H_e              the chunk's transition (dense d x d)
// and for key j in chunk b and query i in a later chunk a (DESIGN.md s5, exact order):
//   k_j^T H_{j+1} ... H_i q_i = k~_j^T (P_{b+1} P_{b+2} ... P_{a-1}) q~_i.
// So a visiting chunk's (k~, v) meets local queries y_i = (P_{b+1} ... P_{a-1}) q~_i in an
// ORDINARY scaled dot product (sdpa.hpp: every key precedes every query, plus the FoX
// lanes c_i - c_j), and the partial (o, lse) merge as for every scheme; the chunk's own
// keys use attention_forward. apply_transition builds y (multiply the P's right to left:
// y <- P_{a-1} y, then P_{a-2}, ...).
//
// Shapes: w, k [B, L, Hkv, d], beta [B, L, Hkv], q [B, L, H, d] (query head h uses KV
// head h / (H / Hkv)), P [B, Hkv, d, d]. `block` is the internal block size (any >= 1).
// Every *_backward ADDS into its gradient outputs (dq, dk, dw, dbeta, dP, dx), so the
// several uses of one chunk's w and beta accumulate into one buffer.
#include "kernels/base/tensor.hpp"

namespace lcr::path {

template <class T>
void fold_keys_right(const View4<const T>& w, const View3<const T>& beta, const View4<const T>& k,
                     int block, const View4<T>& k_fold);
template <class T>
void fold_keys_right_backward(const View4<const T>& w, const View3<const T>& beta,
                              const View4<const T>& k, int block, const View4<const T>& dk_fold,
                              const View4<T>& dk, const View4<T>& dw, const View3<T>& dbeta);

template <class T>
void fold_queries_left(const View4<const T>& w, const View3<const T>& beta, const View4<const T>& q,
                       int block, const View4<T>& q_fold);
template <class T>
void fold_queries_left_backward(const View4<const T>& w, const View3<const T>& beta,
                                const View4<const T>& q, int block, const View4<const T>& dq_fold,
                                const View4<T>& dq, const View4<T>& dw, const View3<T>& dbeta);

template <class T>
void chunk_transition(const View4<const T>& w, const View3<const T>& beta, int block,
                      const View4<T>& p);
template <class T>
void chunk_transition_backward(const View4<const T>& w, const View3<const T>& beta, int block,
                               const View4<const T>& dp, const View4<T>& dw, const View3<T>& dbeta);

// y_i = P x_i per row: x, y [B, L, H, d], P [B, Hkv, d, d]. Backward: dx += P^T dy,
// dP += sum_i dy_i x_i^T.
template <class T>
void apply_transition(const View4<const T>& p, const View4<const T>& x, const View4<T>& y);
template <class T>
void apply_transition_backward(const View4<const T>& p, const View4<const T>& x,
                               const View4<const T>& dy, const View4<T>& dp, const View4<T>& dx);

}  // namespace lcr::path
