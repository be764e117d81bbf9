// The row kernels of the CUDA lanes (layout and contract in lane_kernels.hpp): QK-RMSNorm
// fused with the scheme's lane map, forward and backward, fp32 math on bf16 rows, matching
// the CPU definitions of kernels/schemes/{numerics,rope,goat,pope}:
//   norm   x <- x / sqrt(mean(x^2) + eps) * gain
//   RoPE   (x_a, x_b) -> a (x_a cos - x_b sin, x_a sin + x_b cos), pass-through dims x a
//   GOAT   q' = [s_c q_c, sqrt(d_h) (al cos + be sin, al sin - be cos), 1, 1]
//          k' = [k_c, cos, sin, hi(sqrt(d_h) u), lo(sqrt(d_h) u)]
//   PoPE   q' = mu_q [cos phi, sin phi], k' = mu_k [cos psi, sin psi], mu = softplus
// GOAT differs from the CPU lanes only in how u(j) is carried: the CPU puts u in one lane
// against q' = sqrt(d_h) and a zero pad lane; here q' has 1 in both lanes and k' holds
// sqrt(d_h) u split into a bf16 head and a bf16 tail (the pad lane), so the logit gets u
// to ~2^-16 relative instead of bf16's 2^-9 (u = lambda j grows with the position). The
// logit is the same function; only the rounding is better.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/attention/cuda/api/element_kernels.hpp"
#include "kernels/attention/cuda/api/lane_kernels.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"

namespace lcr::cuda::lanes {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr double kTwoPi = 6.283185307179586;

// The CPU's kmath forms (kernels/attention/kokkos/math.hpp), in float.
__device__ __forceinline__ float softplus_f(float x) {
  return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

__global__ void trig_table_kernel(TrigSpec spec, int64_t pos0, int L, float2* out) {
  const int64_t n = int64_t(L) * spec.M;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int t = int(e / spec.M), m = int(e % spec.M);
    const int64_t p = pos0 + t;
    const int ax = spec.axis[m];
    const int64_t c = ax == 1 ? p / spec.grid_w : ax == 2 ? p % spec.grid_w : p;
    double sn, cs;
    sincos(spec.freq[m] * double(c), &sn, &cs);
    out[e] = make_float2(float(cs), float(sn));
  }
}

// (cos, sin) of the phase of PoPE channel c at table row t (queries: p theta; keys:
// p theta + clamp(delta), by the angle-addition formula on float tables).
__device__ __forceinline__ float2 pope_phase(const RowLaneArgs& a, int t, int h, int c) {
  const float2 p = a.trig[int64_t(t) * a.M + c];
  if (a.is_query) return p;
  const float2 dl = a.delta_trig[h * a.d + c];
  return make_float2(p.x * dl.x - p.y * dl.y, p.y * dl.x + p.x * dl.y);
}

// softplus(x) and sigmoid(x) = softplus'(x) from one exponential z = exp(-|x|): the kmath
// forms (softplus_f above; sigmoid x >= 0 ? 1 / (1 + e^-x) : e^x / (1 + e^x)) bit for bit.
__device__ __forceinline__ void softplus_sigmoid(float x, float& sp, float& sg) {
  const float z = expf(-fabsf(x));
  sp = fmaxf(x, 0.f) + log1pf(z);
  sg = x >= 0.f ? 1.f / (1.f + z) : z / (1.f + z);
}

// The phases of PoPE channels c0 .. c0 + 7 at table row t (1 past d). vec: d % 8 == 0 and
// both tables 16-byte aligned, so a whole chunk's entries are four 16-byte loads per table.
__device__ __forceinline__ void pope_phases(const RowLaneArgs& a, int t, int h, int c0, bool vec,
                                            float2 (&ph)[8]) {
  if (vec) {
    const float4* tq = reinterpret_cast<const float4*>(a.trig + int64_t(t) * a.M + c0);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float4 v = __ldg(tq + k);
      ph[2 * k] = make_float2(v.x, v.y), ph[2 * k + 1] = make_float2(v.z, v.w);
    }
    if (a.is_query) return;
    const float4* td = reinterpret_cast<const float4*>(a.delta_trig + h * a.d + c0);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float4 v = __ldg(td + k);
      const float2 dl[2] = {make_float2(v.x, v.y), make_float2(v.z, v.w)};
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float2 p = ph[2 * k + j];
        ph[2 * k + j] = make_float2(p.x * dl[j].x - p.y * dl[j].y, p.y * dl[j].x + p.x * dl[j].y);
      }
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e)
    ph[e] = c0 + e < a.d ? pope_phase(a, t, h, c0 + e) : make_float2(1.f, 0.f);
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16(lo))) |
         uint32_t(__bfloat16_as_ushort(__float2bfloat16(hi))) << 16;
}

