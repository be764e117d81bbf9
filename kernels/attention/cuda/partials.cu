// Kernels for attention computed in parts (partials.hpp). All memory-bound: one warp per attention
// row (b, i, h) for the row-wise ones, so the row's lse is read once and written by lane 0
// after the warp has used it; grid-stride loops elsewhere.
#include <algorithm>
#include <cmath>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/partials.hpp"

namespace lcr::cuda::partials {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

int blocks_for(int64_t work, int per_block) {
  const int64_t b = (work + per_block - 1) / per_block;
  return int(std::min<int64_t>(std::max<int64_t>(b, 1), int64_t(1) << 20));
}

template <class U>
__global__ void copy_rows_kernel(const U* __restrict__ src, int64_t src_L, int64_t src_r0,
                                 U* __restrict__ dst, int64_t dst_L, int64_t dst_r0, int64_t n,
                                 int64_t inner, int64_t total) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = t % inner, r = (t / inner) % n, o = t / (inner * n);
    dst[(o * dst_L + dst_r0 + r) * inner + e] = src[(o * src_L + src_r0 + r) * inner + e];
  }
}

template <class U>
void launch_copy(const void* src, int64_t src_L, int64_t src_r0, void* dst, int64_t dst_L,
                 int64_t dst_r0, int64_t outer, int64_t n, int64_t inner_bytes, cudaStream_t s) {
  const int64_t inner = inner_bytes / int64_t(sizeof(U)), total = outer * n * inner;
  copy_rows_kernel<U><<<blocks_for(total, kThreads), kThreads, 0, s>>>(
      static_cast<const U*>(src), src_L, src_r0, static_cast<U*>(dst), dst_L, dst_r0, n, inner,
      total);
  LCR_CUDA_CHECK_LAUNCH();
}

// The running max m of two log-sum-exps and their weights exp(l - m); (0, 0) when both
// are -inf (the row has seen no key yet).
__device__ inline void lse_weights(float l1, float l2, float& w1, float& w2, float& lse) {
  const float m = fmaxf(l1, l2);
  if (m == -INFINITY) {
    w1 = w2 = 0.f;
    lse = -INFINITY;
    return;
  }
  w1 = expf(l1 - m);  // exp(-inf) = 0 for an empty side
  w2 = expf(l2 - m);
  lse = m + logf(w1 + w2);
}

// One warp per row (b, i, h); rows enumerated b-major, then i, then h (o's order).
__global__ void merge_kernel(float* __restrict__ o_acc, float* __restrict__ lse_acc,
                             const float* __restrict__ o_blk, const float* __restrict__ lse_blk,
                             int64_t rows, int64_t L, int H, int Dv) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
  if (row >= rows) return;
  const int h = int(row % H);
  const int64_t i = (row / H) % L, b = row / (H * L);
  const int64_t li = (b * H + h) * L + i;
  float w1, w2, lse;
  lse_weights(lse_acc[li], lse_blk[li], w1, w2, lse);
  const float inv = w1 + w2 > 0.f ? 1.f / (w1 + w2) : 0.f;
  float4* oa = reinterpret_cast<float4*>(o_acc + row * Dv);
  const float4* ob = reinterpret_cast<const float4*>(o_blk + row * Dv);
  for (int c = lane; c < Dv / 4; c += 32) {
    const float4 x = oa[c], y = ob[c];
    oa[c] = make_float4((w1 * x.x + w2 * y.x) * inv, (w1 * x.y + w2 * y.y) * inv,
                        (w1 * x.z + w2 * y.z) * inv, (w1 * x.w + w2 * y.w) * inv);
  }
  if (lane == 0) lse_acc[li] = lse;
}

__global__ void finish_kernel(const float* __restrict__ o_acc, const float* __restrict__ lse_acc,
                              const float* __restrict__ sink, int64_t rows_total, int64_t rows,
                              int H, int Dv, __nv_bfloat16* __restrict__ o_dst,
                              float* __restrict__ lse_dst, int64_t Lr, int64_t r0) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
  if (row >= rows_total) return;
  const int h = int(row % H);
  const int64_t i = (row / H) % rows, b = row / (H * rows);
  const float old = lse_acc[(b * H + h) * rows + i];
  float f = 1.f, lse = old;
  if (sink) {
    float w_old, w_sink;
    lse_weights(old, sink[h], w_old, w_sink, lse);
    f = old == -INFINITY ? 0.f : expf(old - lse);
  }
  const float* src = o_acc + row * Dv;
  __nv_bfloat16* dst = o_dst + ((b * Lr + r0 + i) * H + h) * Dv;
  for (int c = lane; c < Dv / 2; c += 32) {
    const float2 x = reinterpret_cast<const float2*>(src)[c];
    reinterpret_cast<__nv_bfloat162*>(dst)[c] = __floats2bfloat162_rn(x.x * f, x.y * f);
  }
  if (lane == 0) lse_dst[(b * H + h) * Lr + r0 + i] = lse;
}

__global__ void add_kernel(float* __restrict__ dst, const float* __restrict__ src, int64_t n) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x)
    dst[t] += src[t];
}

