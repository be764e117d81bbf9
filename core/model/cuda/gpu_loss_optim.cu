// The model's loss and optimizer kernels (gpu_layers.hpp): cross-entropy (one block per
// row, an online (max, sum of exp) pass per thread combined in a fixed tree; the backward
// may run in place), the bf16/fp32 conversions and vector ops, the NaN/Inf count, and
// AdamW with its deterministic gradient norm: the twins of core/model/loss.cpp and the
// update of optimizer.cpp. Every index into a tensor is int64 (R V exceeds 2^31 for a
// 64K-token LM head).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/model/cuda/gpu_layers.hpp"
#include "core/model/cuda/kernel_util.cuh"
#include "kernels/attention/cuda/cuda_check.hpp"

namespace lcr::cuda::model {
namespace {

using namespace detail;

constexpr int kCeThreads = 512;  // cross-entropy: threads per row

// ---- cross-entropy ----

// Running (max, sum of exp(x - max)) of a set of logits. Empty: (-inf, 0).
// Rescaling is relative to a "safe" max (0 while the max is -inf), so -inf logits add 0
// (no -inf - -inf = NaN), while a NaN logit always reaches the sum (fmaxf drops NaN from
// the max, exp(NaN) = NaN lands in s): a NaN logit gives a NaN lse, as on the CPU.
struct MaxSum {
  float m, s;
};
__device__ __forceinline__ float safe_max(float m) { return m == -INFINITY ? 0.f : m; }
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m), ms = safe_max(m);
  return {m, a.s * expf(a.m - ms) + b.s * expf(b.m - ms)};
}
// a with four more logits.
__device__ __forceinline__ MaxSum absorb4(MaxSum a, float x0, float x1, float x2, float x3) {
  const float m = fmaxf(a.m, fmaxf(fmaxf(x0, x1), fmaxf(x2, x3))), ms = safe_max(m);
  return {m, a.s * expf(a.m - ms) +
                 ((expf(x0 - ms) + expf(x1 - ms)) + (expf(x2 - ms) + expf(x3 - ms)))};
}
__device__ __forceinline__ MaxSum absorb1(MaxSum a, float x) {
  const float m = fmaxf(a.m, x), ms = safe_max(m);
  return {m, a.s * expf(a.m - ms) + expf(x - ms)};
}

// Fixed-order reduction of MaxSum over a warp; the result is valid in lane 0.
__device__ __forceinline__ MaxSum warp_combine(MaxSum v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum other;
    other.m = __shfl_down_sync(kFullMask, v.m, o);
    other.s = __shfl_down_sync(kFullMask, v.s, o);
    v = combine(v, other);
  }
  return v;
}

// Fixed-order block reduction of MaxSum (blockDim.x a multiple of 32, at most 1024); the
// result is valid in thread 0.
__device__ MaxSum block_combine(MaxSum v) {
  __shared__ MaxSum warp_part[32];
  v = warp_combine(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_combine(lane < nwarps ? warp_part[lane] : MaxSum{-INFINITY, 0.f});
  }
  __syncthreads();  // warp_part is reused by the next row
  return v;
}

__global__ void cross_entropy_forward_kernel(int64_t R, int64_t V, int64_t ld,
                                             const float* __restrict__ logits,
                                             const int32_t* __restrict__ labels,
                                             float* __restrict__ lse,
                                             float* __restrict__ row_loss) {
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const float* row = logits + r * ld;
    const int64_t bs = blockDim.x;
    MaxSum acc{-INFINITY, 0.f};
    int64_t v = threadIdx.x;
    for (; v + 3 * bs < V; v += 4 * bs)  // four independent loads in flight per thread
      acc = absorb4(acc, row[v], row[v + bs], row[v + 2 * bs], row[v + 3 * bs]);
    for (; v < V; v += bs) acc = absorb1(acc, row[v]);
    acc = block_combine(acc);
    if (threadIdx.x == 0) {
      const float l = acc.m + logf(acc.s);
      lse[r] = l;
      const int32_t y = labels[r];
      row_loss[r] = y >= 0 ? l - row[y] : 0.f;
    }
  }
}