// One thread's PoPE output: channels c0 .. c0 + 7 of the (normed) row in v, written as the
// real lanes [c0, c0 + 8) and the imaginary lanes [d + c0, d + c0 + 8), two 16-byte stores
// when vec (d % 8 == 0 and y 16-byte aligned), else element by element; thread 0 of the row
// zeroes the padding lanes [2d, dp).
__device__ __forceinline__ void pope_store(const RowLaneArgs& a, __nv_bfloat16* y, int64_t row,
                                           int c0, const float (&v)[8], int t, int h, bool vec,
                                           bool vec_trig) {
  float2 ph[8];
  pope_phases(a, t, h, c0, vec_trig, ph);
  float mu[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) mu[e] = softplus_f(v[e]);
  __nv_bfloat16* dst = y + row * a.dp;
  if (vec) {
    uint4 re, im;
    re.x = pack_bf16x2(mu[0] * ph[0].x, mu[1] * ph[1].x);
    re.y = pack_bf16x2(mu[2] * ph[2].x, mu[3] * ph[3].x);
    re.z = pack_bf16x2(mu[4] * ph[4].x, mu[5] * ph[5].x);
    re.w = pack_bf16x2(mu[6] * ph[6].x, mu[7] * ph[7].x);
    im.x = pack_bf16x2(mu[0] * ph[0].y, mu[1] * ph[1].y);
    im.y = pack_bf16x2(mu[2] * ph[2].y, mu[3] * ph[3].y);
    im.z = pack_bf16x2(mu[4] * ph[4].y, mu[5] * ph[5].y);
    im.w = pack_bf16x2(mu[6] * ph[6].y, mu[7] * ph[7].y);
    *reinterpret_cast<uint4*>(dst + c0) = re;
    *reinterpret_cast<uint4*>(dst + a.d + c0) = im;
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (c0 + e < a.d) {
      dst[c0 + e] = __float2bfloat16(mu[e] * ph[e].x);
      dst[a.d + c0 + e] = __float2bfloat16(mu[e] * ph[e].y);
    }
  if (c0 == 0)
    for (int o = 2 * a.d; o < a.dp; ++o) dst[o] = __float2bfloat16(0.f);
}

// Output lane o of one row of RoPE: xs holds the (normed) input row of width d (a lane may
// read any of it). Copy, GOAT and PoPE lanes are formed in lanes_fwd_kernel itself.
__device__ __forceinline__ __nv_bfloat16 rope_out(const RowLaneArgs& a, const float* xs, int o,
                                                  int t) {
  if (o >= a.d) return __float2bfloat16(0.f);
  if (o >= a.rotary) return __float2bfloat16(a.pass_scale * xs[o]);
  const int half = a.rotary / 2;
  const int m = a.interleaved ? o / 2 : (o < half ? o : o - half);
  const int ia = a.interleaved ? 2 * m : m, ib = a.interleaved ? 2 * m + 1 : m + half;
  const float2 cs = a.trig[int64_t(t) * a.M + m];
  const float xa = xs[ia], xb = xs[ib];
  return __float2bfloat16(a.scale * (o == ia ? xa * cs.x - xb * cs.y : xa * cs.y + xb * cs.x));
}

// Sum over the TPR threads of a row group (every thread of the warp calls it).
template <int TPR>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = TPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// How a row's bf16 input elements are read: 16-byte vectors when d % 8 == 0, 4-byte pairs
// when d is even (GOAT's d_c = head_dim - 2R - 2 is even but not a multiple of 8), else
// one element at a time; the launcher checks the base pointer's alignment.
enum class RowRead : int { Scalar = 0, Pairs = 1, Vector = 2 };
RowRead row_read(const __nv_bfloat16* x, int d) {
  const auto p = reinterpret_cast<uintptr_t>(x);
  if (d % 8 == 0 && p % 16 == 0) return RowRead::Vector;
  if (d % 2 == 0 && p % 4 == 0) return RowRead::Pairs;
  return RowRead::Scalar;
}

// The same classes for an fp32 row of width d written in chunks of 8 (16-byte halves).
RowRead grad_write(const float* dx, int d) {
  const auto p = reinterpret_cast<uintptr_t>(dx);
  if (d % 4 == 0 && p % 16 == 0) return RowRead::Vector;
  if (d % 2 == 0 && p % 8 == 0) return RowRead::Pairs;
  return RowRead::Scalar;
}

// Input elements 8c .. 8c + 7 of a row as raw bf16 bits (element e in the low half of w[e/2]
// for even e), 0 past d and for a dead row. Kept raw so that the forward can hold the next
// row's chunk in registers while it works on this one.
struct RawChunk {
  uint32_t w[4];
};
__device__ __forceinline__ RawChunk fetch_chunk(const __nv_bfloat16* x, int d, int64_t row, int c,
                                                bool live, RowRead rd) {
  RawChunk r = {{0u, 0u, 0u, 0u}};
  const int c0 = 8 * c;
  if (!live || c0 >= d) return r;
  const __nv_bfloat16* src = x + row * d + c0;
  if (rd == RowRead::Vector) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(src));
    r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
  } else if (rd == RowRead::Pairs) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (c0 + 2 * e < d) r.w[e] = __ldg(reinterpret_cast<const uint32_t*>(src) + e);
  } else {
    const auto* bits = reinterpret_cast<const unsigned short*>(src);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (c0 + e < d) r.w[e / 2] |= uint32_t(__ldg(bits + e)) << (16 * (e % 2));
  }
  return r;
}
__device__ __forceinline__ void unpack_chunk(const RawChunk& r, float (&v)[8]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    v[2 * e] = __uint_as_float(r.w[e] << 16);
    v[2 * e + 1] = __uint_as_float(r.w[e] & 0xffff0000u);
  }
}

