// The model's non-attention layers as CUDA kernels (gpu_layers.hpp): the twins of
// core/model/layers.cpp, loss.cpp and the AdamW update of optimizer.cpp.
//
// Layout of the work:
//  - row-wise layers (RMSNorm forward / backward-x): one block per row with the row held in
//    registers (float4, D % 4 == 0, D <= 8192), else one warp per row; shuffle sums in a
//    fixed order (every thread ends with the same bits);
//  - cross-entropy: one block per row, an online (max, sum of exp) pass per thread combined
//    in a fixed tree; the backward is one block per row and may run in place;
//  - column reductions (RMSNorm gain, bias): kernel 1 writes one partial per (row block of
//    kRowBlock rows, column), each summed by one thread over its rows in increasing order;
//    kernel 2 sums the partials in block order and adds the result: no atomics, the same
//    bits on every run;
//  - embedding backward: one thread per (distinct token, column) walks the token's rows in
//    row order (plan from the host, no atomics);
//  - elementwise: grid-stride loops with 64-bit indices.
// Every index into a tensor is int64 (R V exceeds 2^31 for a 64K-token LM head).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <vector>

#include "core/model/cuda/gpu_layers.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"

namespace lcr::cuda::model {
namespace {

constexpr int kThreads = 256;            // elementwise and column kernels
constexpr int kRowWarps = 8;             // rows per block of the warp-per-row kernels
constexpr int kCeThreads = 512;          // cross-entropy: threads per row
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride cap (>> one wave on any GPU)
constexpr unsigned kMaxGridY = 65535;    // hardware limit of gridDim.y
constexpr unsigned kFullMask = 0xffffffffu;

unsigned blocks_for(int64_t work, int64_t per_block) {
  return unsigned(std::min<int64_t>((work + per_block - 1) / per_block, kMaxBlocks));
}
// Threads of a block whose threads each own one column of N: whole warps, at most kThreads.
int column_threads(int64_t N) { return int(std::min<int64_t>(kThreads, (N + 31) / 32 * 32)); }

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Butterfly sum over a warp: every lane gets the same bits (each pairwise add is a + b on
// one lane and b + a on its partner, and fp addition commutes).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// VEC consecutive floats at p (p 16-byte aligned when VEC == 4).
template <int VEC>
__device__ __forceinline__ void load_vec(const float* p, float (&v)[VEC]) {
  if constexpr (VEC == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = p[k];
  }
}
template <int VEC>
__device__ __forceinline__ void store_vec(float* p, const float (&v)[VEC]) {
  if constexpr (VEC == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) p[k] = v[k];
  }
}

// kmath::sigmoid of layers.cpp: the branch keeps exp's argument <= 0.
__device__ __forceinline__ float sigmoidf(float z) {
  return z >= 0.f ? 1.f / (1.f + expf(-z)) : expf(z) / (1.f + expf(z));
}

// ---- RMSNorm ----

// Sum over the block (blockDim.x a multiple of 32); every thread returns the same bits:
// butterfly within warps, then each thread adds the warp sums in warp order. sh: 32 floats.
__device__ __forceinline__ float block_sum(float v, float* sh) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) t += sh[w];
  __syncthreads();  // sh is reused by the next row
  return t;
}

// Block per row with the row held in registers (one HBM read of x): NV float4 per thread,
// blockDim.x * 4 * NV >= D; D % 4 == 0 and 16-byte aligned rows (rmsnorm_block_shape).
template <int NV>
__global__ void rmsnorm_forward_block_kernel(int64_t R, int D, const float* __restrict__ x,
                                             const float* __restrict__ g, float eps,
                                             float* __restrict__ y, float* __restrict__ rstd) {
  __shared__ float sh[32];
  const int D4 = D / 4;
  const float4* g4 = reinterpret_cast<const float4*>(g);
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const float4* xr = reinterpret_cast<const float4*>(x + r * D);
    float4 xv[NV];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = k * blockDim.x + threadIdx.x;
      xv[k] = j < D4 ? xr[j] : make_float4(0.f, 0.f, 0.f, 0.f);
      ss += xv[k].x * xv[k].x + xv[k].y * xv[k].y + xv[k].z * xv[k].z + xv[k].w * xv[k].w;
    }
    ss = block_sum(ss, sh);
    const float s = 1.f / sqrtf(ss / float(D) + eps);
    if (threadIdx.x == 0) rstd[r] = s;
    float4* yr = reinterpret_cast<float4*>(y + r * D);
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = k * blockDim.x + threadIdx.x;
      if (j < D4) {
        const float4 gv = g4[j];
        yr[j] = make_float4(xv[k].x * s * gv.x, xv[k].y * s * gv.y, xv[k].z * s * gv.z,
                            xv[k].w * s * gv.w);
      }
    }
  }
}

