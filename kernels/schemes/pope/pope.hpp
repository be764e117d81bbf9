#pragma once
// POPE lanes: see DESIGN.md section 3 and kernels/schemes/lanes.hpp for the contract.
#include "kernels/schemes/lanes.hpp"

namespace lcr::pope {

void validate(const AttentionSpec& spec);  // throws Error naming the bad option
void add_params(const AttentionSpec& spec, ParamLayout& layout);
int lanes_width(const AttentionSpec& spec);    // width of q', k'
double sdpa_scale(const AttentionSpec& spec);  // scale the SDPA kernel applies

template <class T>
void lanes_forward(const LaneArgs<T>& a, const View4<T>& q2, const View4<T>& k2);

// dq, dk overwritten; parameter gradients ADDED into dparams.
template <class T>
void lanes_backward(const LaneArgs<T>& a, const View4<const T>& dq2, const View4<const T>& dk2,
                    const View4<T>& dq, const View4<T>& dk, ParamSet<T>& dparams);

}  // namespace lcr::pope