// 1 / rms of a row whose chunk this thread holds in v (QK-RMSNorm; 1 without it). Every
// thread of the warp calls it.
template <bool kNorm, int TPR>
__device__ __forceinline__ float row_inv_rms(const RowLaneArgs& a, const float (&v)[8]) {
  if (!kNorm) return 1.f;
  float ss = 0.f;
#pragma unroll
  for (int e = 0; e < 8; ++e) ss += v[e] * v[e];
  return 1.f / sqrtf(group_sum<TPR>(ss) / float(a.d) + a.eps);
}

// (head, position) of row (b L + t) Hx + h; 32-bit division while the row index fits.
__device__ __forceinline__ void row_coords(int64_t row, int Hx, int L, int& h, int& t) {
  if (row <= int64_t(UINT32_MAX)) {
    const uint32_t r = uint32_t(row), q = r / uint32_t(Hx);
    h = int(r - q * uint32_t(Hx));
    t = int(q % uint32_t(L));
  } else {
    h = int(row % Hx);
    t = int((row / Hx) % L);
  }
}

// Forward rows in groups of TPR threads (TPR a power of two with 8 TPR >= max(d, dp), PoPE:
// >= d): thread c of a group loads input elements [8c, 8c + 8) and writes output lanes
// [8c, 8c + 8) as one 16-byte store (PoPE: the channels' real and imaginary lanes, two); a warp
// handles 32 / TPR consecutive rows (heads of a position are adjacent in [B, L, Hx, d], so a warp
// reads and writes contiguous memory). The grid is sized to the GPU (a few blocks per SM) and
// strides over the rows, each thread loading its next row's chunk before it works on the current
// one. The kernel is issue-bound rather than bandwidth-bound (docs/cuda.md, "GOAT's passes"): Copy,
// GOAT and PoPE rows stay in registers (PoPE's channel c gives lanes c and d + c, both from the
// thread that holds x_c) and GOAT's prior lanes go in a second pass over the warp; RoPE rows go
// through shared memory because a lane can read any input element (the half-split partner).
template <LaneKind K, bool kNorm, int TPR>
__global__ void __launch_bounds__(kWarps * 32)
    lanes_fwd_kernel(RowLaneArgs a, __nv_bfloat16* y, int64_t rows, bool y_aligned, RowRead rd,
                     bool vec_trig) {
  constexpr int RPW = 32 / TPR;                   // rows per warp and pass
  __shared__ float xs_all[kWarps][kMaxRowWidth];  // RPW rows of 8 TPR floats per warp
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int sub = lane / TPR, c = lane % TPR;
  float* xs = xs_all[warp] + sub * 8 * TPR;
  const int64_t stride = int64_t(gridDim.x) * kWarps * RPW;
  int64_t base = (int64_t(blockIdx.x) * kWarps + warp) * RPW;
  RawChunk next = fetch_chunk(a.x, a.d, base + sub, c, base + sub < rows, rd);
  for (; base < rows; base += stride) {  // uniform over the warp
    const int64_t row = base + sub;      // = (b L + t) Hx + h
    const bool live = row < rows;
    float v[8];
    unpack_chunk(next, v);
    next = fetch_chunk(a.x, a.d, row + stride, c, row + stride < rows, rd);
    // Copy, GOAT and PoPE lanes read only the thread's own inputs (GOAT's prior lanes: below).
    constexpr bool kOwn = K != LaneKind::Rope;
    int h = 0, t = 0;
    if constexpr (K == LaneKind::Rope || K == LaneKind::Pope) row_coords(row, a.Hx, a.L, h, t);
    const float inv = row_inv_rms<kNorm, TPR>(a, v);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (kNorm && 8 * c + e < a.d) v[e] *= inv * a.gain[8 * c + e];
    if (!kOwn) {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (8 * c + e < a.d) xs[8 * c + e] = v[e];
      __syncwarp();
    }
    auto out = [&](int e) {
      const int o = 8 * c + e;
      if constexpr (K == LaneKind::Copy)
        return __float2bfloat16(o < a.d ? v[e] : 0.f);
      else if constexpr (K == LaneKind::Goat)  // content lanes; the prior lanes below
        return __float2bfloat16(o < a.d ? a.scale * v[e] : 0.f);
      else
        return rope_out(a, xs, o, t);
    };
    if constexpr (K == LaneKind::Pope) {
      if (live && 8 * c < a.d)
        pope_store(a, y, row, 8 * c, v, t, h, y_aligned && rd == RowRead::Vector, vec_trig);
    } else if (live && 8 * c < a.dp) {
      uint32_t pk[4];  // lanes 8c .. 8c + 7 as bf16 pairs (no local array: it went to the stack)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        pk[e] = uint32_t(__bfloat16_as_ushort(out(2 * e))) |
                uint32_t(__bfloat16_as_ushort(out(2 * e + 1))) << 16;
      __nv_bfloat16* dst = y + row * a.dp + 8 * c;  // dp is a multiple of 8
      if (y_aligned) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(pk[0], pk[1], pk[2], pk[3]);
      } else {
        auto* bits = reinterpret_cast<unsigned short*>(dst);
#pragma unroll
        for (int e = 0; e < 8; ++e) bits[e] = (unsigned short)(pk[e / 2] >> (16 * (e % 2)));
      }
    }
    if constexpr (K == LaneKind::Goat) {
      // GOAT's 2R + 2 prior lanes of the warp's RPW rows (written as zeros above) from the
      // table of (position, head) (goat_prior_table), spread over the warp. __syncwarp
      // orders these 2-byte stores after the chunk stores.
      __syncwarp();
      const int np = 2 * a.R + 2;
      const int64_t LH = int64_t(a.L) * a.Hx;
      for (int item = lane; item < RPW * np; item += 32) {
        const int64_t rr = base + item / np;
        if (rr >= rows) break;
        y[rr * a.dp + a.d + item % np] = a.prior[(rr % LH) * np + item % np];
      }
    }
    if (!kOwn) __syncwarp();  // xs is rewritten by the next pass
  }
}

