#pragma once
// RoPE lanes: see DESIGN.md section 3 and kernels/schemes/lanes.hpp for the contract.
// q' = a R(p_i) q, k' = a R(p_j) k with R(p) rotating each pair of the first r =
// rotary_dim dims by p theta'_m (m = 0..r/2-1) and passing the other dims through (times a
// in YaRN's paper convention, times 1 in its released one); a = 0.1 ln s + 1 is YaRN's
// attention temperature (1 without YaRN). No parameters.
#include <vector>

#include "kernels/schemes/lanes.hpp"

namespace lcr::rope {

void validate(const AttentionSpec& spec);  // throws Error naming the bad option
void add_params(const AttentionSpec& spec, ParamLayout& layout);
int lanes_width(const AttentionSpec& spec);    // width of q', k'
double sdpa_scale(const AttentionSpec& spec);  // scale the SDPA kernel applies

// r: the number of rotated dims (rotary_dim, or head_dim when rotary_dim is 0).
int rotary_dim(const AttentionSpec& spec);
// theta'_m for m = 0..r/2-1: base^(-2m/r), with YaRN's NTK-by-parts scaling when
// yarn_factor > 1. Angles are pos * theta'_m.
std::vector<double> frequencies(const AttentionSpec& spec);
// YaRN's sqrt(1/t) = 0.1 ln s + 1 (1 without YaRN); multiplies q' and k' both.
double attention_factor(const AttentionSpec& spec);
// The factor on partial RoPE's pass-through dims: attention_factor in the paper's YaRN
// convention, 1 in the released one.
double pass_through_factor(const AttentionSpec& spec);

template <class T>
void lanes_forward(const LaneArgs<T>& a, const View4<T>& q2, const View4<T>& k2);

// dq, dk overwritten; parameter gradients ADDED into dparams.
template <class T>
void lanes_backward(const LaneArgs<T>& a, const View4<const T>& dq2, const View4<const T>& dk2,
                    const View4<T>& dq, const View4<T>& dk, ParamSet<T>& dparams);

}  // namespace lcr::rope
