#pragma once
// FoX forget gate of one layer (DESIGN.md section 3, Forgetting Transformer):
//   z = xn W + b               xn [B L, D] (the attention RMSNorm output), W [D, H], b [H]
//   log f_t = log sigmoid(z_t) = -softplus(-z_t)                        per query head
//   c_t = sum_{s <= t} log f_s  over GLOBAL positions t, s      -> attention bias c_i - c_j
// With a gate scale s (fox_gate_scale, spec.hpp) log f_t is s log sigmoid(z_t), so c is s
// times the sum above and dz gets the factor s too.
// The sum over global positions is the runner's global_cumsum (runner.hpp), so c is the
// global sum on every rank. Backward: dlogf_s = sum_{t >= s} dc_t (the runner's reverse
// cumsum), then dz = dlogf sigmoid(-z). (kernels/schemes/fox has the same sums for one
// contiguous span from z; tests cross-check the two.)
#include "core/model/runner.hpp"

namespace lcr {

// z [B, L, H] -> c [B, L, H] (overwritten).
template <class T>
void fox_gates_forward(const View3<const T>& z, AttentionRunner<T>& runner, const View3<T>& c,
                       double scale = 1.0);

// dc [B, L, H] (dL/dc, from the query and key lanes summed) -> dz [B, L, H] (overwritten).
template <class T>
void fox_gates_backward(const View3<const T>& z, AttentionRunner<T>& runner,
                        const View3<const T>& dc, const View3<T>& dz, double scale = 1.0);

}  // namespace lcr
