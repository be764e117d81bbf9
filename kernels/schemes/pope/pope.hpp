#pragma once
// PoPE lanes: see DESIGN.md section 3 and kernels/schemes/lanes.hpp for the contract.
// From q, k of width d: q' = [mu_q cos(p_i theta), mu_q sin(p_i theta)] and
// k' = [mu_k cos(p_j theta + delta), mu_k sin(p_j theta + delta)] of width 2d, with
// mu = softplus(.), theta_c = base^(-c/d) (c = 0..d-1), delta = clamp(pope.delta[hk, :],
// -2 pi, 0). Parameter: pope.delta [Hkv, d].
#include <vector>

#include "kernels/schemes/lanes.hpp"

namespace lcr::pope {

// The range the learned phase bias is clamped to (the clamp is on delta, not theta).
constexpr double kDeltaMin = -6.283185307179586;
constexpr double kDeltaMax = 0.0;

void validate(const AttentionSpec& spec);  // throws Error naming the bad option
void add_params(const AttentionSpec& spec, ParamLayout& layout);
int lanes_width(const AttentionSpec& spec);    // width of q', k' (2d)
double sdpa_scale(const AttentionSpec& spec);  // 1/sqrt(d), not 1/sqrt(2d)

// theta_c = base^(-c/d) for c = 0..d-1 (0-based; the paper's c-1 with c = 1..d).
std::vector<double> frequencies(const AttentionSpec& spec);

template <class T>
void lanes_forward(const LaneArgs<T>& a, const View4<T>& q2, const View4<T>& k2);

// dq, dk overwritten; parameter gradients ADDED into dparams.
template <class T>
void lanes_backward(const LaneArgs<T>& a, const View4<const T>& dq2, const View4<const T>& dk2,
                    const View4<T>& dq, const View4<T>& dk, ParamSet<T>& dparams);

}  // namespace lcr::pope
