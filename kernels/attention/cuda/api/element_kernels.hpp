#pragma once
// Element-parallel forms of the lane maps without QK-RMSNorm whose lanes each come from one
// place (Copy, GOAT): internal to lane_kernels.cu's lanes_forward / lanes_backward, which
// take them whenever the *_ok test passes and fall back to the row kernels otherwise.
#include "kernels/attention/cuda/api/lane_kernels.hpp"

namespace lcr::cuda::lanes {

// Forward: no norm, Copy or GOAT (with a.prior), even d, x 4-byte and y 16-byte aligned.
bool element_forward_ok(const RowLaneArgs& a, const __nv_bfloat16* y);
// GOAT: a.prior [L, Hx, 2R + 2] <- the prior lanes of every (position, head) of the side
// (what lanes d_c .. d_c + 2R + 1 of its rows hold, for every batch row).
void goat_prior_table(const RowLaneArgs& a, cudaStream_t s);
// y <- [scale x, the prior row of (position, head) (GOAT), zeros] per row.
void concat_lanes(const RowLaneArgs& a, __nv_bfloat16* y, cudaStream_t s);

// Backward: no norm, Copy or GOAT, even d, dy (fp32 8-byte, bf16 4-byte) and dx aligned.
bool element_backward_ok(const RowLaneArgs& a, const RowLaneGrads& g);
// dx <- scale dy[:, :d] (the content lanes' gradient).
void narrow_grads(const RowLaneArgs& a, const RowLaneGrads& g, cudaStream_t s);
// GOAT: the mode partials (queries, g.mode_part) or du (keys, g.du) from the prior lanes.
void goat_prior_grads(const RowLaneArgs& a, const RowLaneGrads& g, cudaStream_t s);

}  // namespace lcr::cuda::lanes
