// The smaller CUDA pieces of the dot-product pipeline (contracts in lane_kernels.hpp):
// PoPE's clamped phase bias, ALiBi slopes, the output rows (fp32 -> bf16, the learned sink,
// delta = <dO, O>), the sink's gradient, FoX's cumulative log gates and GOAT's parameter map
// for the authors' recipe (GOAT's key bias is goat_key_kernels.cu). What the CPU path keeps in
// double (the FoX running sums, the sink's reduction) is double here too; every reduction runs in a
// fixed order (no atomics).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention/cuda/api/lane_kernels.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/vec_io.cuh"
#include "kernels/attention/spec.hpp"

namespace lcr::cuda::lanes {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr double kTwoPi = 6.283185307179586;
constexpr int kRowThreads = 256;  // finish_output, row_delta_f32
constexpr int kFoxSeg = 64;       // positions per FoX scan segment

// The CPU's double forms (kernels/attention/kokkos/math.hpp).
__device__ __forceinline__ double sigmoid_d(double x) {
  return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}
__device__ __forceinline__ double softplus_d(double x) {
  return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

__global__ void pope_delta_trig_kernel(const float* delta, int n, float2* out) {
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
    const double dl = fmin(fmax(double(delta[e]), -kTwoPi), 0.0);
    double sn, cs;
    sincos(dl, &sn, &cs);
    out[e] = make_float2(float(cs), float(sn));
  }
}

__global__ void alibi_kernel(int H, AlibiSlopes slopes, float* out) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h < H) out[h] = float(alibi_slope(h, H, slopes));
}

// The row kernels over [rows, Dv] with rows = (b, i, h) of [B, Lq, H]: 2^tpr_log2 threads
// per row (at most 32, consecutive lanes of one warp), thread c of a row taking the V-wide
// chunks c, c + TPR, ... (V = 4: 16-byte fp32 and 8-byte bf16 accesses; V = 1 for any other
// Dv or alignment). The loop over rows is warp-uniform, so the row's lanes can shuffle, and
// (b, i, h) is formed once per row from 32-bit division (rows < 2^31, checked by the
// launchers); addresses stay int64.
// body(r, c0) for every row group of this warp, grid-strided: r is this thread's row (it may
// be >= rows in the last group, where the lanes still take part in the row's shuffles, so the
// body checks it), c0 the thread's place in the row.
template <class Body>
__device__ __forceinline__ void for_row_groups(int64_t rows, int tpr_log2, Body&& body) {
  const int c0 = threadIdx.x & ((1 << tpr_log2) - 1);
  const int64_t step = (int64_t(gridDim.x) * kRowThreads) >> tpr_log2;
  for (int64_t r0 = (int64_t(blockIdx.x) * kRowThreads + (threadIdx.x & ~31)) >> tpr_log2;
       r0 < rows; r0 += step)
    body(r0 + ((threadIdx.x & 31) >> tpr_log2), c0);
}

// Row r = (b, i, h) of [B, Lq, H] split with 32-bit division; bhi() is its index in
// [B, H, Lq] (lse, delta).
struct RowBHI {
  unsigned b, h, i;
  __device__ int64_t bhi(int Lq, int H) const { return (int64_t(b) * H + h) * Lq + i; }
};
__device__ __forceinline__ RowBHI split_row(int64_t r, int Lq, int H) {
  const unsigned q = unsigned(r) / unsigned(H), b = q / unsigned(Lq);
  return {b, unsigned(r) - q * unsigned(H), q - b * unsigned(Lq)};
}

