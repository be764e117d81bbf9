// The widening pass after cuDNN's backward (cudnn_sdpa.hpp): cuDNN leaves dQ, dK and dV in
// bf16, lcr's gradients are fp32 in the same [B, L, H, D] order. Memory-bound (6 or 10 bytes
// per element); each thread handles 4 consecutive elements.
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/cudnn/cudnn_sdpa.hpp"

namespace lcr::cuda::cudnn::detail {
namespace {

constexpr int kThreads = 256;

__global__ void bf16_to_f32_kernel(int64_t quads, const __nv_bfloat16* src, float* dst,
                                   bool accumulate) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < quads;
       t += int64_t(gridDim.x) * blockDim.x) {
    const uint2 raw = *reinterpret_cast<const uint2*>(src + 4 * t);
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    float4* y = reinterpret_cast<float4*>(dst + 4 * t);
    float4 v = make_float4(lo.x, lo.y, hi.x, hi.y);
    if (accumulate) {
      const float4 o = *y;
      v = make_float4(o.x + v.x, o.y + v.y, o.z + v.z, o.w + v.w);
    }
    *y = v;
  }
}

unsigned blocks_for(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return unsigned(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

}  // namespace

void add_bf16_to_f32(int64_t n, const __nv_bfloat16* src, float* dst, bool accumulate,
                     cudaStream_t s) {
  if (n == 0) return;
  bf16_to_f32_kernel<<<blocks_for(n / 4), kThreads, 0, s>>>(n / 4, src, dst, accumulate);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::cudnn::detail