// In place allowed: each element is read, then written, by the same thread (no __restrict__;
// every load of a step is issued before its stores). When the logits and dlogits rows share
// their alignment (always in place), the row is cut at 16-byte boundaries: a scalar head,
// float4 loads and stores (two per thread per step), a scalar tail.
__device__ __forceinline__ float ce_grad(float x, float l, float scale, int64_t v, int32_t y) {
  return scale * (expf(x - l) - (v == y ? 1.f : 0.f));
}
__device__ __forceinline__ float4 ce_grad4(float4 x, float l, float scale, int64_t v, int32_t y) {
  return make_float4(ce_grad(x.x, l, scale, v, y), ce_grad(x.y, l, scale, v + 1, y),
                     ce_grad(x.z, l, scale, v + 2, y), ce_grad(x.w, l, scale, v + 3, y));
}
__global__ void cross_entropy_backward_kernel(int64_t R, int64_t V, int64_t ld, const float* logits,
                                              const int32_t* __restrict__ labels,
                                              const float* __restrict__ lse, float scale,
                                              float* dlogits) {
  const int64_t bs = blockDim.x;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const int32_t y = labels[r];
    const float* row = logits + r * ld;
    float* out = dlogits + r * ld;
    for (int64_t v = V + threadIdx.x; v < ld; v += bs) out[v] = 0.f;  // the padding columns
    if (y < 0) {
      for (int64_t v = threadIdx.x; v < V; v += bs) out[v] = 0.f;
      continue;
    }
    const float l = lse[r];
    const uintptr_t mis = reinterpret_cast<uintptr_t>(row) & 15u;
    int64_t done = 0;  // elements [0, done) are handled by the vector path
    if (mis == (reinterpret_cast<uintptr_t>(out) & 15u)) {
      const int64_t h = int64_t((16u - mis) & 15u) / 4, head = h < V ? h : V;
      const int64_t n4 = (V - head) / 4;
      if (threadIdx.x < head)
        out[threadIdx.x] = ce_grad(row[threadIdx.x], l, scale, threadIdx.x, y);
      const float4* r4 = reinterpret_cast<const float4*>(row + head);
      float4* o4 = reinterpret_cast<float4*>(out + head);
      int64_t j = threadIdx.x;
      for (; j + bs < n4; j += 2 * bs) {
        const float4 a = r4[j], b = r4[j + bs];
        o4[j] = ce_grad4(a, l, scale, head + 4 * j, y);
        o4[j + bs] = ce_grad4(b, l, scale, head + 4 * (j + bs), y);
      }
      if (j < n4) o4[j] = ce_grad4(r4[j], l, scale, head + 4 * j, y);
      done = head + 4 * n4;
    }
    for (int64_t v = done + threadIdx.x; v < V; v += bs) out[v] = ce_grad(row[v], l, scale, v, y);
  }
}

// ---- conversions, vector ops ----

__global__ void to_bf16_kernel(int64_t n, const float* __restrict__ x,
                               __nv_bfloat16* __restrict__ y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16(x[i]);  // round to nearest even
}

__global__ void to_f32_kernel(int64_t n, const __nv_bfloat16* __restrict__ x,
                              float* __restrict__ y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __bfloat162float(x[i]);
}

// y += a x, as layers.cpp writes it (a product, then a sum: no fused multiply-add).
__global__ void add_rows_kernel(int64_t rows, int64_t cols, const float* __restrict__ x,
                                int64_t ldx, float* __restrict__ y, int64_t ldy) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    y[r * ldy + c] += x[r * ldx + c];
  }
}

__global__ void axpy_kernel(int64_t n, float a, const float* __restrict__ x,
                            float* __restrict__ y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

__global__ void scale_kernel(int64_t n, float a, float* __restrict__ x) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = __fmul_rn(a, x[i]);
}

__global__ void count_nonfinite_kernel(int64_t n, const float* __restrict__ x,
                                       unsigned long long* __restrict__ count) {
  __shared__ unsigned long long warp_count[kThreads / 32];
  unsigned long long c = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    c += isfinite(x[i]) ? 0ull : 1ull;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(kFullMask, c, o);
  if ((threadIdx.x & 31) == 0) warp_count[threadIdx.x >> 5] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long total = 0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) total += warp_count[w];
    if (total) atomicAdd(count, total);  // integer: exact in any order
  }
}

// ---- AdamW ----