// o = o_f32 * f with f = exp(lse_old - lse_new) (1 without a sink; 0 where the row saw no
// key), o_f32 scaled in place and lse[b, h, i] <- lse_new by the row's first thread, the
// only one that reads it (it hands f to the others).
template <int V>
__global__ void __launch_bounds__(kRowThreads)
    finish_o_kernel(int B, int Lq, int H, int Dv, int tpr_log2, const float* sink, float* o_f32,
                    float* lse, __nv_bfloat16* o) {
  const int tpr = 1 << tpr_log2;
  const int64_t rows = int64_t(B) * Lq * H;
  for_row_groups(rows, tpr_log2, [&](int64_t r, int c0) {
    float f = 1.f;
    if (sink) {
      if (c0 == 0 && r < rows) {
        const RowBHI x = split_row(r, Lq, H);
        const int64_t li = x.bhi(Lq, H);
        const float old = lse[li], s = sink[x.h], mx = fmaxf(old, s);
        const float nl = mx + logf(expf(old - mx) + expf(s - mx));
        f = old == -INFINITY ? 0.f : expf(old - nl);
        lse[li] = nl;
      }
      f = __shfl_sync(kFull, f, 0, tpr);
    }
    if (r >= rows) return;
    for (int c = c0; c < Dv / V; c += tpr) {
      const int64_t e = r * Dv + c * V;
      float v[V];
      dev::load_vec(o_f32 + e, v);
      if (sink) {
#pragma unroll
        for (int k = 0; k < V; ++k) v[k] *= f;
        dev::store_vec(o_f32 + e, v);
      }
      dev::store_vec(o + e, v);
    }
  });
}

// delta[b, h, i] = sum_c o_f32 dout over row (b, i, h). Sum order: each thread adds its
// chunks' products in element order, then a butterfly over the row's threads (fixed, so
// reproducible; it differs from a plain left-to-right sum by fp32 rounding only).
template <int V>
__global__ void __launch_bounds__(kRowThreads)
    row_delta_f32_kernel(int B, int Lq, int H, int Dv, int tpr_log2, const float* o,
                         const __nv_bfloat16* dout, float* delta) {
  const int tpr = 1 << tpr_log2;
  const int64_t rows = int64_t(B) * Lq * H;
  for_row_groups(rows, tpr_log2, [&](int64_t r, int c0) {
    float acc = 0.f;
    if (r < rows)
      for (int c = c0; c < Dv / V; c += tpr) {
        float x[V], y[V];
        dev::load_vec(o + r * Dv + c * V, x);
        dev::load_vec(dout + r * Dv + c * V, y);
#pragma unroll
        for (int k = 0; k < V; ++k) acc = fmaf(x[k], y[k], acc);
      }
    for (int off = tpr / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(kFull, acc, off);
    if (c0 == 0 && r < rows) delta[split_row(r, Lq, H).bhi(Lq, H)] = acc;
  });
}

__global__ void fox_query_grad_kernel(int B, int Lq, int H, const float* delta, const float* lse,
                                      const float* sink, float* dcq) {
  const int64_t n = int64_t(B) * Lq * H;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int h = int(e % H), i = int((e / H) % Lq), b = int(e / (int64_t(H) * Lq));
    const int64_t r = (int64_t(b) * H + h) * Lq + i;  // [b, h, i]
    dcq[e] = sink ? delta[r] * expf(sink[h] - lse[r]) : 0.f;
  }
}

__global__ void fox_query_grad_from_sums_kernel(int64_t n, const float* sums, float* dcq) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    dcq[e] = fmaf(-sums[2 * n + e], sums[n + e], sums[e]);  // A - D C
}

__global__ void sink_backward_kernel(int B, int Lq, int H, const float* sink, const float* lse,
                                     const float* delta, const float* weight, float* dsink) {
  __shared__ double red[32];
  const int h = blockIdx.x;
  double acc = 0;
  for (int64_t e = threadIdx.x; e < int64_t(B) * Lq; e += blockDim.x) {
    const int64_t idx = (e / Lq * H + h) * Lq + e % Lq;  // [b, h, i]
    const double t = exp(double(sink[h]) - double(lse[idx])) * double(delta[idx]);
    acc += weight ? t * double(weight[e * H + h]) : t;  // weight [b, i, h]
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(kFull, acc, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0;
    for (int w = 0; w < int(blockDim.x / 32); ++w) s += red[w];
    dsink[h] = float(-s);
  }
}

// FoX scan in three passes over segments of kFoxSeg positions: segment totals, a scan of
// the totals per (b, h), then each segment re-walked from its offset.
__device__ __forceinline__ double log_sigmoid(float x) { return -softplus_d(-double(x)); }

__global__ void fox_segment_sums(int B, int L, int H, const float* x, bool backward, double* seg) {
  const int nseg = (L + kFoxSeg - 1) / kFoxSeg;
  const int64_t n = int64_t(B) * nseg * H;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int h = int(e % H), sg = int((e / H) % nseg), b = int(e / (int64_t(H) * nseg));
    double acc = 0;
    for (int t = sg * kFoxSeg; t < min(L, (sg + 1) * kFoxSeg); ++t) {
      const float v = x[(int64_t(b) * L + t) * H + h];
      acc += backward ? double(v) : log_sigmoid(v);
    }
    seg[e] = acc;
  }
}

