#pragma once
// FoX forget gates (DESIGN.md section 3): f_t = sigmoid(x_t) in (0, 1) per position and
// query head, and the cumulative log gate over GLOBAL positions
//   c_t = offset + sum_{s <= t} log f_s,
// whose differences c_i - c_j = sum_{s=j+1..i} log f_s are the FoX logit bias (the
// attention API takes c as fox_cq / fox_ck; PaTH-FoX adds the same bias). `offset` is the
// sum of log f over the global positions before this span: empty at the sequence start,
// the previous shards' total on a context-parallel rank (c at the previous shard's last
// position), so every rank's c is the global one.
#include "kernels/base/tensor.hpp"

namespace lcr::fox {

// x [B, L, H] gate logits, offset [B, H] or empty -> c [B, L, H]. The running sum is kept
// in double whatever T is: c drifts to -O(L) and float32 would lose the small
// differences c_i - c_j of nearby positions.
template <class T>
void cumulative_log_gates(const View3<const T>& x, const View2<const T>& offset, const View3<T>& c);

// Reverse cumulative sum: dx_s = sigmoid(-x_s) sum_{t >= s} dc_t (d log sigmoid(x) / dx =
// sigmoid(-x)); doffset[b, h] = sum_t dc_t. dx overwritten; doffset overwritten when given.
template <class T>
void cumulative_log_gates_backward(const View3<const T>& x, const View3<const T>& dc,
                                   const View3<T>& dx, const View2<T>& doffset);

}  // namespace lcr::fox