// d loss / d xn_c (xn the normed input) from the lane gradients dys of one row at table
// row t (Copy, RoPE, GOAT; PoPE's are formed in registers in lanes_bwd_kernel).
template <LaneKind K>
__device__ __forceinline__ float lane_grad(const RowLaneArgs& a, const float* dys, int c, int t) {
  if (K == LaneKind::Copy) return dys[c];
  if (K == LaneKind::Rope) {
    if (c >= a.rotary) return a.pass_scale * dys[c];
    const int half = a.rotary / 2;
    const int m = a.interleaved ? c / 2 : (c < half ? c : c - half);
    const int ia = a.interleaved ? 2 * m : m, ib = a.interleaved ? 2 * m + 1 : m + half;
    const float2 cs = a.trig[int64_t(t) * a.M + m];
    // R(p)^T: the rotation by -p.
    return a.scale * (c == ia ? dys[ia] * cs.x + dys[ib] * cs.y : -dys[ia] * cs.y + dys[ib] * cs.x);
  }
  return a.scale * dys[c];  // GOAT's content lanes
}

// Writes one partial row per block from per-thread accumulators of columns 8c .. 8c + 7
// (c = lane % TPR): summed over the warp's groups (butterfly over the lanes with the same
// c), then over the warps in order. red: kWarps rows of kMaxRowWidth floats.
template <int TPR>
__device__ void write_partial(float (*red)[kMaxRowWidth], const float* acc, int cols,
                              float* part_row) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, c = lane % TPR;
  float v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    v[e] = acc[e];
#pragma unroll
    for (int o = TPR; o < 32; o <<= 1) v[e] += __shfl_xor_sync(kFull, v[e], o);
  }
  __syncthreads();
  if (lane < TPR)
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (8 * c + e < cols) red[warp][8 * c + e] = v[e];
  __syncthreads();
  for (int col = threadIdx.x; col < cols; col += blockDim.x) {
    float sum = 0.f;
    for (int w = 0; w < kWarps; ++w) sum += red[w][col];
    part_row[col] = sum;
  }
}

