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

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/lanes/lane_kernels.hpp"

namespace lcr::cuda::lanes {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr double kTwoPi = 6.283185307179586;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}
// The CPU's kmath forms (kernels/attention/kokkos/math.hpp), in float.
__device__ __forceinline__ float softplus_f(float x) {
  return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}
__device__ __forceinline__ float sigmoid_f(float x) {
  return x >= 0.f ? 1.f / (1.f + expf(-x)) : expf(x) / (1.f + expf(x));
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

// Output lane o of one row: xs holds the (normed) input row of width d.
template <LaneKind K>
__device__ __forceinline__ __nv_bfloat16 lane_out(const RowLaneArgs& a, const float* xs, int o,
                                                  int t, int h) {
  if (K == LaneKind::Copy) return __float2bfloat16(o < a.d ? xs[o] : 0.f);
  if (K == LaneKind::Rope) {
    if (o >= a.d) return __float2bfloat16(0.f);
    if (o >= a.rotary) return __float2bfloat16(a.scale * xs[o]);
    const int half = a.rotary / 2;
    const int m = a.interleaved ? o / 2 : (o < half ? o : o - half);
    const int ia = a.interleaved ? 2 * m : m, ib = a.interleaved ? 2 * m + 1 : m + half;
    const float2 cs = a.trig[int64_t(t) * a.M + m];
    const float xa = xs[ia], xb = xs[ib];
    return __float2bfloat16(a.scale * (o == ia ? xa * cs.x - xb * cs.y : xa * cs.y + xb * cs.x));
  }
  if (K == LaneKind::Goat) {
    const int dc = a.d, R = a.R;
    if (o < dc) return __float2bfloat16(a.scale * xs[o]);
    if (o < dc + 2 * R) {
      const int r = (o - dc) / 2, which = (o - dc) % 2;
      const float2 cs = a.trig[int64_t(t) * a.M + r];
      if (!a.is_query) return __float2bfloat16(which == 0 ? cs.x : cs.y);
      const float al = a.alpha[h * R + r], be = a.beta[h * R + r];
      return __float2bfloat16(a.lane_scale *
                              (which == 0 ? al * cs.x + be * cs.y : al * cs.y - be * cs.x));
    }
    if (o < dc + 2 * R + 2) {
      if (a.is_query) return __float2bfloat16(1.f);
      const double U = a.u_scale * a.u[int64_t(t) * a.Hx + h];
      const __nv_bfloat16 hi = __float2bfloat16(float(U));
      if (o == dc + 2 * R) return hi;
      return __float2bfloat16(float(U - double(__bfloat162float(hi))));
    }
    return __float2bfloat16(0.f);
  }
  // PoPE: lanes [0, d) real parts, [d, 2d) imaginary parts.
  if (o >= 2 * a.d) return __float2bfloat16(0.f);
  const int c = o < a.d ? o : o - a.d;
  const float2 ph = pope_phase(a, t, h, c);
  const float mu = softplus_f(xs[c]);
  return __float2bfloat16(mu * (o < a.d ? ph.x : ph.y));
}

// The rows of one warp: block (chunk, h) owns positions t0 .. t0 + kPositions - 1 of head h
// for every batch row; warp w takes positions t0 + w, t0 + w + kWarps, ..., and for each
// the B batch rows in order (k-th row: position index w + kWarps (k / B), batch k % B).
struct WarpRows {
  int count = 0, t0 = 0, warp = 0;
  __device__ explicit WarpRows(const RowLaneArgs& a)
      : t0(blockIdx.x * kPositions), warp(threadIdx.x / 32) {
    const int npos = min(kPositions, a.L - t0);
    count = warp < npos ? (npos - warp + kWarps - 1) / kWarps * a.B : 0;
  }
  __device__ int position(const RowLaneArgs& a, int k) const {
    return t0 + warp + kWarps * (k / a.B);
  }
  __device__ int64_t row(const RowLaneArgs& a, int k) const {
    return (int64_t(k % a.B) * a.L + position(a, k)) * a.Hx + blockIdx.y;
  }
};

// Loads a row of width n (bf16 or fp32) into registers: lane owns elements lane + 32 s.
// Issued one row ahead of its use, so each warp keeps two rows of loads in flight.
template <class T>
__device__ __forceinline__ void load_regs(const T* src, int n, int lane, float* v) {
#pragma unroll
  for (int s = 0; s < kMaxPerLane; ++s) {
    const int c = lane + 32 * s;
    if constexpr (sizeof(T) == 2)
      v[s] = c < n ? __bfloat162float(src[c]) : 0.f;
    else
      v[s] = c < n ? src[c] : 0.f;
  }
}

// Stores the row held in registers into xs and returns 1/rms (1 without the norm).
template <bool kNorm>
__device__ __forceinline__ float stage_row(const RowLaneArgs& a, const float* v, float* xs,
                                           int lane) {
  float ss = 0.f;
#pragma unroll
  for (int s = 0; s < kMaxPerLane; ++s) {
    const int c = lane + 32 * s;
    if (c < a.d) xs[c] = v[s], ss += v[s] * v[s];
  }
  if (!kNorm) return 1.f;
  ss = warp_sum(ss);
  return 1.f / sqrtf(ss / float(a.d) + a.eps);
}

template <LaneKind K, bool kNorm>
__global__ void __launch_bounds__(kWarps * 32) lanes_fwd_kernel(RowLaneArgs a, __nv_bfloat16* y) {
  __shared__ float xs_all[kWarps][kMaxRowWidth];
  const int lane = threadIdx.x % 32, h = blockIdx.y;
  const WarpRows rows(a);
  float* xs = xs_all[rows.warp];
  float next[kMaxPerLane];
  if (rows.count > 0) load_regs(a.x + rows.row(a, 0) * a.d, a.d, lane, next);
  for (int k = 0; k < rows.count; ++k) {
    float cur[kMaxPerLane];
#pragma unroll
    for (int s = 0; s < kMaxPerLane; ++s) cur[s] = next[s];
    if (k + 1 < rows.count) load_regs(a.x + rows.row(a, k + 1) * a.d, a.d, lane, next);
    const int64_t row = rows.row(a, k);
    const int t = rows.position(a, k);
    const float inv = stage_row<kNorm>(a, cur, xs, lane);
    if (kNorm)
      for (int c = lane; c < a.d; c += 32) xs[c] = xs[c] * inv * a.gain[c];
    __syncwarp();
    __nv_bfloat16* yr = y + row * a.dp;
    for (int o = lane; o < a.dp; o += 32) yr[o] = lane_out<K>(a, xs, o, t, h);
    __syncwarp();  // xs is rewritten by the next row
  }
}

// d loss / d xn_c (xn the normed input) from the lane gradients dys of one row.
template <LaneKind K>
__device__ __forceinline__ float lane_grad(const RowLaneArgs& a, const float* dys, const float* xs,
                                           float inv, int c, int t, int h) {
  if (K == LaneKind::Copy) return dys[c];
  if (K == LaneKind::Rope) {
    if (c >= a.rotary) return a.scale * dys[c];
    const int half = a.rotary / 2;
    const int m = a.interleaved ? c / 2 : (c < half ? c : c - half);
    const int ia = a.interleaved ? 2 * m : m, ib = a.interleaved ? 2 * m + 1 : m + half;
    const float2 cs = a.trig[int64_t(t) * a.M + m];
    // R(p)^T: the rotation by -p.
    return a.scale * (c == ia ? dys[ia] * cs.x + dys[ib] * cs.y : -dys[ia] * cs.y + dys[ib] * cs.x);
  }
  if (K == LaneKind::Goat) return a.scale * dys[c];
  // PoPE: dmu = dre cos + dim sin, d x = dmu softplus'(x) = dmu sigmoid(x).
  const float2 ph = pope_phase(a, t, h, c);
  const float xn = a.gain ? xs[c] * inv * a.gain[c] : xs[c];
  return (dys[c] * ph.x + dys[a.d + c] * ph.y) * sigmoid_f(xn);
}

// Writes one partial row per block: the sum over warps (fixed order) of acc[warp][col].
__device__ void write_partial(float (*red)[kMaxRowWidth], const float* acc, int cols,
                              float* part_row) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
#pragma unroll
  for (int s = 0; s < kMaxPerLane; ++s)
    if (lane + 32 * s < cols) red[warp][lane + 32 * s] = acc[s];
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = 0.f;
    for (int w = 0; w < kWarps; ++w) v += red[w][c];
    part_row[c] = v;
  }
}

