// PaTH's per-layer parameterisation as CUDA kernels (gpu_path.hpp): the twins of
// kernels/schemes/path/params.cpp's beta_forward / beta_backward / w_forward / w_backward
// for whole sequences (an empty prefix: zeros before each sequence's first row).
//
// Layout of the work:
//  - w forward / the backward through the normalisation: one warp per (row, KV head), the
//    head's d <= 128 channels in registers (4 per lane), butterfly sums (fixed order);
//  - du: one thread per value (the three taps of the transposed convolution);
//  - dconv: one partial per (block of kRowBlock rows, h, c, k), each summed by one thread over
//    its rows in increasing order, then the partials in block order (no atomics);
//  - beta: elementwise.
// Every index into a tensor is int64.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/model/cuda/gpu_layers.hpp"
#include "core/model/cuda/gpu_path.hpp"
#include "core/model/cuda/kernel_util.cuh"
#include "kernels/attention/cuda/cuda_check.hpp"

namespace lcr::cuda::model {
namespace {

using namespace detail;

constexpr int kWarps = kThreads / 32;
constexpr int kPerLane = 4;  // channels per lane: d <= 32 kPerLane

// Pre-activation of channel (h, c) at row r (position t of its sequence): params.cpp's
// conv_at, weight[h, c, 0] u_{t-2} + weight[h, c, 1] u_{t-1} + weight[h, c, 2] u_t, with
// u_{<0} = 0. stride = Hkv d (one row); up points at u[r, h, c].
__device__ __forceinline__ float conv_at(const float* __restrict__ up, const float* __restrict__ wk,
                                         int64_t t, int64_t stride) {
  const float x0 = t >= 2 ? up[-2 * stride] : 0.f;
  const float x1 = t >= 1 ? up[-stride] : 0.f;
  return wk[0] * x0 + wk[1] * x1 + wk[2] * up[0];
}

__global__ void path_w_forward_kernel(int64_t R, int64_t L, int64_t Hkv, int64_t d, bool silu,
                                      const float* __restrict__ u, const float* __restrict__ conv,
                                      float* __restrict__ w) {
  const int lane = int(threadIdx.x) & 31;
  const int64_t pairs = R * Hkv, stride = Hkv * d;
  for (int64_t p = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); p < pairs;
       p += int64_t(gridDim.x) * kWarps) {
    const int64_t r = p / Hkv, h = p % Hkv, t = r % L;
    float y[kPerLane];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      y[i] = 0.f;
      if (c < d) {
        const float z = conv_at(u + p * d + c, conv + (h * d + c) * 3, t, stride);
        y[i] = silu ? z * sigmoidf(z) : z;
        ss += y[i] * y[i];
      }
    }
    const float nrm = sqrtf(warp_sum(ss));
    const bool ok = nrm > float(kPathMinWNorm) && nrm - nrm == 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < d) w[p * d + c] = ok ? y[i] / nrm : nanf("");
    }
  }
}

// dw -> dz in place (dz: the gradient with respect to the conv's pre-activation):
// dy = (dw - w <w, dw>) / |y|, then SiLU's derivative.
__global__ void path_w_backward_norm_kernel(int64_t R, int64_t L, int64_t Hkv, int64_t d, bool silu,
                                            const float* __restrict__ u,
                                            const float* __restrict__ conv,
                                            float* __restrict__ dw) {
  const int lane = int(threadIdx.x) & 31;
  const int64_t pairs = R * Hkv, stride = Hkv * d;
  for (int64_t p = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); p < pairs;
       p += int64_t(gridDim.x) * kWarps) {
    const int64_t r = p / Hkv, h = p % Hkv, t = r % L;
    float z[kPerLane], y[kPerLane], g[kPerLane];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      z[i] = y[i] = g[i] = 0.f;
      if (c < d) {
        z[i] = conv_at(u + p * d + c, conv + (h * d + c) * 3, t, stride);
        y[i] = silu ? z[i] * sigmoidf(z[i]) : z[i];
        g[i] = dw[p * d + c];
        ss += y[i] * y[i];
      }
    }
    const float nrm = sqrtf(warp_sum(ss));
    float wdw = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (lane + 32 * i < d) wdw += y[i] / nrm * g[i];
    wdw = warp_sum(wdw);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c >= d) continue;
      float v = (g[i] - y[i] / nrm * wdw) / nrm;
      if (silu) {
        const float sg = sigmoidf(z[i]);
        v *= sg * (1.f + z[i] * (1.f - sg));
      }
      dw[p * d + c] = v;
    }
  }
}

// du_t = sum_k weight[k] dz_{t+2-k} (terms past the sequence's end are 0).
__global__ void path_w_backward_u_kernel(int64_t R, int64_t L, int64_t Hkv, int64_t d,
                                         const float* __restrict__ conv,
                                         const float* __restrict__ dz, float* __restrict__ du) {
  const int64_t stride = Hkv * d, n = R * stride;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % stride, t = (i / stride) % L;
    const float* wk = conv + col * 3;  // col = h d + c
    float g = 0.f;
#pragma unroll
    for (int k = 0; k < 3; ++k)
      if (t + 2 - k < L) g += wk[k] * dz[i + (2 - k) * stride];
    du[i] = g;
  }
}

