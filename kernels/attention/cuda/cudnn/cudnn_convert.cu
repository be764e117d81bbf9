// The widening passes after cuDNN's backward (cudnn_sdpa.hpp): cuDNN leaves dQ in fp32 in
// [B, H, L, D] order and dK, dV in bf16; lcr's gradients are fp32 [B, L, H, D]. Both passes
// are memory-bound (a few bytes per element); each thread handles 4 consecutive elements.
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/cudnn/cudnn_sdpa.hpp"

namespace lcr::cuda::cudnn::detail {
namespace {

constexpr int kThreads = 256;

// One thread per 4 channels of one (b, i, h) row; D % 4 == 0 (D % 8 == 0 for the SDPA).
__global__ void bhsd_to_bshd_kernel(int64_t rows, int L, int H, int D, const float* src,
                                    float* dst, bool accumulate) {
  const int quads = D / 4;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < rows * quads;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = t / quads;  // (b, i, h) in dst order
    const int c = int(t % quads) * 4;
    const int h = int(row % H);
    const int64_t bi = row / H, i = bi % L, b = bi / L;
    const float4 x = *reinterpret_cast<const float4*>(src + ((b * H + h) * L + i) * D + c);
    float4* y = reinterpret_cast<float4*>(dst + row * D + c);
    if (accumulate) {
      const float4 o = *y;
      *y = make_float4(o.x + x.x, o.y + x.y, o.z + x.z, o.w + x.w);
    } else {
      *y = x;
    }
  }
}

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

void add_bhsd_to_bshd(int B, int L, int H, int D, const float* src, float* dst, bool accumulate,
                      cudaStream_t s) {
  const int64_t rows = int64_t(B) * L * H;
  if (rows == 0) return;
  bhsd_to_bshd_kernel<<<blocks_for(rows * (D / 4)), kThreads, 0, s>>>(rows, L, H, D, src, dst,
                                                                        accumulate);
  LCR_CUDA_CHECK_LAUNCH();
}

void add_bf16_to_f32(int64_t n, const __nv_bfloat16* src, float* dst, bool accumulate,
                     cudaStream_t s) {
  if (n == 0) return;
  bf16_to_f32_kernel<<<blocks_for(n / 4), kThreads, 0, s>>>(n / 4, src, dst, accumulate);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::cudnn::detail
