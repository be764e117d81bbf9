#pragma once
// Merging partial attention results. A query row that has seen key blocks K1 (o1, lse1)
// and K2 (o2, lse2) separately has, over K1 u K2,
//   lse = log(exp(lse1) + exp(lse2)) = m + log(exp(lse1 - m) + exp(lse2 - m)), m = max,
//   o   = exp(lse1 - lse) o1 + exp(lse2 - lse) o2,
// exact for any split of the keys, so the ring's result equals the single-rank one up to
// floating-point reordering. Both weights are <= 1 (no overflow); a side with lse = -inf
// (a row that saw no key of that block) gets weight 0, and two -inf sides stay
// (o = 0, lse = -inf). Computed in T: float (fp32) or double, never narrower.
#include "kernels/base/tensor.hpp"

namespace lcr {

// acc <- merge(acc, blk). o [B, L, H, Dv], lse [B, H, L].
template <class T>
void ring_merge(const View4<T>& o_acc, const View3<T>& lse_acc, const View4<const T>& o_blk,
                const View3<const T>& lse_blk);

// dst[i] += src[i] for i < n (gradient accumulation into ring buffers and chunk grads).
template <class T>
void accumulate(T* dst, const T* src, int64_t n);

// o = 0, lse = -inf: the merge identity.
template <class T>
void reset_partial(const View4<T>& o, const View3<T>& lse);

}  // namespace lcr
