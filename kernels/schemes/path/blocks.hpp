#pragma once
// PaTH inside one block of positions: the UT transform and the quantities every PaTH
// algorithm is built from (DESIGN.md sections 3 and 5, seed 004 sections 2.6-2.7).
//
// One sequence of L positions per (batch b, KV head h) is cut into blocks of `block`
// positions (the last one may be shorter); block m spans s_m..e_m. Inside block m, with
// W_m [n, d] the rows w_t, D = diag(beta_t) and H_t = I - beta_t w_t w_t^T:
//   T_m  = (I + strictLower(D W W^T))^-1 D                     [n, n] lower triangular
//   E_m  = T_m strictLower(W K^T)                                [n, n] strictly lower
//   k~_j = H_{e_m} ... H_{j+1} k_j = k_j - sum_r E_m[r][j] w_r   key at the block's right end
//   q~_i = H_{s_m} ... H_i q_i     = q_i - sum_r (M T_m)[i][r] w_r, M = lower(Q W^T)
//   P_m  = H_{s_m} ... H_{e_m}     = I - W^T T_m^T W             [d, d]
//   k_j^T H_{j+1} ... H_i q_i      = q_i.k_j - (M E_m)[i][j]      for s_m <= j <= i <= e_m
// (H_e ... H_s = I - W^T T W is the other direction; the transposes matter.)
#include "kernels/base/tensor.hpp"

namespace lcr::path {

template <class T, class M = MemSpace>
using View5 = Kokkos::View<T*****, Kokkos::LayoutRight, M>;

inline int num_blocks(int64_t L, int block) { return int((L + block - 1) / block); }

// What the forward of every PaTH algorithm precomputes per (batch, KV head, block).
template <class T>
struct BlockState {
  int block = 64, nb = 0;
  View5<T> t;       // [B, Hkv, nb, block, block]  T_m
  View5<T> e;       // [B, Hkv, nb, block, block]  E_m (empty without keys)
  View4<T> k_fold;  // [B, L, Hkv, d]              k~_j (empty without keys)
  View5<T> p;       // [B, Hkv, nb, d, d]          P_m
};

// w [B, L, Hkv, d], beta [B, L, Hkv]; k [B, L, Hkv, d] or empty (then no E, no k~).
template <class T>
BlockState<T> block_forward(const View4<const T>& w, const View3<const T>& beta,
                            const View4<const T>& k, int block);

// q~ for every query row: q [B, L, H, d] -> q_fold [B, L, H, d] (head h uses KV head
// h / (H / Hkv)); each row is folded to the left boundary of its own block.
template <class T>
void block_fold_queries(const BlockState<T>& st, const View4<const T>& w, const View4<const T>& q,
                        const View4<T>& q_fold);

// The attention part of a block's backward (the softmax of query rows and key rows of
// the same block); empty dout = no attention part.
template <class T>
struct BlockAttention {
  View4<const T> v;             // [B, L, Hkv, dv]
  View4<const T> dout;          // [B, L, H, dv]
  View3<const T> lse, delta;    // [B, H, L]
  View3<const T> fox_q, fox_k;  // [B, L, H] or empty
  View3<T> dfox_q, dfox_k;      // ADDED when fox is given
  View4<T> dv;                  // ADDED
  T scale = T(1), softcap = T(0);
};

// Backward of everything above, per block, by recomputation. Incoming gradients (empty
// view = zero): dq_fold [B, L, H, d] (of q~), dk_fold [B, L, Hkv, d] (of k~),
// dp [B, Hkv, nb, d, d] (of P_m). Outgoing gradients are ADDED: dq (when q is given),
// dk (when k is given), dw, dbeta.
template <class T>
struct BlockGrads {
  View4<const T> dq_fold, dk_fold;
  View5<const T> dp;
  View4<T> dq, dk, dw;
  View3<T> dbeta;
};

template <class T>
void block_backward(const View4<const T>& w, const View3<const T>& beta, const View4<const T>& q,
                    const View4<const T>& k, int block, const BlockAttention<T>& att,
                    const BlockGrads<T>& g);

}  // namespace lcr::path
