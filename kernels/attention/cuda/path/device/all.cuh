#pragma once
// Every PaTH kernel (for the two files that launch them: path.cu and emu/path_emu.cpp).
#include "kernels/attention/cuda/device/wgmma.cuh"
#include "kernels/attention/cuda/path/device/bwd_block.cuh"
#include "kernels/attention/cuda/path/device/bwd_carry.cuh"
#include "kernels/attention/cuda/path/device/bwd_chain.cuh"
#include "kernels/attention/cuda/path/device/bwd_dkv.cuh"
#include "kernels/attention/cuda/path/device/bwd_dq.cuh"
#include "kernels/attention/cuda/path/device/fold.cuh"
#include "kernels/attention/cuda/path/device/forward.cuh"
#include "kernels/attention/cuda/path/device/prep.cuh"
#include "kernels/attention/cuda/path/device/wgmma_probe.cuh"