// partial[blk, col, k] = sum over the rows of block blk (increasing) of dz_t u_{t-2+k}.
__global__ void path_conv_partials_kernel(int64_t R, int64_t L, int64_t nblk, int64_t N,
                                          const float* __restrict__ dz, const float* __restrict__ u,
                                          float* __restrict__ partial) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= N) return;
  for (int64_t blk = blockIdx.y; blk < nblk; blk += gridDim.y) {
    const int64_t r0 = blk * kRowBlock, r1 = std::min<int64_t>(R, r0 + kRowBlock);
    float g0 = 0.f, g1 = 0.f, g2 = 0.f;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r % L, i = r * N + col;
      const float g = dz[i];
      g0 += g * (t >= 2 ? u[i - 2 * N] : 0.f);
      g1 += g * (t >= 1 ? u[i - N] : 0.f);
      g2 += g * u[i];
    }
    float* out = partial + (blk * N + col) * 3;
    out[0] = g0;
    out[1] = g1;
    out[2] = g2;
  }
}

// out[j] += sum over blocks (in order) of partial[blk, j]; j < n.
__global__ void path_sum_partials_kernel(int64_t nblk, int64_t n, const float* __restrict__ partial,
                                         float* __restrict__ out) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < n;
       j += int64_t(gridDim.x) * blockDim.x) {
    float acc = 0.f;
    for (int64_t blk = 0; blk < nblk; ++blk) acc += partial[blk * n + j];
    out[j] += acc;
  }
}

__global__ void path_beta_forward_kernel(int64_t n, const float* __restrict__ z,
                                         float* __restrict__ beta) {
  const float cap = float(kPathBetaMax);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = 2.f * sigmoidf(z[i]);
    beta[i] = v < cap ? v : cap;
  }
}

// dz may alias dbeta: each thread reads its value before writing it.
__global__ void path_beta_backward_kernel(int64_t n, const float* z, const float* dbeta,
                                          float* dz) {
  const float cap = float(kPathBetaMax);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float s = sigmoidf(z[i]);
    dz[i] = 2.f * s < cap ? dbeta[i] * 2.f * s * (1.f - s) : 0.f;
  }
}

void check_head_width(int64_t d) {
  require(d >= 1 && d <= 32 * kPerLane, "path w: head width ", d, " outside [1, ", 32 * kPerLane,
          "]");
}

}  // namespace

int64_t path_conv_partial_floats(int64_t R, int64_t Hkv, int64_t d) {
  return row_blocks(R) * Hkv * d * 3;
}

void path_w_forward(int64_t B, int64_t L, int64_t Hkv, int64_t d, bool silu, const float* u,
                    const float* conv, float* w, cudaStream_t s) {
  const int64_t R = B * L;
  if (R <= 0 || Hkv <= 0) return;
  check_head_width(d);
  path_w_forward_kernel<<<blocks_for(R * Hkv, kWarps), kThreads, 0, s>>>(R, L, Hkv, d, silu, u,
                                                                         conv, w);
  LCR_CUDA_CHECK_LAUNCH();
}

void path_w_backward(int64_t B, int64_t L, int64_t Hkv, int64_t d, bool silu, const float* u,
                     const float* conv, float* dw, float* du, float* dconv, float* partial,
                     cudaStream_t s) {
  const int64_t R = B * L, N = Hkv * d;
  if (R <= 0 || N <= 0) return;
  check_head_width(d);
  path_w_backward_norm_kernel<<<blocks_for(R * Hkv, kWarps), kThreads, 0, s>>>(R, L, Hkv, d, silu,
                                                                               u, conv, dw);
  LCR_CUDA_CHECK_LAUNCH();
  path_w_backward_u_kernel<<<blocks_for(R * N, kThreads), kThreads, 0, s>>>(R, L, Hkv, d, conv, dw,
                                                                            du);
  LCR_CUDA_CHECK_LAUNCH();
  const int64_t nblk = row_blocks(R);
  const int threads = int(std::min<int64_t>(kThreads, (N + 31) / 32 * 32));
  const dim3 grid(unsigned((N + threads - 1) / threads),
                  unsigned(std::min<int64_t>(nblk, kMaxGridY)));
  path_conv_partials_kernel<<<grid, threads, 0, s>>>(R, L, nblk, N, dw, u, partial);
  LCR_CUDA_CHECK_LAUNCH();
  path_sum_partials_kernel<<<blocks_for(N * 3, kThreads), kThreads, 0, s>>>(nblk, N * 3, partial,
                                                                            dconv);
  LCR_CUDA_CHECK_LAUNCH();
}

void path_beta_forward(int64_t n, const float* z, float* beta, cudaStream_t s) {
  if (n <= 0) return;
  path_beta_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, z, beta);
  LCR_CUDA_CHECK_LAUNCH();
}

void path_beta_backward(int64_t n, const float* z, const float* dbeta, float* dz, cudaStream_t s) {
  if (n <= 0) return;
  path_beta_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(n, z, dbeta, dz);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::model
