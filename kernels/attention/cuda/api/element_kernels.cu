// Element-parallel lane kernels (contracts in element_kernels.hpp) for the sides whose lane
// map takes each lane from one place: the row's own input element (scaled) or a table that
// depends only on (position, head). That is Copy and GOAT without QK-RMSNorm, the GOAT
// benchmark's and training's configuration. The row kernels of lane_kernels.cu spend ~110
// warp instructions per GOAT row (issue-bound, far below the memory bandwidth, docs/cuda.md
// "GOAT's passes"); here a thread writes 8 lanes of one row with four 4-byte loads, one
// 16-byte store and no per-lane branches beyond a select, and the prior lanes are formed once
// per (position, head) into a table instead of once per row inside the row loop.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention/cuda/api/element_kernels.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda::lanes {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kThreads = 256;

template <class T>
bool aligned(const T* p, int bytes) {
  return (reinterpret_cast<uintptr_t>(p) % unsigned(bytes)) == 0;
}

// Both lanes of a bf16 pair times s, rounded to nearest like __float2bfloat16 lane by lane.
__device__ __forceinline__ uint32_t scale_pair(uint32_t w, float s) {
  const __nv_bfloat162 r =
      __floats2bfloat162_rn(__uint_as_float(w << 16) * s, __uint_as_float(w & 0xffff0000u) * s);
  return *reinterpret_cast<const uint32_t*>(&r);
}

constexpr int kModeGroup = 4;  // modes whose loads a thread issues together

// prior [L, Hx, np], np = 2R + 2: GOAT's lanes d_c .. d_c + 2R + 1 of position t, head h;
// one thread per (t, h), 32-bit indices (L Hx < 2^31: goat_prior_table). Queries: the mode lanes
// lane_scale (al cos + be sin, al sin - be cos), then 1, 1. Keys: cos, sin per mode, then
// sqrt(d_h) u split into a bf16 head and tail (lane_kernels.cu's header says why).
__global__ void goat_prior_table_kernel(RowLaneArgs a, uint32_t n,
                                        __nv_bfloat16* __restrict__ prior) {
  const int R = a.R;
  for (uint32_t th = blockIdx.x * blockDim.x + threadIdx.x; th < n; th += gridDim.x * blockDim.x) {
    const uint32_t t = th / uint32_t(a.Hx), h = th - t * uint32_t(a.Hx);
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(prior) + size_t(th) * (R + 1);
    const float2* cs_row = a.trig + size_t(t) * a.M;
    for (int r0 = 0; r0 < R; r0 += kModeGroup) {
      // Loads first (read-only path): the stores below could otherwise alias them.
      float2 cs[kModeGroup];
      float al[kModeGroup], be[kModeGroup];
#pragma unroll
      for (int k = 0; k < kModeGroup; ++k) {
        const bool in = r0 + k < R;
        cs[k] = in ? __ldg(cs_row + r0 + k) : make_float2(0.f, 0.f);
        al[k] = in && a.is_query ? __ldg(a.alpha + h * R + r0 + k) : 0.f;
        be[k] = in && a.is_query ? __ldg(a.beta + h * R + r0 + k) : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kModeGroup; ++k) {
        if (r0 + k >= R) break;
        __nv_bfloat162 v;
        if (a.is_query) {
          v.x = __float2bfloat16(a.lane_scale * (al[k] * cs[k].x + be[k] * cs[k].y));
          v.y = __float2bfloat16(a.lane_scale * (al[k] * cs[k].y - be[k] * cs[k].x));
        } else {
          v.x = __float2bfloat16(cs[k].x);
          v.y = __float2bfloat16(cs[k].y);
        }
        dst[r0 + k] = v;
      }
    }
    __nv_bfloat162 u;
    if (a.is_query) {
      u.x = u.y = __float2bfloat16(1.f);
    } else {
      const double U = a.u_scale * __ldg(a.u + size_t(t) * a.Hx + h);
      u.x = __float2bfloat16(float(U));
      u.y = __float2bfloat16(float(U - double(__bfloat162float(u.x))));
    }
    dst[R] = u;
  }
}