// The backward-x twin: x and dy held in registers.
template <int NV>
__global__ void rmsnorm_backward_x_block_kernel(int64_t R, int D, const float* __restrict__ x,
                                                const float* __restrict__ g,
                                                const float* __restrict__ rstd,
                                                const float* __restrict__ dy,
                                                float* __restrict__ dx) {
  __shared__ float sh[32];
  const int D4 = D / 4;
  const float4* g4 = reinterpret_cast<const float4*>(g);
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const float s = rstd[r];
    const float4* xr = reinterpret_cast<const float4*>(x + r * D);
    const float4* dyr = reinterpret_cast<const float4*>(dy + r * D);
    float4 xv[NV], dv[NV];
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = k * blockDim.x + threadIdx.x;
      const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
      xv[k] = j < D4 ? xr[j] : z;
      dv[k] = j < D4 ? dyr[j] : z;
      const float4 gv = j < D4 ? g4[j] : z;
      dot += dv[k].x * gv.x * xv[k].x * s + dv[k].y * gv.y * xv[k].y * s +
             dv[k].z * gv.z * xv[k].z * s + dv[k].w * gv.w * xv[k].w * s;
    }
    dot = block_sum(dot, sh) / float(D);
    float4* dxr = reinterpret_cast<float4*>(dx + r * D);
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = k * blockDim.x + threadIdx.x;
      if (j < D4) {
        const float4 gv = g4[j];
        float4 o = dxr[j];
        o.x += s * (dv[k].x * gv.x - xv[k].x * s * dot);
        o.y += s * (dv[k].y * gv.y - xv[k].y * s * dot);
        o.z += s * (dv[k].z * gv.z - xv[k].z * s * dot);
        o.w += s * (dv[k].w * gv.w - xv[k].w * s * dot);
        dxr[j] = o;
      }
    }
  }
}

// One warp per row; VEC = 4 when D % 4 == 0 and every pointer is 16-byte aligned.
template <int VEC>
__global__ void rmsnorm_forward_kernel(int64_t R, int64_t D, const float* __restrict__ x,
                                       const float* __restrict__ g, float eps,
                                       float* __restrict__ y, float* __restrict__ rstd) {
  const int lane = threadIdx.x & 31;
  const int64_t stride = int64_t(gridDim.x) * (blockDim.x >> 5);
  for (int64_t r = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); r < R;
       r += stride) {
    const float* xr = x + r * D;
    float ss = 0.f;
#pragma unroll 4
    for (int64_t d = int64_t(lane) * VEC; d < D; d += 32 * VEC) {
      float v[VEC];
      load_vec<VEC>(xr + d, v);
#pragma unroll
      for (int k = 0; k < VEC; ++k) ss += v[k] * v[k];
    }
    ss = warp_sum(ss);
    const float s = 1.f / sqrtf(ss / float(D) + eps);
    if (lane == 0) rstd[r] = s;
    float* yr = y + r * D;
#pragma unroll 4
    for (int64_t d = int64_t(lane) * VEC; d < D; d += 32 * VEC) {
      float v[VEC], gv[VEC];
      load_vec<VEC>(xr + d, v);
      load_vec<VEC>(g + d, gv);
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[k] = v[k] * s * gv[k];
      store_vec<VEC>(yr + d, v);
    }
  }
}