// Exclusive scan of the segment totals per (b, h): forward left to right starting at
// offset, backward right to left starting at 0 (then total -> doffset).
__global__ void fox_scan_segments(int B, int L, int H, const float* offset, bool backward,
                                  double* seg, float* doffset) {
  const int nseg = (L + kFoxSeg - 1) / kFoxSeg;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= B * H) return;
  const int b = e / H, h = e % H;
  double acc = (!backward && offset) ? double(offset[e]) : 0.0;
  for (int k = 0; k < nseg; ++k) {
    const int sg = backward ? nseg - 1 - k : k;
    double& v = seg[(int64_t(b) * nseg + sg) * H + h];
    const double tot = v;
    v = acc;
    acc += tot;
  }
  if (backward && doffset) doffset[e] = float(acc);
}

__global__ void fox_segment_walk(int B, int L, int H, const float* x, const float* dc,
                                 const double* seg, float* out) {
  const int nseg = (L + kFoxSeg - 1) / kFoxSeg;
  const int64_t n = int64_t(B) * nseg * H;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int h = int(e % H), sg = int((e / H) % nseg), b = int(e / (int64_t(H) * nseg));
    double acc = seg[e];
    const int t0 = sg * kFoxSeg, t1 = min(L, (sg + 1) * kFoxSeg);
    if (!dc) {  // forward: c_t = offset + sum_{s <= t} log sigmoid(x_s)
      for (int t = t0; t < t1; ++t) {
        const int64_t i = (int64_t(b) * L + t) * H + h;
        acc += log_sigmoid(x[i]);
        out[i] = float(acc);
      }
    } else {  // backward: dx_s = sigmoid(-x_s) sum_{t >= s} dc_t
      for (int t = t1 - 1; t >= t0; --t) {
        const int64_t i = (int64_t(b) * L + t) * H + h;
        acc += double(dc[i]);
        out[i] = float(acc * sigmoid_d(-double(x[i])));
      }
    }
  }
}

// Rows (b, i, h) of the row kernels, which split them with 32-bit division.
int64_t check_rows(int B, int Lq, int H) {
  const int64_t rows = int64_t(B) * Lq * H;
  require(rows < (int64_t(1) << 31), "CUDA attention output: B * Lq * heads must be < 2^31, got ",
          rows);
  return rows;
}

// 16-byte fp32 and 8-byte bf16 row accesses (V = 4) where Dv and the pointers allow them.
bool vector_rows(int Dv, const float* f32, const __nv_bfloat16* bf16) {
  return Dv % 4 == 0 && reinterpret_cast<uintptr_t>(f32) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(bf16) % 8 == 0;
}

// log2 of the threads per row: two chunks per thread, at most 32 threads.
int row_tpr_log2(int chunks) {
  int l = 0;
  while (l < 5 && (2 << l) < chunks) ++l;
  return l;
}

}  // namespace

void pope_delta_trig(const float* delta, int n, float2* out, cudaStream_t s) {
  if (n == 0) return;
  pope_delta_trig_kernel<<<blocks_for(n, 128), 128, 0, s>>>(delta, n, out);
  LCR_CUDA_CHECK_LAUNCH();
}

void alibi_slopes(int H, AlibiSlopes slopes, float* out, cudaStream_t s) {
  if (H == 0) return;
  alibi_kernel<<<(H + 127) / 128, 128, 0, s>>>(H, slopes, out);
  LCR_CUDA_CHECK_LAUNCH();
}