template <LaneKind K, bool kNorm>
__global__ void __launch_bounds__(kWarps * 32) lanes_bwd_kernel(RowLaneArgs a, RowLaneGrads g) {
  __shared__ float xs_all[kWarps][kMaxRowWidth];
  __shared__ float dys_all[kWarps][kMaxRowWidth];
  const int lane = threadIdx.x % 32, h = blockIdx.y;
  const WarpRows rows(a);
  float* xs = xs_all[rows.warp];
  float* dys = dys_all[rows.warp];
  constexpr bool kNeedX = kNorm || K == LaneKind::Pope;
  const bool goat_q = K == LaneKind::Goat && a.is_query && g.mode_part;
  const bool goat_k = K == LaneKind::Goat && !a.is_query && g.du;
  const bool pope_k = K == LaneKind::Pope && !a.is_query && g.delta_part;
  float gacc[kMaxPerLane], pacc[kMaxPerLane], pacc2[kMaxPerLane];
#pragma unroll
  for (int s = 0; s < kMaxPerLane; ++s) gacc[s] = pacc[s] = pacc2[s] = 0.f;

  // x (when needed) and dy of the next row are loaded while this one is processed.
  float next_x[kMaxPerLane], next_dy[kMaxPerLane];
  auto prefetch = [&](int k) {
    const int64_t row = rows.row(a, k);
    if (kNeedX) load_regs(a.x + row * a.d, a.d, lane, next_x);
    load_regs(g.dy + row * a.dp, a.dp, lane, next_dy);
  };
  if (rows.count > 0) prefetch(0);
  float du_acc = 0.f;
  for (int k = 0; k < rows.count; ++k) {
    float cur_x[kMaxPerLane];
#pragma unroll
    for (int s = 0; s < kMaxPerLane; ++s) {
      cur_x[s] = next_x[s];
      if (lane + 32 * s < a.dp) dys[lane + 32 * s] = next_dy[s];
    }
    if (k + 1 < rows.count) prefetch(k + 1);
    const int64_t row = rows.row(a, k);
    const int t = rows.position(a, k);
    const float inv = kNeedX ? stage_row<kNorm>(a, cur_x, xs, lane) : 1.f;
    __syncwarp();
    float dxn[kMaxPerLane];
    float gdx = 0.f;
#pragma unroll
    for (int s = 0; s < kMaxPerLane; ++s) {
      const int c = lane + 32 * s;
      dxn[s] = c < a.d ? lane_grad<K>(a, dys, xs, inv, c, t, h) : 0.f;
      if (kNorm && c < a.d) gdx += a.gain[c] * dxn[s] * xs[c];
      if (pope_k && c < a.d) {
        // dpsi = mu (dim cos psi - dre sin psi); the clamp passes it only inside range.
        const double dl = double(a.delta[h * a.d + c]);
        if (dl >= -kTwoPi && dl <= 0.0) {
          const float2 ph = pope_phase(a, t, h, c);
          const float xn = kNorm ? xs[c] * inv * a.gain[c] : xs[c];
          pacc[s] += softplus_f(xn) * (dys[a.d + c] * ph.x - dys[c] * ph.y);
        }
      }
      if (goat_q && c < a.R) {
        const float2 cs = a.trig[int64_t(t) * a.M + c];
        const float g0 = dys[a.d + 2 * c], g1 = dys[a.d + 2 * c + 1];
        pacc[s] += g0 * cs.x + g1 * cs.y;
        pacc2[s] += g0 * cs.y - g1 * cs.x;
      }
    }
    if (goat_k) {
      // Both u lanes carry the same gradient (q' = 1 in both); k'_hi + k'_lo = sqrt(d_h) u.
      // d u(j) sums the batch rows of position j, which this warp visits consecutively.
      const int lu = a.d + 2 * a.R;
      du_acc += 0.5f * (dys[lu] + dys[lu + 1]) * float(a.u_scale);
      if (k % a.B == a.B - 1) {
        if (lane == 0) g.du[int64_t(t) * a.Hx + h] = du_acc;
        du_acc = 0.f;
      }
    }
    float* dxr = g.dx + row * a.d;
    if (kNorm) {
      // dx = gain dxn / r - x <gain dxn, x> / (d r^3); d gain += dxn x / r.
      gdx = warp_sum(gdx);
      const float k3 = gdx * inv * inv * inv / float(a.d);
#pragma unroll
      for (int s = 0; s < kMaxPerLane; ++s) {
        const int c = lane + 32 * s;
        if (c >= a.d) continue;
        dxr[c] = a.gain[c] * dxn[s] * inv - xs[c] * k3;
        gacc[s] += dxn[s] * xs[c] * inv;
      }
    } else {
#pragma unroll
      for (int s = 0; s < kMaxPerLane; ++s)
        if (lane + 32 * s < a.d) dxr[lane + 32 * s] = dxn[s];
    }
    __syncwarp();  // xs, dys are rewritten by the next row
  }

  const int64_t prow = int64_t(blockIdx.x) * a.Hx + h;
  if (kNorm && g.gain_part) write_partial(xs_all, gacc, a.d, g.gain_part + prow * a.d);
  if (pope_k) write_partial(xs_all, pacc, a.d, g.delta_part + prow * a.d);
  if (goat_q) {
    float* part_row = g.mode_part + prow * 2 * a.R;
    write_partial(xs_all, pacc, a.R, part_row);
    write_partial(xs_all, pacc2, a.R, part_row + a.R);
  }
}