// Lane gradients 8c .. 8c + 7 of a row of dy [rows, dp] (fp32, row stride dp), of the
// `width` lanes from dy's first (PoPE's imaginary half: dy + d, width d): two 16-byte loads
// when vec (dy 16-byte aligned) and the chunk is whole, else scalars; 0 past width and for a
// dead row.
__device__ __forceinline__ void load_grad_chunk(const float* dy, int dp, int width, int64_t row,
                                                int c, bool live, bool vec, float (&v)[8]) {
  const int c0 = 8 * c;
  if (live && c0 + 8 <= width && vec) {
    const float4* src = reinterpret_cast<const float4*>(dy + row * dp + c0);
    const float4 lo = __ldg(src), hi = __ldg(src + 1);
    v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z,
    v[7] = hi.w;
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = live && c0 + e < width ? dy[row * dp + c0 + e] : 0.f;
}
// The same from bf16 lane gradients (cuDNN's d q', d k'): one 16-byte load per chunk.
__device__ __forceinline__ void load_grad_chunk(const __nv_bfloat16* dy, int dp, int width,
                                                int64_t row, int c, bool live, bool vec,
                                                float (&v)[8]) {
  const int c0 = 8 * c;
  if (live && c0 + 8 <= width && vec) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(dy + row * dp + c0));
    unpack_chunk(RawChunk{{u.x, u.y, u.z, u.w}}, v);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; ++e)
    v[e] = live && c0 + e < width ? __bfloat162float(dy[row * dp + c0 + e]) : 0.f;
}

// Elements 8c .. 8c + 7 of a row of dx [rows, d] (fp32): 16-byte stores when d % 4 == 0,
// 8-byte pairs when d is even (GOAT's d_c), else scalars (wr from grad_write).
__device__ __forceinline__ void store_grad_chunk(float* dx, int d, int64_t row, int c, bool live,
                                                 RowRead wr, const float (&v)[8]) {
  const int c0 = 8 * c;
  if (!live || c0 >= d) return;
  float* dst = dx + row * d + c0;
  if (wr == RowRead::Vector) {  // d % 4 == 0: the second half exists unless c0 + 4 == d
    reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
    if (c0 + 4 < d) reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else if (wr == RowRead::Pairs) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (c0 + 2 * e < d) reinterpret_cast<float2*>(dst)[e] = make_float2(v[2 * e], v[2 * e + 1]);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (c0 + e < d) dst[e] = v[e];
  }
}