void finish_output(int B, int Lq, int H, int Dv, const float* sink, float* o_f32, float* lse,
                   __nv_bfloat16* o, cudaStream_t s) {
  const int64_t rows = check_rows(B, Lq, H);
  if (rows == 0 || Dv == 0) return;
  if (vector_rows(Dv, o_f32, o)) {
    const int tl = row_tpr_log2(Dv / 4);
    finish_o_kernel<4><<<blocks_for(rows << tl, kRowThreads), kRowThreads, 0, s>>>(
        B, Lq, H, Dv, tl, sink, o_f32, lse, o);
  } else {
    const int tl = row_tpr_log2(Dv);
    finish_o_kernel<1><<<blocks_for(rows << tl, kRowThreads), kRowThreads, 0, s>>>(
        B, Lq, H, Dv, tl, sink, o_f32, lse, o);
  }
  LCR_CUDA_CHECK_LAUNCH();
}

void row_delta_f32(int B, int Lq, int H, int Dv, const float* o_f32, const __nv_bfloat16* dout,
                   float* delta, cudaStream_t s) {
  const int64_t rows = check_rows(B, Lq, H);
  if (rows == 0) return;
  if (vector_rows(Dv, o_f32, dout)) {
    const int tl = row_tpr_log2(Dv / 4);
    row_delta_f32_kernel<4><<<blocks_for(rows << tl, kRowThreads), kRowThreads, 0, s>>>(
        B, Lq, H, Dv, tl, o_f32, dout, delta);
  } else {
    const int tl = row_tpr_log2(Dv);
    row_delta_f32_kernel<1><<<blocks_for(rows << tl, kRowThreads), kRowThreads, 0, s>>>(
        B, Lq, H, Dv, tl, o_f32, dout, delta);
  }
  LCR_CUDA_CHECK_LAUNCH();
}

void fox_query_grad(int B, int Lq, int H, const float* delta, const float* lse, const float* sink,
                    float* dcq, cudaStream_t s) {
  const int64_t n = int64_t(B) * Lq * H;
  if (n == 0) return;
  fox_query_grad_kernel<<<blocks_for(n, 256), 256, 0, s>>>(B, Lq, H, delta, lse, sink, dcq);
  LCR_CUDA_CHECK_LAUNCH();
}

void fox_query_grad_from_sums(int B, int Lq, int H, const float* sums, float* dcq, cudaStream_t s) {
  const int64_t n = int64_t(B) * Lq * H;
  if (n == 0) return;
  fox_query_grad_from_sums_kernel<<<blocks_for(n, 256), 256, 0, s>>>(n, sums, dcq);
  LCR_CUDA_CHECK_LAUNCH();
}

void sink_backward(int B, int Lq, int H, const float* sink, const float* lse, const float* delta,
                   float* dsink, cudaStream_t s, const float* weight) {
  if (H == 0) return;
  sink_backward_kernel<<<H, 256, 0, s>>>(B, Lq, H, sink, lse, delta, weight, dsink);
  LCR_CUDA_CHECK_LAUNCH();
}

int64_t fox_scratch_doubles(int B, int L, int H) {
  return int64_t(B) * ((L + kFoxSeg - 1) / kFoxSeg) * H;
}

void fox_cumulative(int B, int L, int H, const float* x, const float* offset, float* c,
                    double* scratch, cudaStream_t s) {
  const int64_t n = fox_scratch_doubles(B, L, H);
  if (n == 0) return;
  fox_segment_sums<<<blocks_for(n, 128), 128, 0, s>>>(B, L, H, x, false, scratch);
  LCR_CUDA_CHECK_LAUNCH();
  fox_scan_segments<<<(B * H + 127) / 128, 128, 0, s>>>(B, L, H, offset, false, scratch, nullptr);
  LCR_CUDA_CHECK_LAUNCH();
  fox_segment_walk<<<blocks_for(n, 128), 128, 0, s>>>(B, L, H, x, nullptr, scratch, c);
  LCR_CUDA_CHECK_LAUNCH();
}