// dx += s (dy g - x s mean_d(dy g x s)), one warp per row (layers.cpp's formula).
template <int VEC>
__global__ void rmsnorm_backward_x_kernel(int64_t R, int64_t D, const float* __restrict__ x,
                                          const float* __restrict__ g,
                                          const float* __restrict__ rstd,
                                          const float* __restrict__ dy, float* __restrict__ dx) {
  const int lane = threadIdx.x & 31;
  const int64_t stride = int64_t(gridDim.x) * (blockDim.x >> 5);
  for (int64_t r = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); r < R;
       r += stride) {
    const float s = rstd[r];
    const float* xr = x + r * D;
    const float* dyr = dy + r * D;
    float dot = 0.f;
#pragma unroll 2
    for (int64_t d = int64_t(lane) * VEC; d < D; d += 32 * VEC) {
      float xv[VEC], dv[VEC], gv[VEC];
      load_vec<VEC>(xr + d, xv);
      load_vec<VEC>(dyr + d, dv);
      load_vec<VEC>(g + d, gv);
#pragma unroll
      for (int k = 0; k < VEC; ++k) dot += dv[k] * gv[k] * xv[k] * s;
    }
    dot = warp_sum(dot) / float(D);
    float* dxr = dx + r * D;
#pragma unroll 2
    for (int64_t d = int64_t(lane) * VEC; d < D; d += 32 * VEC) {
      float xv[VEC], dv[VEC], gv[VEC], o[VEC];
      load_vec<VEC>(xr + d, xv);
      load_vec<VEC>(dyr + d, dv);
      load_vec<VEC>(g + d, gv);
      load_vec<VEC>(dxr + d, o);
#pragma unroll
      for (int k = 0; k < VEC; ++k) o[k] += s * (dv[k] * gv[k] - xv[k] * s * dot);
      store_vec<VEC>(dxr + d, o);
    }
  }
}

// Column partials over row blocks: partial[blk, n] = sum over the rows r of block blk, in
// increasing order, of a[r, n] (times b[r, n] rstd[r] when b is given: the RMSNorm gain
// gradient dy x rstd; the bias gradient passes b = rstd = nullptr).
__global__ void column_partials_kernel(int64_t R, int64_t nblk, int64_t N,
                                       const float* __restrict__ a, const float* __restrict__ b,
                                       const float* __restrict__ rstd,
                                       float* __restrict__ partial) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  for (int64_t blk = blockIdx.y; blk < nblk; blk += gridDim.y) {
    const int64_t r0 = blk * kRowBlock, r1 = r0 + kRowBlock < R ? r0 + kRowBlock : R;
    float acc = 0.f;
    if (b) {
#pragma unroll 8
      for (int64_t r = r0; r < r1; ++r) acc += a[r * N + n] * b[r * N + n] * rstd[r];
    } else {
#pragma unroll 8
      for (int64_t r = r0; r < r1; ++r) acc += a[r * N + n];
    }
    partial[blk * N + n] = acc;
  }
}

// out[n] += sum over blocks, in block order, of partial[blk, n].
__global__ void sum_partials_kernel(int64_t nblk, int64_t N, const float* __restrict__ partial,
                                    float* __restrict__ out) {
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < N;
       n += int64_t(gridDim.x) * blockDim.x) {
    float acc = 0.f;
#pragma unroll 8
    for (int64_t blk = 0; blk < nblk; ++blk) acc += partial[blk * N + n];
    out[n] += acc;
  }
}

// out[n] += sum_r a[r, n] (b[r, n] rstd[r]) through the two deterministic kernels above.
void column_sum(int64_t R, int64_t N, const float* a, const float* b, const float* rstd, float* out,
                float* partial, cudaStream_t s) {
  const int64_t nblk = row_blocks(R);
  const int threads = column_threads(N);
  const dim3 grid(unsigned((N + threads - 1) / threads),
                  unsigned(std::min<int64_t>(nblk, kMaxGridY)));
  column_partials_kernel<<<grid, threads, 0, s>>>(R, nblk, N, a, b, rstd, partial);
  LCR_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<<<blocks_for(N, threads), threads, 0, s>>>(nblk, N, partial, out);
  LCR_CUDA_CHECK_LAUNCH();
}