// Backward rows in groups of TPR threads like the forward, thread c owning input columns
// (and GOAT query modes) 8c .. 8c + 7. Block (chunk, h) keeps the partial-row layout
// [chunks, Hx, cols]: a group takes one position of the chunk at a time and walks its B
// batch rows in order (GOAT's du(j) sums them), the block's groups covering the chunk's
// kPositions positions in passes. The input row stays in the thread's registers; the lane
// gradients go through shared memory where a column needs other threads' lanes (RoPE's
// partner, GOAT's prior lanes). PoPE's thread also loads its channels' imaginary lanes
// [d + 8c, d + 8c + 8) (dy_vec_im: that half is 16-byte aligned) and works in registers.
template <LaneKind K, bool kNorm, int TPR, class DyT>
__global__ void __launch_bounds__(kWarps * 32)
    lanes_bwd_kernel(RowLaneArgs a, RowLaneGrads g, const DyT* dy, RowRead rd, bool dy_vec,
                     bool dy_vec_im, bool vec_trig, RowRead wr) {
  constexpr int RPW = 32 / TPR, kGroups = kWarps * RPW;
  constexpr bool kPope = K == LaneKind::Pope;
  __shared__ float red_all[kWarps][kMaxRowWidth];  // write_partial's scratch
  __shared__ float dys_all[kWarps][kPope ? 1 : kMaxRowWidth];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, h = blockIdx.y;
  const int sub = lane / TPR, c = lane % TPR;
  float* dys = dys_all[warp] + (kPope ? 0 : sub * 8 * TPR);
  constexpr bool kNeedX = kNorm || kPope;
  const bool goat_q = K == LaneKind::Goat && a.is_query && g.mode_part;
  const bool goat_k = K == LaneKind::Goat && !a.is_query && g.du;
  const bool pope_k = K == LaneKind::Pope && !a.is_query && g.delta_part;
  float gacc[8], pacc[8], pacc2[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) gacc[e] = pacc[e] = pacc2[e] = 0.f;
  const int t0 = blockIdx.x * kPositions, npos = min(kPositions, a.L - t0);

  // Rows in order (pass, batch row), the next one's loads issued before this one's work.
  const int n_iter = (npos + kGroups - 1) / kGroups * a.B;  // uniform over the block
  auto locate = [&](int k, bool& live, int& t) {
    const int pi = k / a.B * kGroups + warp * RPW + sub;
    live = pi < npos;
    t = t0 + pi;
    return (int64_t(k % a.B) * a.L + t) * a.Hx + h;
  };
  // PoPE keys: the clamp's mask of the thread's channels, out of the row loop (one global
  // load per element and row before).
  bool in_clamp[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int col = 8 * c + e;
    in_clamp[e] = false;
    if (pope_k && col < a.d) {
      const double dl = double(a.delta[h * a.d + col]);
      in_clamp[e] = dl >= -kTwoPi && dl <= 0.0;
    }
  }
  // PoPE: a row's phases of the thread's channels, loaded one row ahead like its lanes
  // (a faster lanes_bwd at 1x16x16384x64). For RoPE's pairs and GOAT's modes the same is no
  // faster and can be slower (more registers, fewer blocks per SM): they load in the loop.
  auto load_phases = [&](int t, bool live, float2(&ph)[8]) {
    if constexpr (kPope) {
      if (live && 8 * c < a.d) pope_phases(a, t, h, 8 * c, vec_trig, ph);
    }
  };
  // Lanes of the thread's chunk: PoPE reads the real parts [0, d) here, the imaginary below.
  const int width = kPope ? a.d : a.dp;
  float dy_next[8], di_next[8] = {};
  float2 ph_next[8] = {};
  RawChunk x_next = {{0u, 0u, 0u, 0u}};
  {
    bool l0;
    int t_0;
    const int64_t r0 = locate(0, l0, t_0);
    load_grad_chunk(dy, a.dp, width, r0, c, l0 && n_iter > 0, dy_vec, dy_next);
    if (kPope) load_grad_chunk(dy + a.d, a.dp, a.d, r0, c, l0 && n_iter > 0, dy_vec_im, di_next);
    if (kNeedX) x_next = fetch_chunk(a.x, a.d, r0, c, l0 && n_iter > 0, rd);
    load_phases(t_0, l0 && n_iter > 0, ph_next);
  }
  float du_acc = 0.f;
  for (int k = 0; k < n_iter; ++k) {
    bool live;
    int t;
    const int64_t row = locate(k, live, t);
    float dyv[8], div[8], xv[8] = {}, inv = 1.f;
    float2 ph[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) dyv[e] = dy_next[e], div[e] = di_next[e], ph[e] = ph_next[e];
    if constexpr (kNeedX) {
      unpack_chunk(x_next, xv);
      inv = row_inv_rms<kNorm, TPR>(a, xv);
    }
    if (k + 1 < n_iter) {
      bool ln;
      int tn;
      const int64_t rn = locate(k + 1, ln, tn);
      load_grad_chunk(dy, a.dp, width, rn, c, ln, dy_vec, dy_next);
      if (kPope) load_grad_chunk(dy + a.d, a.dp, a.d, rn, c, ln, dy_vec_im, di_next);
      if (kNeedX) x_next = fetch_chunk(a.x, a.d, rn, c, ln, rd);
      load_phases(tn, ln, ph_next);
    }
    if constexpr (!kPope) {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (8 * c + e < a.dp) dys[8 * c + e] = dyv[e];
      __syncwarp();
    }
    float dxn[8], gdx = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int col = 8 * c + e;
      if constexpr (kPope) {
        // dmu = dre cos + dim sin, dx = dmu softplus'(x) = dmu sigmoid(x); keys: dpsi = mu (dim
        // cos psi - dre sin psi), which the clamp passes only inside its range.
        dxn[e] = 0.f;
        if (live && col < a.d) {
          const float xn = kNorm ? xv[e] * inv * a.gain[col] : xv[e];
          float mu, sg;
          softplus_sigmoid(xn, mu, sg);
          dxn[e] = (dyv[e] * ph[e].x + div[e] * ph[e].y) * sg;
          if (in_clamp[e]) pacc[e] += mu * (div[e] * ph[e].x - dyv[e] * ph[e].y);
        }
      } else {
        dxn[e] = live && col < a.d ? lane_grad<K>(a, dys, col, t) : 0.f;
      }
      if (kNorm && col < a.d) gdx += a.gain[col] * dxn[e] * xv[e];
      if (goat_q && live && col < a.R) {
        const float2 cs = a.trig[int64_t(t) * a.M + col];
        const float g0 = dys[a.d + 2 * col], g1 = dys[a.d + 2 * col + 1];
        pacc[e] += g0 * cs.x + g1 * cs.y;
        pacc2[e] += g0 * cs.y - g1 * cs.x;
      }
    }
    if (goat_k) {
      // Both u lanes carry the same gradient (q' = 1 in both); k'_hi + k'_lo = sqrt(d_h) u.
      const int lu = a.d + 2 * a.R;
      du_acc += 0.5f * (dys[lu] + dys[lu + 1]) * float(a.u_scale);
    }
    if (kNorm) {
      // dx = gain dxn / r - x <gain dxn, x> / (d r^3); d gain += dxn x / r.
      gdx = group_sum<TPR>(gdx);
      const float k3 = gdx * inv * inv * inv / float(a.d);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int col = 8 * c + e;
        if (!live || col >= a.d) continue;
        gacc[e] += dxn[e] * xv[e] * inv;
        dxn[e] = a.gain[col] * dxn[e] * inv - xv[e] * k3;
      }
    }
    store_grad_chunk(g.dx, a.d, row, c, live, wr, dxn);
    if (k % a.B == a.B - 1) {  // the position's last batch row: du(t) summed over b
      if (goat_k && live && c == 0) g.du[int64_t(t) * a.Hx + h] = du_acc;
      du_acc = 0.f;
    }
    __syncwarp();  // dys is rewritten by the next row
  }

  const int64_t prow = int64_t(blockIdx.x) * a.Hx + h;
  if (kNorm && g.gain_part) write_partial<TPR>(red_all, gacc, a.d, g.gain_part + prow * a.d);
  if (pope_k) write_partial<TPR>(red_all, pacc, a.d, g.delta_part + prow * a.d);
  if (goat_q) {
    float* part_row = g.mode_part + prow * 2 * a.R;
    write_partial<TPR>(red_all, pacc, a.R, part_row);
    write_partial<TPR>(red_all, pacc2, a.R, part_row + a.R);
  }
}