void fox_cumulative_backward(int B, int L, int H, const float* x, const float* dc, float* dx,
                             float* doffset, double* scratch, cudaStream_t s) {
  const int64_t n = fox_scratch_doubles(B, L, H);
  if (n == 0) {
    if (doffset && B * H > 0) LCR_CUDA_CHECK(cudaMemsetAsync(doffset, 0, sizeof(float) * B * H, s));
    return;
  }
  fox_segment_sums<<<blocks_for(n, 128), 128, 0, s>>>(B, L, H, dc, true, scratch);
  LCR_CUDA_CHECK_LAUNCH();
  fox_scan_segments<<<(B * H + 127) / 128, 128, 0, s>>>(B, L, H, nullptr, true, scratch, doffset);
  LCR_CUDA_CHECK_LAUNCH();
  fox_segment_walk<<<blocks_for(n, 128), 128, 0, s>>>(B, L, H, x, dc, scratch, dx);
  LCR_CUDA_CHECK_LAUNCH();
}

namespace {

constexpr int kGateThreads = 256;  // 8 rows (warps) a block

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// |q_c| of one row (every lane gets it) and the normed content's factor: xn_c = x_c r gain_c
// (r = 1 / rms(x)) with QK-RMSNorm, x_c without.
__device__ __forceinline__ float gate_norm(const GoatGateArgs& a, int64_t row, int lane, float& r) {
  const __nv_bfloat16* x = a.x + row * a.d;
  float sx = 0, sg = 0;
  for (int c = lane; c < a.d; c += 32) {
    const float v = __bfloat162float(x[c]), vg = a.gain ? v * a.gain[c] : v;
    sx += v * v;
    sg += vg * vg;
  }
  sx = warp_sum(sx);
  sg = warp_sum(sg);
  r = a.gain ? rsqrtf(sx / float(a.d) + a.eps) : 1.f;
  return sqrtf(sg) * r;
}

__device__ __forceinline__ float gate_value(const GoatGateArgs& a, int h, float n) {
  return float(sigmoid_d(double(a.gate_bias[h]) - softplus_d(double(a.gate_scale[h])) * n));
}

__global__ void goat_gate_fwd_kernel(GoatGateArgs a, __nv_bfloat16* q2) {
  const int lane = threadIdx.x % 32, np = 2 * a.R + 2;
  const int64_t rows = int64_t(a.B) * a.L * a.H, step = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows;
       row += step) {
    float r;
    const float g = gate_value(a, int(row % a.H), gate_norm(a, row, lane, r));
    __nv_bfloat16* y = q2 + row * a.dp + a.d;
    for (int l = lane; l < np; l += 32) y[l] = __float2bfloat16(g * __bfloat162float(y[l]));
  }
}

__global__ void goat_gate_values_kernel(GoatGateArgs a, float* g) {
  const int lane = threadIdx.x % 32;
  const int64_t rows = int64_t(a.B) * a.L * a.H, step = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows;
       row += step) {
    float r;
    const float v = gate_value(a, int(row % a.H), gate_norm(a, row, lane, r));
    if (lane == 0) g[row] = v;
  }
}

__global__ void goat_gate_bwd_kernel(GoatGateArgs a, const float* dy, const __nv_bfloat16* dy16,
                                     float* dz, float* rows_out) {
  const int lane = threadIdx.x % 32, np = 2 * a.R + 2;
  const int64_t rows = int64_t(a.B) * a.L * a.H, step = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows;
       row += step) {
    const int h = int(row % a.H), t = int((row / a.H) % a.L);
    auto in = [&](int c) {
      const int64_t i = row * a.dp + c;
      return dy16 ? __bfloat162float(dy16[i]) : dy[i];
    };
    float r;
    const float n = gate_norm(a, row, lane, r), g = gate_value(a, h, n);
    // dg: the prior lanes' gradients against the ungated lanes.
    float acc = 0;
    for (int m = lane; m < a.R; m += 32) {
      const float2 cs = a.trig[int64_t(t) * a.M + m];
      const float al = a.alpha[h * a.R + m], be = a.beta[h * a.R + m];
      acc += a.lane_scale * (in(a.d + 2 * m) * (al * cs.x + be * cs.y) +
                             in(a.d + 2 * m + 1) * (al * cs.y - be * cs.x));
    }
    if (lane == 0) acc += in(a.d + 2 * a.R) + in(a.d + 2 * a.R + 1);
    const float dpre = warp_sum(acc) * g * (1.f - g);
    float* z = dz + row * a.dp;
    for (int l = lane; l < np; l += 32) z[a.d + l] = g * in(a.d + l);
    for (int l = a.d + np + lane; l < a.dp; l += 32) z[l] = 0.f;
    const float f =
        n > 0 ? -dpre * float(softplus_d(double(a.gate_scale[h]))) / (n * a.content_scale) : 0.f;
    const __nv_bfloat16* x = a.x + row * a.d;
    for (int c = lane; c < a.d; c += 32) {
      const float xn = __bfloat162float(x[c]) * r * (a.gain ? a.gain[c] : 1.f);
      z[c] = in(c) + f * xn;
    }
    if (lane == 0) {
      rows_out[2 * row] = dpre;
      rows_out[2 * row + 1] = n;
    }
  }
}