// One block per chunk: each thread sums its strided values in double, then a fixed tree
// (shuffle-down within warps, warps in order): deterministic.
// VEC4: g is 16-byte aligned, so is every chunk (kNormChunk is a multiple of 4).
template <bool VEC4>
__global__ void sumsq_chunks_kernel(int64_t n, int64_t nchunks, const float* __restrict__ g,
                                    double* __restrict__ part) {
  __shared__ double warp_part[kThreads / 32];
  for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const int64_t b = c * kNormChunk, e = b + kNormChunk < n ? b + kNormChunk : n;
    double acc = 0.0;
    int64_t tail = b;
    if constexpr (VEC4) {
      const int64_t nv = (e - b) / 4;
      const float4* g4 = reinterpret_cast<const float4*>(g + b);
#pragma unroll 4
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
        const float4 t = g4[j];
        acc += double(t.x) * t.x + double(t.y) * t.y + double(t.z) * t.z + double(t.w) * t.w;
      }
      tail = b + 4 * nv;
    }
#pragma unroll 4
    for (int64_t i = tail + threadIdx.x; i < e; i += blockDim.x) {
      const double v = double(g[i]);
      acc += v * v;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(kFullMask, acc, o);
    if ((threadIdx.x & 31) == 0) warp_part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0.0;
      for (int w = 0; w < int(blockDim.x >> 5); ++w) total += warp_part[w];
      part[c] = total;
    }
    __syncthreads();  // warp_part is reused by the next chunk
  }
}

// optimizer.cpp's update of one element, operation for operation in fp32 (explicitly
// rounded intrinsics: no fused multiply-adds, so each step rounds as the CPU's float build
// does). p, m, v in/out.
__device__ __forceinline__ void adamw_one(float& p, float g, float& m, float& v, bool decay,
                                          const AdamWStep& a) {
  const float gi = __fmul_rn(g, a.scale);
  const float mi = __fadd_rn(__fmul_rn(a.beta1, m), __fmul_rn(__fsub_rn(1.f, a.beta1), gi));
  const float vi =
      __fadd_rn(__fmul_rn(a.beta2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.f, a.beta2), gi), gi));
  m = mi;
  v = vi;
  const float pi = decay ? __fmul_rn(p, a.wd_factor) : p;
  const float num = __fmul_rn(a.lr, __fdiv_rn(mi, a.bc1));
  const float den = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, a.bc2)), a.eps);
  p = __fsub_rn(pi, __fdiv_rn(num, den));
}

// VEC4: p, g, m, v 16-byte and decay 4-byte aligned: groups of four through vector loads,
// then the last n % 4 elements one by one.
template <bool VEC4>
__global__ void adamw_update_kernel(int64_t n, float* __restrict__ p, const float* __restrict__ g,
                                    float* __restrict__ m, float* __restrict__ v,
                                    const uint8_t* __restrict__ decay, AdamWStep a) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t tail = 0;
  if constexpr (VEC4) {
    const int64_t n4 = n / 4;
    for (int64_t j = first; j < n4; j += stride) {
      float4 P = reinterpret_cast<float4*>(p)[j], M = reinterpret_cast<float4*>(m)[j],
             W = reinterpret_cast<float4*>(v)[j];
      const float4 G = reinterpret_cast<const float4*>(g)[j];
      const uchar4 d = reinterpret_cast<const uchar4*>(decay)[j];
      adamw_one(P.x, G.x, M.x, W.x, d.x, a);
      adamw_one(P.y, G.y, M.y, W.y, d.y, a);
      adamw_one(P.z, G.z, M.z, W.z, d.z, a);
      adamw_one(P.w, G.w, M.w, W.w, d.w, a);
      reinterpret_cast<float4*>(p)[j] = P;
      reinterpret_cast<float4*>(m)[j] = M;
      reinterpret_cast<float4*>(v)[j] = W;
    }
    tail = 4 * n4;
  }
  for (int64_t i = tail + first; i < n; i += stride) {
    float P = p[i], M = m[i], W = v[i];
    adamw_one(P, g[i], M, W, decay[i], a);
    p[i] = P;
    m[i] = M;
    v[i] = W;
  }
}

__global__ void clamp_kernel(int64_t n, float* __restrict__ p, float lo, float hi) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float x = p[i];
    p[i] = x < lo ? lo : (x > hi ? hi : x);
  }
}

}  // namespace

