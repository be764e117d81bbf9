// The model's non-attention layers as CUDA kernels (gpu_layers.hpp): the twins of
// core/model/layers.cpp (the loss and AdamW kernels are in gpu_loss_optim.cu).
//
// Layout of the work:
//  - row-wise layers (RMSNorm forward / backward-x): one block per row with the row held in
//    registers (float4, D % 4 == 0, D <= 8192), else one warp per row; shuffle sums in a
//    fixed order (every thread ends with the same bits);
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
#include "core/model/cuda/kernel_util.cuh"
#include "kernels/attention/cuda/cuda_check.hpp"

namespace lcr::cuda::model {
namespace {

using namespace detail;

constexpr int kRowWarps = 8;  // rows per block of the warp-per-row kernels

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

// Pass 1, one thread per (chunk c, column d): partial[c, d] = the chunk's rows of dx summed
// in increasing order.
__global__ void embedding_chunk_kernel(int64_t n_chunks, int64_t D,
                                       const int32_t* __restrict__ chunks,
                                       const int32_t* __restrict__ rows,
                                       const float* __restrict__ dx, float* __restrict__ partial) {
  for (int64_t c = blockIdx.x; c < n_chunks; c += gridDim.x) {
    const int32_t j0 = chunks[c], j1 = chunks[c + 1];
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      float acc = 0.f;
#pragma unroll 4
      for (int32_t j = j0; j < j1; ++j) acc += dx[int64_t(rows[j]) * D + d];
      partial[c * D + d] = acc;
    }
  }
}

// Pass 2, one thread per (distinct token u, column d): dE[ids[u], d] += its chunks' sums in
// chunk order.
__global__ void embedding_backward_kernel(int64_t n_ids, int64_t D, const int32_t* __restrict__ ids,
                                          const int32_t* __restrict__ id_chunks,
                                          const float* __restrict__ partial,
                                          float* __restrict__ dE) {
  for (int64_t u = blockIdx.x; u < n_ids; u += gridDim.x) {
    const int32_t c0 = id_chunks[u], c1 = id_chunks[u + 1];
    float* e = dE + int64_t(ids[u]) * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      float acc = e[d];
      for (int32_t c = c0; c < c1; ++c) acc += partial[int64_t(c) * D + d];
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
  for (size_t u = 0; u < plan.ids.size(); ++u) {
    plan.id_chunks.push_back(int32_t(plan.chunks.size()));
    for (int32_t j = plan.starts[u]; j < plan.starts[u + 1]; j += kEmbeddingChunk)
      plan.chunks.push_back(j);
  }
  plan.id_chunks.push_back(int32_t(plan.chunks.size()));
  plan.chunks.push_back(int32_t(R));
  return plan;
}

void embedding_backward(int64_t n_ids, int64_t n_chunks, int64_t D, const int32_t* ids,
                        const int32_t* id_chunks, const int32_t* chunks, const int32_t* rows,
                        const float* dx, float* partial, float* dE, cudaStream_t s) {
  if (n_ids <= 0 || D <= 0) return;
  embedding_chunk_kernel<<<blocks_for(n_chunks, 1), column_threads(D), 0, s>>>(n_chunks, D, chunks,
                                                                               rows, dx, partial);
  LCR_CUDA_CHECK_LAUNCH();
  embedding_backward_kernel<<<blocks_for(n_ids, 1), column_threads(D), 0, s>>>(
      n_ids, D, ids, id_chunks, partial, dE);
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

__global__ void fox_gate_add_suffix_kernel(int64_t B, int64_t L, int64_t H,
                                           const float* __restrict__ z,
                                           const float* __restrict__ after, float* dz) {
  const int64_t n = B * L * H;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / (L * H), h = i % H;
    dz[i] += after[b * H + h] * sigmoidf(-z[i]);  // d log sigmoid(z) / dz = sigmoid(-z)
  }
}

void fox_gate_add_suffix(int64_t B, int64_t L, int64_t H, const float* z, const float* after,
                         float* dz, cudaStream_t s) {
  const int64_t n = B * L * H;
  if (n <= 0) return;
  fox_gate_add_suffix_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(B, L, H, z, after, dz);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::model