// y [rows, 8 cpr] bf16: lane o of row r is scale x[r, o] (o < d), prior[r mod LH, o - d]
// (o < d + np), else 0. Thread i writes lanes 8c .. 8c + 7 of row i / cpr (c = i mod cpr) as
// one 16-byte store, consecutive threads consecutive chunks; each pair of lanes is one
// 4-byte load (d and np even: a pair never straddles x and the table).
__global__ void __launch_bounds__(kThreads)
    concat_lanes_kernel(const __nv_bfloat16* __restrict__ x, int d, float scale,
                        const __nv_bfloat16* __restrict__ prior, int np, uint32_t LH, uint32_t cpr,
                        uint32_t chunks, __nv_bfloat16* __restrict__ y) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < chunks;
       i += gridDim.x * blockDim.x) {
    const uint32_t row = i / cpr;
    const int o0 = 8 * int(i - row * cpr);
    const auto* xs = reinterpret_cast<const uint32_t*>(x + size_t(row) * d);
    const auto* ps = reinterpret_cast<const uint32_t*>(prior + size_t(row % LH) * np);
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int o = o0 + 2 * e;
      w[e] = o < d ? scale_pair(__ldg(xs + o / 2), scale)
                   : (o < d + np ? __ldg(ps + (o - d) / 2) : 0u);
    }
    *reinterpret_cast<uint4*>(y + size_t(i) * 8) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

__device__ __forceinline__ float2 load_pair(const float* p) {
  return __ldg(reinterpret_cast<const float2*>(p));
}
__device__ __forceinline__ float2 load_pair(const __nv_bfloat16* p) {
  return __bfloat1622float2(__ldg(reinterpret_cast<const __nv_bfloat162*>(p)));
}

// dx [rows, d] fp32 = scale dy[rows, :d] (dy [rows, dp]); one thread per pair of lanes, so
// a warp's 8-byte loads and stores are contiguous.
template <class DyT>
__global__ void __launch_bounds__(kThreads)
    narrow_grads_kernel(const DyT* __restrict__ dy, int dp, int d, float scale, uint32_t pairs,
                        float* __restrict__ dx) {
  const uint32_t hp = uint32_t(d / 2);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < pairs; i += gridDim.x * blockDim.x) {
    const uint32_t row = i / hp, o = 2 * (i - row * hp);
    const float2 v = load_pair(dy + size_t(row) * dp + o);
    reinterpret_cast<float2*>(dx)[i] = make_float2(scale * v.x, scale * v.y);
  }
}

// GOAT's prior-lane gradients, block (position chunk, head), thread = one position of the
// chunk, batch rows in order. Keys: du(t) = sum_b (d k'_hi + d k'_lo) / 2 * sqrt(d_h) (both
// u lanes meet q' = 1; k'_hi + k'_lo = sqrt(d_h) u). Queries: per mode r the chunk's
// [sum g0 cos + g1 sin | sum g0 sin - g1 cos] over its rows, (g0, g1) = d q' of the mode's
// lanes, kModeGroup modes at a time (their loads in flight together), summed over the block
// in a fixed order (warp butterfly, then the warps in order).
template <class DyT>
__global__ void __launch_bounds__(kPositions)
    goat_prior_grads_kernel(RowLaneArgs a, RowLaneGrads g, const DyT* __restrict__ dy) {
  static_assert(kPositions % 32 == 0, "whole warps per block");
  constexpr int kBlockWarps = kPositions / 32, kSums = 2 * kModeGroup;
  __shared__ float red[kSums][kBlockWarps];
  const int h = blockIdx.y, tid = threadIdx.x, t = blockIdx.x * kPositions + tid;
  const bool live = t < a.L;
  auto row_of = [&](int b) { return (int64_t(b) * a.L + t) * a.Hx + h; };
  if (!a.is_query) {
    if (!live) return;
    const int lu = a.d + 2 * a.R;
    float acc = 0.f;
    for (int b = 0; b < a.B; ++b) {
      const float2 gu = load_pair(dy + row_of(b) * a.dp + lu);
      acc += 0.5f * (gu.x + gu.y) * float(a.u_scale);
    }
    g.du[int64_t(t) * a.Hx + h] = acc;
    return;
  }
  float* part = g.mode_part + (int64_t(blockIdx.x) * a.Hx + h) * 2 * a.R;
  for (int r0 = 0; r0 < a.R; r0 += kModeGroup) {  // uniform over the block
    float sum[kSums] = {};
    if (live) {
      float2 cs[kModeGroup];
#pragma unroll
      for (int k = 0; k < kModeGroup; ++k)
        cs[k] = r0 + k < a.R ? a.trig[int64_t(t) * a.M + r0 + k] : make_float2(0.f, 0.f);
      for (int b = 0; b < a.B; ++b) {
        const DyT* gr = dy + row_of(b) * a.dp + a.d + 2 * r0;
#pragma unroll
        for (int k = 0; k < kModeGroup; ++k) {
          if (r0 + k >= a.R) break;
          const float2 gv = load_pair(gr + 2 * k);
          sum[2 * k] += gv.x * cs[k].x + gv.y * cs[k].y;
          sum[2 * k + 1] += gv.x * cs[k].y - gv.y * cs[k].x;
        }
      }
    }
#pragma unroll
    for (int v = 0; v < kSums; ++v) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum[v] += __shfl_xor_sync(kFull, sum[v], o);
    }
    if (tid % 32 == 0)
#pragma unroll
      for (int v = 0; v < kSums; ++v) red[v][tid / 32] = sum[v];
    __syncthreads();
    if (tid < kSums && r0 + tid / 2 < a.R) {
      float tot = 0.f;
      for (int w = 0; w < kBlockWarps; ++w) tot += red[tid][w];
      part[(tid % 2) * a.R + r0 + tid / 2] = tot;
    }
    __syncthreads();
  }
}

