#pragma once
// The wgmma kernels of the CUDA SDPA (sdpa_forward_wgmma.cuh, sdpa_backward_wgmma.cuh) on the
// SIMT emulator
// (device/emu.hpp): the very kernel source, compiled as host C++, run on the CPU with host
// pointers. For the tests on machines without a GPU (tests/cuda/test_sdpa.cpp).
#include <cuda_bf16.h>

#include "kernels/attention/cuda/sdpa.hpp"

namespace lcr::cuda::detail {

// sdpa_forward's contract (o and/or o_f32, lse) with host pointers, on the wgmma kernel of
// `warpgroups` (1 or 2) warpgroups per CTA, the mode chosen as sdpa_forward chooses it.
// lcr::Error for a width class the wgmma kernels do not serve (QK 64 / V 64, QK 128 / V 128,
// QK 128 / V 64 and QK 256 / V 128 are served).
void sdpa_forward_wgmma_emu(const SdpaArgs& a, __nv_bfloat16* o, float* o_f32, float* lse,
                            int warpgroups);

// sdpa_backward's contract for the plain path and the kBias one (bias lanes and / or ALiBi, no
// softcap, dbias_k or null, no dbias_q; delta given) with host pointers, on the wgmma backward
// of `warpgroups` (1 or 2) warpgroups per CTA and `query_step` (64, or 128 for the 64-wide class
// with two warpgroups, K / V from shared memory) queries per step, K / V fragments in registers
// or not. dq is zeroed first unless accumulate.
void sdpa_backward_wgmma_emu(const SdpaArgs& a, const float* lse, const float* delta,
                             const __nv_bfloat16* dout, float* dq, float* dk, float* dv,
                             bool accumulate, int warpgroups, int query_step, bool kv_regs,
                             float* dbias_k = nullptr);

}  // namespace lcr::cuda::detail
