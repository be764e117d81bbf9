#pragma once
// The mma.sync kernels of the CUDA SDPA (sdpa_forward_kernel.cuh, sdpa_backward_kernel.cuh) on
// the SIMT emulator (device/emu.hpp): the very kernel source, compiled as host C++, run on the
// CPU with host pointers. They are the kernels of code without wgmma (A100, L40, compute_80
// PTX on an H100), so these functions take the FwdChoiceMma / BwdChoiceMma tables
// (sdpa_heuristics.hpp) and pick a call's path as launch_forward / launch_backward do. For
// the tests on machines without a GPU (tests/cuda/test_sdpa.cpp).
#include <cuda_bf16.h>

#include "kernels/attention/cuda/sdpa.hpp"

namespace lcr::cuda::detail {

// sdpa_forward's contract (o and/or o_f32, lse [B, H, Lq]) with host pointers; every width
// class and path.
void sdpa_forward_mma_emu(const SdpaArgs& a, __nv_bfloat16* o, float* o_f32, float* lse);

// sdpa_backward's contract with host pointers and delta given: dq, dbias_q and dbias_q_sums
// are zeroed first unless accumulate; every width class and path.
void sdpa_backward_mma_emu(const SdpaArgs& a, const float* lse, const float* delta,
                           const __nv_bfloat16* dout, float* dq, float* dk, float* dv,
                           bool accumulate, float* dbias_q = nullptr, float* dbias_k = nullptr,
                           float* dbias_q_sums = nullptr);

}  // namespace lcr::cuda::detail