__global__ void to_f32_kernel(float* __restrict__ dst, const __nv_bfloat16* __restrict__ src,
                              int64_t n) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x)
    dst[t] = __bfloat162float(src[t]);
}

// One block per head: a block-wide sum over (b, i).
__global__ void sink_backward_kernel(const float* __restrict__ sink, const float* __restrict__ lse,
                                     const float* __restrict__ delta, int B, int H, int64_t L,
                                     float* __restrict__ dsink, bool accumulate) {
  const int h = blockIdx.x;
  float g = 0.f;
  for (int b = 0; b < B; ++b) {
    const int64_t base = (int64_t(b) * H + h) * L;
    for (int64_t i = threadIdx.x; i < L; i += blockDim.x)
      g -= expf(sink[h] - lse[base + i]) * delta[base + i];
  }
  __shared__ float part[kWarps];
  for (int off = 16; off > 0; off >>= 1) g += __shfl_down_sync(0xffffffffu, g, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = g;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < kWarps; ++w) t += part[w];
    dsink[h] = accumulate ? dsink[h] + t : t;
  }
}

__global__ void query_bias_total_kernel(const float* __restrict__ delta,
                                        const float* __restrict__ lse_keys,
                                        const float* __restrict__ lse, int H, int64_t L,
                                        int64_t total, float* __restrict__ dq) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {  // t = (b, i, h), the output's order
    const int64_t h = t % H, i = (t / H) % L, b = t / (H * L);
    const int64_t r = (b * H + h) * L + i;
    const float keys = lse_keys[r], fin = lse[r];
    // Both -inf (a row that sees nothing): no gradient.
    dq[t] = keys == fin ? 0.f : delta[r] * (1.f - expf(keys - fin));
  }
}

}  // namespace

void copy_rows(const void* src, int64_t src_L, int64_t src_r0, void* dst, int64_t dst_L,
               int64_t dst_r0, int64_t outer, int64_t n, int64_t inner_bytes, cudaStream_t s) {
  if (outer == 0 || n == 0 || inner_bytes == 0) return;
  const auto aligned = [&](int64_t a) {
    return inner_bytes % a == 0 && reinterpret_cast<uintptr_t>(src) % a == 0 &&
           reinterpret_cast<uintptr_t>(dst) % a == 0;
  };
  if (aligned(16))
    launch_copy<uint4>(src, src_L, src_r0, dst, dst_L, dst_r0, outer, n, inner_bytes, s);
  else if (aligned(4))
    launch_copy<uint32_t>(src, src_L, src_r0, dst, dst_L, dst_r0, outer, n, inner_bytes, s);
  else if (aligned(2))
    launch_copy<uint16_t>(src, src_L, src_r0, dst, dst_L, dst_r0, outer, n, inner_bytes, s);
  else
    launch_copy<uint8_t>(src, src_L, src_r0, dst, dst_L, dst_r0, outer, n, inner_bytes, s);
}

void merge_partial(float* o_acc, float* lse_acc, const float* o_blk, const float* lse_blk, int B,
                   int64_t L, int H, int Dv, cudaStream_t s) {
  const int64_t rows = int64_t(B) * L * H;
  if (rows == 0) return;
  merge_kernel<<<blocks_for(rows, kWarps), kThreads, 0, s>>>(o_acc, lse_acc, o_blk, lse_blk, rows,
                                                             L, H, Dv);
  LCR_CUDA_CHECK_LAUNCH();
}

void finish_forward(const float* o_acc, const float* lse_acc, const float* sink, int B,
                    int64_t rows, int H, int Dv, __nv_bfloat16* o_dst, float* lse_dst, int64_t Lr,
                    int64_t r0, cudaStream_t s) {
  const int64_t total = int64_t(B) * rows * H;
  if (total == 0) return;
  finish_kernel<<<blocks_for(total, kWarps), kThreads, 0, s>>>(o_acc, lse_acc, sink, total, rows, H,
                                                               Dv, o_dst, lse_dst, Lr, r0);
  LCR_CUDA_CHECK_LAUNCH();
}

void add_inplace(float* dst, const float* src, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n, kThreads * 4), kThreads, 0, s>>>(dst, src, n);
  LCR_CUDA_CHECK_LAUNCH();
}

void to_f32(float* dst, const __nv_bfloat16* src, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  to_f32_kernel<<<blocks_for(n, kThreads * 4), kThreads, 0, s>>>(dst, src, n);
  LCR_CUDA_CHECK_LAUNCH();
}

void sink_backward(const float* sink, const float* lse, const float* delta, int B, int H, int64_t L,
                   float* dsink, bool accumulate, cudaStream_t s) {
  if (H == 0) return;
  sink_backward_kernel<<<H, kThreads, 0, s>>>(sink, lse, delta, B, H, L, dsink, accumulate);
  LCR_CUDA_CHECK_LAUNCH();
}

void query_bias_total(const float* delta, const float* lse_keys, const float* lse, int B, int H,
                      int64_t L, float* dq, cudaStream_t s) {
  const int64_t total = int64_t(B) * H * L;
  if (total == 0) return;
  query_bias_total_kernel<<<blocks_for(total, kThreads), kThreads, 0, s>>>(delta, lse_keys, lse, H,
                                                                           L, total, dq);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::partials