__global__ void goat_gate_param_kernel(GoatGateArgs a, const float* rows, float* dscale,
                                       float* dbias) {
  __shared__ double red[2][kGateThreads];
  const int h = blockIdx.x;
  const int64_t n = int64_t(a.B) * a.L;
  const double sig = sigmoid_d(double(a.gate_scale[h]));
  double sb = 0, ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float* rw = rows + 2 * (i * a.H + h);
    sb += rw[0];
    ss -= double(rw[0]) * rw[1] * sig;
  }
  red[0][threadIdx.x] = sb;
  red[1][threadIdx.x] = ss;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) {
      red[0][threadIdx.x] += red[0][threadIdx.x + w];
      red[1][threadIdx.x] += red[1][threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    dbias[h] += float(red[0][0]);
    dscale[h] += float(red[1][0]);
  }
}

__global__ void goat_recipe_expand_kernel(goat::RecipeMap m, const float* a, float* lane) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < m.lane_total();
       e += int64_t(gridDim.x) * blockDim.x)
    lane[e] = goat::recipe_expand(m, a, e);
}

__global__ void goat_recipe_contract_kernel(goat::RecipeMap m, const float* a, const float* dl,
                                            float* da) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < m.authors_total();
       e += int64_t(gridDim.x) * blockDim.x)
    da[e] += float(goat::recipe_contract(m, a, dl, e));
}

}  // namespace

void goat_gate_forward(const GoatGateArgs& a, __nv_bfloat16* q2, cudaStream_t s) {
  const int64_t rows = int64_t(a.B) * a.L * a.H;
  if (rows == 0) return;
  goat_gate_fwd_kernel<<<blocks_for(rows * 32, kGateThreads), kGateThreads, 0, s>>>(a, q2);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_gate_values(const GoatGateArgs& a, float* g, cudaStream_t s) {
  const int64_t rows = int64_t(a.B) * a.L * a.H;
  if (rows == 0) return;
  goat_gate_values_kernel<<<blocks_for(rows * 32, kGateThreads), kGateThreads, 0, s>>>(a, g);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_gate_backward(const GoatGateArgs& a, const float* dy, const __nv_bfloat16* dy16,
                        float* dz, float* rows, cudaStream_t s) {
  const int64_t n = int64_t(a.B) * a.L * a.H;
  if (n == 0) return;
  goat_gate_bwd_kernel<<<blocks_for(n * 32, kGateThreads), kGateThreads, 0, s>>>(a, dy, dy16, dz,
                                                                                 rows);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_gate_param_grads(const GoatGateArgs& a, const float* rows, float* dscale, float* dbias,
                           cudaStream_t s) {
  if (a.H == 0 || int64_t(a.B) * a.L == 0) return;
  goat_gate_param_kernel<<<a.H, kGateThreads, 0, s>>>(a, rows, dscale, dbias);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_recipe_expand(const goat::RecipeMap& m, const float* a, float* lane, cudaStream_t s) {
  if (m.lane_total() == 0) return;
  goat_recipe_expand_kernel<<<blocks_for(m.lane_total(), 128), 128, 0, s>>>(m, a, lane);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_recipe_contract(const goat::RecipeMap& m, const float* a, const float* dl, float* da,
                          cudaStream_t s) {
  if (m.authors_total() == 0) return;
  goat_recipe_contract_kernel<<<blocks_for(m.authors_total(), 128), 128, 0, s>>>(m, a, dl, da);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::lanes