// Threads per row of the row kernels: 8 TPR >= max(d, dp) (PoPE: >= d, a thread writes its
// channels' real and imaginary lanes), at least 4.
int threads_per_row(const RowLaneArgs& a) {
  const int chunks = ((a.kind == LaneKind::Pope ? a.d : std::max(a.d, a.dp)) + 7) / 8;
  return chunks <= 4 ? 4 : chunks <= 8 ? 8 : chunks <= 16 ? 16 : 32;
}

// Whether PoPE's position and delta tables can be read in 16-byte pairs (pope_phases).
bool pope_vec_tables(const RowLaneArgs& a) {
  auto al = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  return a.kind == LaneKind::Pope && a.d % 8 == 0 && a.M == a.d && al(a.trig) &&
         (a.is_query || al(a.delta_trig));
}

// Resident blocks of the row kernels on this GPU: the forward's grid (rows are strided).
int resident_blocks() {
  int dev = 0, sms = 0;
  LCR_CUDA_CHECK(cudaGetDevice(&dev));
  LCR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms * (2048 / (kWarps * 32));
}

template <LaneKind K, bool kNorm>
void launch_fwd(const RowLaneArgs& a, __nv_bfloat16* y, cudaStream_t s) {
  const int tpr = threads_per_row(a);
  const int64_t rows = int64_t(a.B) * a.L * a.Hx;
  const bool aligned = (reinterpret_cast<uintptr_t>(y) & 15u) == 0;
  const RowRead rd = row_read(a.x, a.d);
  const bool vt = pope_vec_tables(a);
  const int th = kWarps * 32;
  auto go = [&](auto kernel, int tpr) {
    const int64_t per_block = int64_t(kWarps) * (32 / tpr);
    const int blocks =
        int(std::min<int64_t>((rows + per_block - 1) / per_block, resident_blocks()));
    kernel<<<blocks, th, 0, s>>>(a, y, rows, aligned, rd, vt);
  };
  if (tpr == 4)
    go(lanes_fwd_kernel<K, kNorm, 4>, 4);
  else if (tpr == 8)
    go(lanes_fwd_kernel<K, kNorm, 8>, 8);
  else if (tpr == 16)
    go(lanes_fwd_kernel<K, kNorm, 16>, 16);
  else
    go(lanes_fwd_kernel<K, kNorm, 32>, 32);
  LCR_CUDA_CHECK_LAUNCH();
}

template <bool kNorm>
void launch_fwd(const RowLaneArgs& a, __nv_bfloat16* y, cudaStream_t s) {
  switch (a.kind) {
    case LaneKind::Copy:
      launch_fwd<LaneKind::Copy, kNorm>(a, y, s);
      break;
    case LaneKind::Rope:
      launch_fwd<LaneKind::Rope, kNorm>(a, y, s);
      break;
    case LaneKind::Goat:
      launch_fwd<LaneKind::Goat, kNorm>(a, y, s);
      break;
    case LaneKind::Pope:
      launch_fwd<LaneKind::Pope, kNorm>(a, y, s);
      break;
  }
}

template <LaneKind K, bool kNorm, class DyT>
void launch_bwd(const RowLaneArgs& a, const RowLaneGrads& g, const DyT* dy, dim3 grid,
                cudaStream_t s) {
  const int th = kWarps * 32;
  const RowRead rd = row_read(a.x, a.d), wr = grad_write(g.dx, a.d);
  const bool dy_vec = (reinterpret_cast<uintptr_t>(dy) & 15u) == 0;  // dp % 8 == 0
  // PoPE's imaginary half starts d elements in: aligned when d elements are 16 bytes' worth.
  const bool dy_vec_im = dy_vec && (a.d * sizeof(DyT)) % 16 == 0, vt = pope_vec_tables(a);
  switch (threads_per_row(a)) {
    case 4:
      lanes_bwd_kernel<K, kNorm, 4><<<grid, th, 0, s>>>(a, g, dy, rd, dy_vec, dy_vec_im, vt, wr);
      break;
    case 8:
      lanes_bwd_kernel<K, kNorm, 8><<<grid, th, 0, s>>>(a, g, dy, rd, dy_vec, dy_vec_im, vt, wr);
      break;
    case 16:
      lanes_bwd_kernel<K, kNorm, 16><<<grid, th, 0, s>>>(a, g, dy, rd, dy_vec, dy_vec_im, vt, wr);
      break;
    default:
      lanes_bwd_kernel<K, kNorm, 32><<<grid, th, 0, s>>>(a, g, dy, rd, dy_vec, dy_vec_im, vt, wr);
  }
  LCR_CUDA_CHECK_LAUNCH();
}

