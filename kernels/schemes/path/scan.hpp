#pragma once
// The PaTH attention kernel (Kokkos): blockwise with the UT transform, exact.
//
// Per (batch, head h, query block a): the block's own keys are scored with the intra-block
// form q_i.k_j - (M E_a)_ij (blocks.hpp); then, starting from the folded queries
// x_i = q~_i, a right-to-left scan over earlier blocks c = a-1, ..., 0 scores block c's
// folded keys, logit_ij = k~_j . x_i, updates the online softmax, and moves the queries
// across the block, x_i <- P_c x_i. Memory O(L d + (L/B) d^2 + L B) per head; no L x L.
// Work O(L^2 (d + dv) + L^2 d^2 / B + L B (B + d)).
//
// Backward by recomputation. The scan runs right to left but its adjoint runs left to
// right, and P is not invertible (beta = 1 erases a direction), so per query block the
// carried queries x^(c) are stored (O(L d) per head, the same bound as the forward),
// query block by query block: for a = 1 .. nb-1 (host loop, each step parallel over
// batch, heads, rows or key blocks):
//   1. x^(a-1) = q~, x^(c-1) = P_c x^(c)                        (store all x^(c))
//   2. per key block c: G = dS of (x^(c), k~_c); dV_c += P^T dO; dk~_c += G^T x^(c);
//      r^(c) = G k~_c
//   3. g^(0) = r^(0), g^(c) = r^(c) + P_c^T g^(c-1); dq~ = g^(a-1)
//   4. dP_c += sum_i g_i^(c-1) x_i^(c)^T
// then block_backward turns dq~, dk~, dP and the intra-block softmax into dq, dk, dw,
// dbeta (blocks_backward.cpp).
#include "kernels/base/tensor.hpp"

namespace lcr::path {

template <class T>
struct PathArgs {
  View4<const T> q;      // [B, L, H, d]    (after QK-RMSNorm when enabled)
  View4<const T> k;      // [B, L, Hkv, d]
  View4<const T> v;      // [B, L, Hkv, dv]
  View4<const T> w;      // [B, L, Hkv, d]  unit rows
  View3<const T> beta;   // [B, L, Hkv]     in [0, 2)
  View3<const T> fox_q;  // [B, L, H] c_i, or empty (PaTH without FoX)
  View3<const T> fox_k;  // [B, L, H] c_j, or empty
  T scale = T(1), softcap = T(0);
  int block = 64;
};

// o [B, L, H, dv], lse [B, H, L] overwritten.
template <class T>
void path_forward(const PathArgs<T>& a, const View4<T>& o, const View3<T>& lse);

// lse: the final normaliser (sink included); delta[b,h,i] = <dO_i, O_i>.
// dq, dk, dv, dw, dbeta, dfox_q, dfox_k are overwritten (the fox ones when given).
template <class T>
void path_backward(const PathArgs<T>& a, const View3<const T>& lse, const View3<const T>& delta,
                   const View4<const T>& dout, const View4<T>& dq, const View4<T>& dk,
                   const View4<T>& dv, const View4<T>& dw, const View3<T>& dbeta,
                   const View3<T>& dfox_q, const View3<T>& dfox_k);

}  // namespace lcr::path