// ---- SwiGLU, embedding, bias ----

__global__ void swiglu_forward_kernel(int64_t n, const float* __restrict__ gate,
                                      const float* __restrict__ up, float* __restrict__ h) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float z = gate[i];
    h[i] = z * sigmoidf(z) * up[i];
  }
}

__global__ void swiglu_backward_kernel(int64_t n, const float* __restrict__ gate,
                                       const float* __restrict__ up, const float* __restrict__ dh,
                                       float* __restrict__ dgate, float* __restrict__ dup) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float z = gate[i], sg = sigmoidf(z), d = dh[i];
    dup[i] = d * z * sg;
    // silu'(z) = s + z s (1 - s)
    dgate[i] = d * up[i] * sg * (1.f + z * (1.f - sg));
  }
}

// One block per row (grid-stride over rows), threads over the columns.
__global__ void embedding_forward_kernel(int64_t R, int64_t D, const int32_t* __restrict__ tokens,
                                         const float* __restrict__ E, float* __restrict__ x) {
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const float* e = E + int64_t(tokens[r]) * D;
    float* xr = x + r * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) xr[d] = e[d];
  }
}

// One thread per (distinct token u, column d): dE[ids[u], d] += dx[r, d] for the token's
// rows r in increasing order (layers.cpp's order, one add per row).
__global__ void embedding_backward_kernel(int64_t n_ids, int64_t D, const int32_t* __restrict__ ids,
                                          const int32_t* __restrict__ starts,
                                          const int32_t* __restrict__ rows,
                                          const float* __restrict__ dx, float* __restrict__ dE) {
  for (int64_t u = blockIdx.x; u < n_ids; u += gridDim.x) {
    const int32_t j0 = starts[u], j1 = starts[u + 1];
    float* e = dE + int64_t(ids[u]) * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      float acc = e[d];
#pragma unroll 4
      for (int32_t j = j0; j < j1; ++j) acc += dx[int64_t(rows[j]) * D + d];
      e[d] = acc;
    }
  }
}

__global__ void add_bias_kernel(int64_t R, int64_t N, const float* __restrict__ b,
                                float* __restrict__ y) {
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    float* yr = y + r * N;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) yr[n] += b[n];
  }
}

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

// Fixed-order block reduction of MaxSum (blockDim.x a multiple of 32, at most 1024); the
// result is valid in thread 0.
__device__ MaxSum block_combine(MaxSum v) {
  __shared__ MaxSum warp_part[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum other;
    other.m = __shfl_down_sync(kFullMask, v.m, o);
    other.s = __shfl_down_sync(kFullMask, v.s, o);
    v = combine(v, other);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nwarps ? warp_part[lane] : MaxSum{-INFINITY, 0.f};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      MaxSum other;
      other.m = __shfl_down_sync(kFullMask, v.m, o);
      other.s = __shfl_down_sync(kFullMask, v.s, o);
      v = combine(v, other);
    }
  }
  __syncthreads();  // warp_part is reused by the next row
  return v;
}