template <LaneKind K, bool kNorm>
void launch_bwd(const RowLaneArgs& a, const RowLaneGrads& g, dim3 grid, cudaStream_t s) {
  if (g.dy16)
    launch_bwd<K, kNorm>(a, g, g.dy16, grid, s);
  else
    launch_bwd<K, kNorm>(a, g, g.dy, grid, s);
}

template <bool kNorm>
void launch_bwd(const RowLaneArgs& a, const RowLaneGrads& g, dim3 grid, cudaStream_t s) {
  switch (a.kind) {
    case LaneKind::Copy:
      launch_bwd<LaneKind::Copy, kNorm>(a, g, grid, s);
      break;
    case LaneKind::Rope:
      launch_bwd<LaneKind::Rope, kNorm>(a, g, grid, s);
      break;
    case LaneKind::Goat:
      launch_bwd<LaneKind::Goat, kNorm>(a, g, grid, s);
      break;
    case LaneKind::Pope:
      launch_bwd<LaneKind::Pope, kNorm>(a, g, grid, s);
      break;
  }
}

constexpr int kReduceThreads = 256;

// One block per output element: the threads stride the (chunk, head) items, then a tree.
__global__ void __launch_bounds__(kReduceThreads)
    reduce_partials_kernel(const float* part, int chunks, int Hx, int stride, int col0, int ncols,
                           bool sum_heads, double out_scale, float* out) {
  __shared__ double red[kReduceThreads];
  const int e = blockIdx.x, c = e % ncols;
  const int h0 = sum_heads ? 0 : e / ncols, nh = sum_heads ? Hx : 1;
  double acc = 0;
  for (int k = threadIdx.x; k < chunks * nh; k += kReduceThreads) {
    const int chunk = k / nh, h = h0 + k % nh;
    acc += part[(int64_t(chunk) * Hx + h) * stride + col0 + c];
  }
  red[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kReduceThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[e] += float(out_scale * red[0]);
}

}  // namespace

void trig_table(const TrigSpec& spec, int64_t pos0, int L, float2* out, cudaStream_t s) {
  const int64_t n = int64_t(L) * spec.M;
  if (n == 0) return;
  const int blocks = int(std::min<int64_t>((n + 255) / 256, 4096));
  trig_table_kernel<<<blocks, 256, 0, s>>>(spec, pos0, L, out);
  LCR_CUDA_CHECK_LAUNCH();
}

void lanes_forward(const RowLaneArgs& a, __nv_bfloat16* y, cudaStream_t s) {
  if (a.B == 0 || a.L == 0 || a.Hx == 0) return;
  if (a.kind == LaneKind::Goat) {
    require(a.prior, "lanes_forward: GOAT needs the prior-lane scratch (RowLaneArgs::prior)");
    goat_prior_table(a, s);
  }
  if (element_forward_ok(a, y)) return concat_lanes(a, y, s);
  if (a.gain)
    launch_fwd<true>(a, y, s);
  else
    launch_fwd<false>(a, y, s);
}

void lanes_backward(const RowLaneArgs& a, const RowLaneGrads& g, cudaStream_t s) {
  if (a.B == 0 || a.L == 0 || a.Hx == 0) return;
  if (element_backward_ok(a, g)) {
    narrow_grads(a, g, s);
    if (a.kind == LaneKind::Goat) goat_prior_grads(a, g, s);
    return;
  }
  const dim3 grid(position_chunks(a.L), a.Hx);
  if (a.gain)
    launch_bwd<true>(a, g, grid, s);
  else
    launch_bwd<false>(a, g, grid, s);
}

void reduce_partials(const float* part, int chunks, int Hx, int stride, int col0, int ncols,
                     bool sum_heads, double out_scale, float* out, cudaStream_t s) {
  const int n = sum_heads ? ncols : Hx * ncols;
  if (n == 0 || chunks == 0) return;
  reduce_partials_kernel<<<n, kReduceThreads, 0, s>>>(part, chunks, Hx, stride, col0, ncols,
                                                      sum_heads, out_scale, out);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::lanes
