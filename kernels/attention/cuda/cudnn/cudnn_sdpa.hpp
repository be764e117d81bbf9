#pragma once
// cuDNN's fused flash attention as a vendor specialisation of lcr's CUDA SDPA (sdpa.hpp):
// sdpa_forward / sdpa_backward call these when SdpaArgs::impl is Cudnn or Auto. cuDNN serves
// the plain causal product (no ALiBi, bias lanes or softcap; scale > 0) when every query
// sees the same causal pattern cuDNN's graph expresses:
//   self-attention  q_pos0 == k_pos0, Lq == Lk      (causal mask, top-left diagonal)
//   a past block    k_pos0 + Lk - 1 <= q_pos0       (every key visible, no mask)
// with bf16 output only in the forward, and in the backward only with the forward's bf16 o
// (cuDNN forms delta = <dO, O> itself) and no bias gradients. What cuDNN computes differs
// from lcr's kernels in one rounding: dQ, dK and dV leave cuDNN in bf16, and are widened
// (and added, with accumulate) into lcr's fp32 gradients here.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/attention/cuda/sdpa.hpp"

namespace lcr::cuda::cudnn {

// Null when cuDNN can serve the call's shape and options; else why not (for errors with
// SdpaImpl::Cudnn). Does not load cuDNN.
const char* unsupported_forward(const SdpaArgs& a, const __nv_bfloat16* o, const float* o_f32,
                                const float* lse);
const char* unsupported_backward(const SdpaArgs& a, const __nv_bfloat16* o, const float* dq,
                                 const float* dk, const float* dv, const float* dbias_q,
                                 const float* dbias_k, const float* dbias_q_sums);

// For calls the checks above accept: run the call on cuDNN and return true, or return false
// (nothing launched, *why says why) when cuDNN is not loadable or has no engine for the
// shape (remembered per shape).
bool forward(const SdpaArgs& a, __nv_bfloat16* o, float* lse, cudaStream_t s, std::string* why);
// dq16 / dk16 (16-byte aligned) or null: cuDNN's bf16 dQ / dK are left there as they are,
// without the widening into dq / dk (which are then not touched).
bool backward(const SdpaArgs& a, const float* lse, const __nv_bfloat16* o,
              const __nv_bfloat16* dout, float* dq, float* dk, float* dv, bool accumulate,
              cudaStream_t s, std::string* why, __nv_bfloat16* dq16 = nullptr,
              __nv_bfloat16* dk16 = nullptr);

// Whether libcudnn.so.9 loads (and why not), for logs and test skips.
bool available(std::string* why);

namespace detail {
// dst[e] (+)= float(src[e]) for n elements.
void add_bf16_to_f32(int64_t n, const __nv_bfloat16* src, float* dst, bool accumulate,
                     cudaStream_t s);
}  // namespace detail

}  // namespace lcr::cuda::cudnn