template <bool kNorm>
void launch_fwd(const RowLaneArgs& a, __nv_bfloat16* y, dim3 grid, cudaStream_t s) {
  const int th = kWarps * 32;
  switch (a.kind) {
    case LaneKind::Copy:
      lanes_fwd_kernel<LaneKind::Copy, kNorm><<<grid, th, 0, s>>>(a, y);
      break;
    case LaneKind::Rope:
      lanes_fwd_kernel<LaneKind::Rope, kNorm><<<grid, th, 0, s>>>(a, y);
      break;
    case LaneKind::Goat:
      lanes_fwd_kernel<LaneKind::Goat, kNorm><<<grid, th, 0, s>>>(a, y);
      break;
    case LaneKind::Pope:
      lanes_fwd_kernel<LaneKind::Pope, kNorm><<<grid, th, 0, s>>>(a, y);
      break;
  }
  LCR_CUDA_CHECK_LAUNCH();
}

template <bool kNorm>
void launch_bwd(const RowLaneArgs& a, const RowLaneGrads& g, dim3 grid, cudaStream_t s) {
  const int th = kWarps * 32;
  switch (a.kind) {
    case LaneKind::Copy:
      lanes_bwd_kernel<LaneKind::Copy, kNorm><<<grid, th, 0, s>>>(a, g);
      break;
    case LaneKind::Rope:
      lanes_bwd_kernel<LaneKind::Rope, kNorm><<<grid, th, 0, s>>>(a, g);
      break;
    case LaneKind::Goat:
      lanes_bwd_kernel<LaneKind::Goat, kNorm><<<grid, th, 0, s>>>(a, g);
      break;
    case LaneKind::Pope:
      lanes_bwd_kernel<LaneKind::Pope, kNorm><<<grid, th, 0, s>>>(a, g);
      break;
  }
  LCR_CUDA_CHECK_LAUNCH();
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
  const dim3 grid(position_chunks(a.L), a.Hx);
  if (a.gain)
    launch_fwd<true>(a, y, grid, s);
  else
    launch_fwd<false>(a, y, grid, s);
}

void lanes_backward(const RowLaneArgs& a, const RowLaneGrads& g, cudaStream_t s) {
  if (a.B == 0 || a.L == 0 || a.Hx == 0) return;
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