int grid_for(int64_t n) { return blocks_for(n, kThreads); }

}  // namespace

bool element_forward_ok(const RowLaneArgs& a, const __nv_bfloat16* y) {
  if (a.gain || (a.kind != LaneKind::Copy && a.kind != LaneKind::Goat)) return false;
  if (a.kind == LaneKind::Goat && !a.prior) return false;
  const int64_t chunks = int64_t(a.B) * a.L * a.Hx * (a.dp / 8);
  return a.d % 2 == 0 && a.dp % 8 == 0 && aligned(a.x, 4) && aligned(y, 16) &&
         chunks < (int64_t(1) << 31);
}

void goat_prior_table(const RowLaneArgs& a, cudaStream_t s) {
  const int64_t n = int64_t(a.L) * a.Hx;
  if (n == 0) return;
  require(n < (int64_t(1) << 31), "goat_prior_table: L * heads = ", n, " must stay below 2^31");
  goat_prior_table_kernel<<<grid_for(n), kThreads, 0, s>>>(a, uint32_t(n), a.prior);
  LCR_CUDA_CHECK_LAUNCH();
}

void concat_lanes(const RowLaneArgs& a, __nv_bfloat16* y, cudaStream_t s) {
  const bool goat = a.kind == LaneKind::Goat;
  const int np = goat ? 2 * a.R + 2 : 0;
  const int64_t chunks = int64_t(a.B) * a.L * a.Hx * (a.dp / 8);
  if (chunks == 0) return;
  concat_lanes_kernel<<<grid_for(chunks), kThreads, 0, s>>>(
      a.x, a.d, a.scale, goat ? a.prior : nullptr, np, goat ? uint32_t(a.L) * a.Hx : 1u,
      uint32_t(a.dp / 8), uint32_t(chunks), y);
  LCR_CUDA_CHECK_LAUNCH();
}

bool element_backward_ok(const RowLaneArgs& a, const RowLaneGrads& g) {
  if (a.gain || (a.kind != LaneKind::Copy && a.kind != LaneKind::Goat)) return false;
  const int64_t pairs = int64_t(a.B) * a.L * a.Hx * (a.d / 2);
  const bool dy_ok = g.dy16 ? aligned(g.dy16, 4) : aligned(g.dy, 8);
  return a.d % 2 == 0 && a.dp % 2 == 0 && dy_ok && aligned(g.dx, 8) && pairs < (int64_t(1) << 31);
}

void narrow_grads(const RowLaneArgs& a, const RowLaneGrads& g, cudaStream_t s) {
  const int64_t pairs = int64_t(a.B) * a.L * a.Hx * (a.d / 2);
  if (pairs == 0) return;
  // Copy and GOAT keys: scale 1; GOAT queries: the content scale of q'.
  if (g.dy16)
    narrow_grads_kernel<<<grid_for(pairs), kThreads, 0, s>>>(g.dy16, a.dp, a.d, a.scale,
                                                             uint32_t(pairs), g.dx);
  else
    narrow_grads_kernel<<<grid_for(pairs), kThreads, 0, s>>>(g.dy, a.dp, a.d, a.scale,
                                                             uint32_t(pairs), g.dx);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_prior_grads(const RowLaneArgs& a, const RowLaneGrads& g, cudaStream_t s) {
  if (a.is_query ? !g.mode_part || a.R == 0 : !g.du) return;
  const dim3 grid(position_chunks(a.L), a.Hx);
  if (g.dy16)
    goat_prior_grads_kernel<<<grid, kPositions, 0, s>>>(a, g, g.dy16);
  else
    goat_prior_grads_kernel<<<grid, kPositions, 0, s>>>(a, g, g.dy);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::lanes