void cross_entropy_forward(int64_t R, int64_t V, int64_t ld, const float* logits,
                           const int32_t* labels, float* lse, float* row_loss, cudaStream_t s) {
  if (R <= 0 || V <= 0) return;
  require(ld >= V, "cross_entropy_forward: row stride ", ld, " < vocabulary ", V);
  const int threads = int(std::min<int64_t>(kCeThreads, (V + 31) / 32 * 32));
  cross_entropy_forward_kernel<<<blocks_for(R, 1), threads, 0, s>>>(R, V, ld, logits, labels, lse,
                                                                    row_loss);
  LCR_CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(int64_t R, int64_t V, int64_t ld, const float* logits,
                            const int32_t* labels, const float* lse, float scale, float* dlogits,
                            cudaStream_t s) {
  if (R <= 0 || V <= 0) return;
  require(ld >= V, "cross_entropy_backward: row stride ", ld, " < vocabulary ", V);
  const int threads = int(std::min<int64_t>(kCeThreads, (V + 31) / 32 * 32));
  cross_entropy_backward_kernel<<<blocks_for(R, 1), threads, 0, s>>>(R, V, ld, logits, labels, lse,
                                                                     scale, dlogits);
  LCR_CUDA_CHECK_LAUNCH();
}

void to_bf16(int64_t n, const float* x, __nv_bfloat16* y, cudaStream_t s) {
  if (n <= 0) return;
  to_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, x, y);
  LCR_CUDA_CHECK_LAUNCH();
}

void to_f32(int64_t n, const __nv_bfloat16* x, float* y, cudaStream_t s) {
  if (n <= 0) return;
  to_f32_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, x, y);
  LCR_CUDA_CHECK_LAUNCH();
}

void add_rows(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
              cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  add_rows_kernel<<<blocks_for(rows * cols, kThreads), kThreads, 0, s>>>(rows, cols, x, ldx, y,
                                                                         ldy);
  LCR_CUDA_CHECK_LAUNCH();
}

void axpy(int64_t n, float a, const float* x, float* y, cudaStream_t s) {
  if (n <= 0) return;
  axpy_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, a, x, y);
  LCR_CUDA_CHECK_LAUNCH();
}

void scale(int64_t n, float a, float* x, cudaStream_t s) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, a, x);
  LCR_CUDA_CHECK_LAUNCH();
}

int64_t count_nonfinite(int64_t n, const float* x, cudaStream_t s) {
  if (n <= 0) return 0;
  unsigned long long* d_count = nullptr;
  LCR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&d_count), sizeof(*d_count), s));
  unsigned long long h_count = 0;
  try {
    LCR_CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof(*d_count), s));
    count_nonfinite_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, x, d_count);
    LCR_CUDA_CHECK_LAUNCH();
    LCR_CUDA_CHECK(cudaMemcpyAsync(&h_count, d_count, sizeof(h_count), cudaMemcpyDeviceToHost, s));
    LCR_CUDA_CHECK(cudaStreamSynchronize(s));
  } catch (...) {
    cudaFreeAsync(d_count, s);  // best effort; the first error is the one reported
    throw;
  }
  LCR_CUDA_CHECK(cudaFreeAsync(d_count, s));
  return int64_t(h_count);
}

void sumsq_chunks(int64_t n, const float* g, double* part, cudaStream_t s) {
  if (n <= 0) return;
  const int64_t nchunks = norm_chunks(n);
  if (aligned16(g)) {
    sumsq_chunks_kernel<true><<<blocks_for(nchunks, 1), kThreads, 0, s>>>(n, nchunks, g, part);
  } else {
    sumsq_chunks_kernel<false><<<blocks_for(nchunks, 1), kThreads, 0, s>>>(n, nchunks, g, part);
  }
  LCR_CUDA_CHECK_LAUNCH();
}

void adamw_update(int64_t n, float* p, const float* g, float* m, float* v, const uint8_t* decay,
                  const AdamWStep& a, cudaStream_t s) {
  if (n <= 0) return;
  const bool vec4 = aligned16(p) && aligned16(g) && aligned16(m) && aligned16(v) &&
                    (reinterpret_cast<uintptr_t>(decay) & 3u) == 0;
  if (vec4) {
    adamw_update_kernel<true>
        <<<blocks_for(n / 4 + 1, kThreads), kThreads, 0, s>>>(n, p, g, m, v, decay, a);
  } else {
    adamw_update_kernel<false>
        <<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, p, g, m, v, decay, a);
  }
  LCR_CUDA_CHECK_LAUNCH();
}

void clamp_values(int64_t n, float* p, float lo, float hi, cudaStream_t s) {
  if (n <= 0) return;
  clamp_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, p, lo, hi);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::model