__global__ void cross_entropy_forward_kernel(int64_t R, int64_t V, const float* __restrict__ logits,
                                             const int32_t* __restrict__ labels,
                                             float* __restrict__ lse,
                                             float* __restrict__ row_loss) {
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const float* row = logits + r * V;
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
__global__ void cross_entropy_backward_kernel(int64_t R, int64_t V, const float* logits,
                                              const int32_t* __restrict__ labels,
                                              const float* __restrict__ lse, float scale,
                                              float* dlogits) {
  const int64_t bs = blockDim.x;
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const int32_t y = labels[r];
    const float* row = logits + r * V;
    float* out = dlogits + r * V;
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
__global__ void axpy_kernel(int64_t n, float a, const float* __restrict__ x,
                            float* __restrict__ y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
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

bool can_vec4(int64_t D, std::initializer_list<const void*> ptrs) {
  if (D % 4 != 0) return false;
  for (const void* q : ptrs)
    if (!aligned16(q)) return false;
  return true;
}

// The register-resident block-per-row kernels take rows of D <= 8192 (D % 4 == 0, aligned):
// nv float4 per thread (1, 2, 4 or 8), threads a multiple of 32 up to 256. nv = 0: use the
// warp-per-row kernels.
struct BlockShape {
  int nv = 0, threads = 0;
};
BlockShape rmsnorm_block_shape(int64_t D, bool vec4) {
  BlockShape b;
  if (!vec4) return b;
  const int64_t D4 = D / 4;
  for (int nv : {1, 2, 4, 8}) {  // at most 256 threads: several rows in flight per SM
    if (D4 <= int64_t(256) * nv) {
      b.nv = nv;
      b.threads = int((D4 + nv - 1) / nv + 31) / 32 * 32;
      return b;
    }
  }
  return b;
}

}  // namespace

void rmsnorm_forward(int64_t R, int64_t D, const float* x, const float* g, float eps, float* y,
                     float* rstd, cudaStream_t s) {
  if (R <= 0 || D <= 0) return;
  const unsigned grid = blocks_for(R, kRowWarps);
  const bool vec4 = can_vec4(D, {x, g, y});
  const BlockShape b = rmsnorm_block_shape(D, vec4);
  const unsigned rows = blocks_for(R, 1);
  if (b.nv == 1) {
    rmsnorm_forward_block_kernel<1><<<rows, b.threads, 0, s>>>(R, int(D), x, g, eps, y, rstd);
  } else if (b.nv == 2) {
    rmsnorm_forward_block_kernel<2><<<rows, b.threads, 0, s>>>(R, int(D), x, g, eps, y, rstd);
  } else if (b.nv == 4) {
    rmsnorm_forward_block_kernel<4><<<rows, b.threads, 0, s>>>(R, int(D), x, g, eps, y, rstd);
  } else if (b.nv == 8) {
    rmsnorm_forward_block_kernel<8><<<rows, b.threads, 0, s>>>(R, int(D), x, g, eps, y, rstd);
  } else if (vec4) {
    rmsnorm_forward_kernel<4><<<grid, kRowWarps * 32, 0, s>>>(R, D, x, g, eps, y, rstd);
  } else {
    rmsnorm_forward_kernel<1><<<grid, kRowWarps * 32, 0, s>>>(R, D, x, g, eps, y, rstd);
  }
  LCR_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward(int64_t R, int64_t D, const float* x, const float* g, const float* rstd,
                      const float* dy, float* dx, float* dg, float* partial, cudaStream_t s) {
  if (R <= 0 || D <= 0) return;
  const unsigned grid = blocks_for(R, kRowWarps);
  const bool vec4 = can_vec4(D, {x, g, dy, dx});
  const BlockShape b = rmsnorm_block_shape(D, vec4);
  const unsigned rows = blocks_for(R, 1);
  const int Di = int(D);
  if (b.nv == 1) {
    rmsnorm_backward_x_block_kernel<1><<<rows, b.threads, 0, s>>>(R, Di, x, g, rstd, dy, dx);
  } else if (b.nv == 2) {
    rmsnorm_backward_x_block_kernel<2><<<rows, b.threads, 0, s>>>(R, Di, x, g, rstd, dy, dx);
  } else if (b.nv == 4) {
    rmsnorm_backward_x_block_kernel<4><<<rows, b.threads, 0, s>>>(R, Di, x, g, rstd, dy, dx);
  } else if (b.nv == 8) {
    rmsnorm_backward_x_block_kernel<8><<<rows, b.threads, 0, s>>>(R, Di, x, g, rstd, dy, dx);
  } else if (vec4) {
    rmsnorm_backward_x_kernel<4><<<grid, kRowWarps * 32, 0, s>>>(R, D, x, g, rstd, dy, dx);
  } else {
    rmsnorm_backward_x_kernel<1><<<grid, kRowWarps * 32, 0, s>>>(R, D, x, g, rstd, dy, dx);
  }
  LCR_CUDA_CHECK_LAUNCH();
  column_sum(R, D, dy, x, rstd, dg, partial, s);
}

void swiglu_forward(int64_t n, const float* gate, const float* up, float* h, cudaStream_t s) {
  if (n <= 0) return;
  swiglu_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, gate, up, h);
  LCR_CUDA_CHECK_LAUNCH();
}

void swiglu_backward(int64_t n, const float* gate, const float* up, const float* dh, float* dgate,
                     float* dup, cudaStream_t s) {
  if (n <= 0) return;
  swiglu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, gate, up, dh, dgate, dup);
  LCR_CUDA_CHECK_LAUNCH();
}

void embedding_forward(int64_t R, int64_t D, const int32_t* tokens, const float* E, float* x,
                       cudaStream_t s) {
  if (R <= 0 || D <= 0) return;
  embedding_forward_kernel<<<blocks_for(R, 1), column_threads(D), 0, s>>>(R, D, tokens, E, x);
  LCR_CUDA_CHECK_LAUNCH();
}

EmbeddingPlan plan_embedding_backward(const int32_t* host_tokens, int64_t R) {
  EmbeddingPlan plan;
  if (R <= 0) {
    plan.starts.push_back(0);
    return plan;
  }
  // Stable sort of the row indices by token: rows stay increasing within a token.
  plan.rows.resize(size_t(R));
  std::iota(plan.rows.begin(), plan.rows.end(), 0);
  std::stable_sort(plan.rows.begin(), plan.rows.end(),
                   [&](int32_t a, int32_t b) { return host_tokens[a] < host_tokens[b]; });
  for (int64_t j = 0; j < R; ++j) {
    const int32_t t = host_tokens[plan.rows[size_t(j)]];
    if (plan.ids.empty() || plan.ids.back() != t) {
      plan.ids.push_back(t);
      plan.starts.push_back(int32_t(j));
    }
  }
  plan.starts.push_back(int32_t(R));
  return plan;
}

void embedding_backward(int64_t n_ids, int64_t D, const int32_t* ids, const int32_t* starts,
                        const int32_t* rows, const float* dx, float* dE, cudaStream_t s) {
  if (n_ids <= 0 || D <= 0) return;
  embedding_backward_kernel<<<blocks_for(n_ids, 1), column_threads(D), 0, s>>>(
      n_ids, D, ids, starts, rows, dx, dE);
  LCR_CUDA_CHECK_LAUNCH();
}

void add_bias(int64_t R, int64_t N, const float* b, float* y, cudaStream_t s) {
  if (R <= 0 || N <= 0) return;
  add_bias_kernel<<<blocks_for(R, 1), column_threads(N), 0, s>>>(R, N, b, y);
  LCR_CUDA_CHECK_LAUNCH();
}

void bias_backward(int64_t R, int64_t N, const float* dy, float* db, float* partial,
                   cudaStream_t s) {
  if (R <= 0 || N <= 0) return;
  column_sum(R, N, dy, nullptr, nullptr, db, partial, s);
}

void cross_entropy_forward(int64_t R, int64_t V, const float* logits, const int32_t* labels,
                           float* lse, float* row_loss, cudaStream_t s) {
  if (R <= 0 || V <= 0) return;
  const int threads = int(std::min<int64_t>(kCeThreads, (V + 31) / 32 * 32));
  cross_entropy_forward_kernel<<<blocks_for(R, 1), threads, 0, s>>>(R, V, logits, labels, lse,
                                                                    row_loss);
  LCR_CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(int64_t R, int64_t V, const float* logits, const int32_t* labels,
                            const float* lse, float scale, float* dlogits, cudaStream_t s) {
  if (R <= 0 || V <= 0) return;
  const int threads = int(std::min<int64_t>(kCeThreads, (V + 31) / 32 * 32));
  cross_entropy_backward_kernel<<<blocks_for(R, 1), threads, 0, s>>>(R, V, logits, labels, lse,
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

void axpy(int64_t n, float a, const float* x, float* y, cudaStream_t s) {
  if (n <= 0) return;
  axpy_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, a, x, y);
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
