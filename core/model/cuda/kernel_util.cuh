#pragma once
// Helpers shared by the GPU model's kernel files (gpu_layers.cu, gpu_loss_optim.cu,
// gpu_path.cu): launch shapes, warp sums, vector loads, sigmoid. Internal: include only
// from the .cu files of core/model/cuda.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention/cuda/vec_io.cuh"

namespace lcr::cuda::model::detail {

constexpr int kThreads = 256;            // elementwise and column kernels
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride cap (>> one wave on any GPU)
constexpr unsigned kMaxGridY = 65535;    // hardware limit of gridDim.y
constexpr unsigned kFullMask = 0xffffffffu;

inline unsigned blocks_for(int64_t work, int64_t per_block) {
  return unsigned(
      std::max<int64_t>(1, std::min<int64_t>((work + per_block - 1) / per_block, kMaxBlocks)));
}
// Threads of a block whose threads each own one column of N: whole warps, at most kThreads.
inline int column_threads(int64_t N) {
  return int(std::min<int64_t>(kThreads, (N + 31) / 32 * 32));
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Butterfly sum over a warp: every lane gets the same bits (each pairwise add is a + b on
// one lane and b + a on its partner, and fp addition commutes).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Row loads and stores: kernels/attention/cuda/vec_io.cuh (shared with the attention API).
using dev::load_vec;
using dev::store_vec;

// kmath::sigmoid of layers.cpp: the branch keeps exp's argument <= 0.
__device__ __forceinline__ float sigmoidf(float z) {
  return z >= 0.f ? 1.f / (1.f + expf(-z)) : expf(z) / (1.f + expf(z));
}

}  // namespace lcr::cuda::model::detail
