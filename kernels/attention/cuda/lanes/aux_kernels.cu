// The smaller CUDA pieces of the dot-product pipeline (contracts in lane_kernels.hpp):
// GOAT's key bias u(j) and its parameter gradients, PoPE's clamped phase bias, ALiBi
// slopes, the learned sink and FoX's cumulative log gates. Everything that the CPU path
// keeps in double (u(j), the FoX running sums, the parameter reductions) is double here
// too; every reduction runs in a fixed order (no atomics).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/lanes/lane_kernels.hpp"

namespace lcr::cuda::lanes {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr double kTwoPi = 6.283185307179586;
constexpr int kMaxFeatures = 2 * 16 + 2;  // phi width for up to 16 feature pairs
constexpr int kKeyThreads = 128, kKeysPerThread = 2, kKeyChunk = kKeyThreads * kKeysPerThread;
constexpr int kFoxSeg = 64;  // positions per FoX scan segment

int blocks_for(int64_t n, int threads) {
  return int(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 65535)));
}

// The CPU's double forms (kernels/attention/kokkos/math.hpp).
__device__ __forceinline__ double sigmoid_d(double x) {
  return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}
__device__ __forceinline__ double softplus_d(double x) {
  return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

// phi(p) = [sin(p f_m), cos(p f_m) for m < F, p / L_train, log(1 + p) / log(1 + L_train)].
__device__ void goat_features(const GoatKeyArgs& a, int64_t p, double* phi) {
  for (int m = 0; m < a.F; ++m) {
    double sn, cs;
    sincos(double(p) * a.feature_freq[m], &sn, &cs);
    phi[2 * m] = sn;
    phi[2 * m + 1] = cs;
  }
  phi[2 * a.F] = double(p) * a.inv_train_len;
  phi[2 * a.F + 1] = log1p(double(p)) * a.inv_log_train;
}

__global__ void goat_key_bias_kernel(GoatKeyArgs a, double* u) {
  const int NF = 2 * a.F + 2;
  const int64_t n = int64_t(a.L) * a.Hkv;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int j = int(e / a.Hkv), hk = int(e % a.Hkv);
    const int64_t p = a.pos0 + j;
    double phi[kMaxFeatures];
    goat_features(a, p, phi);
    double g = 0;
    for (int k = 0; k < a.N; ++k) {
      const int hn = hk * a.N + k;
      double pre = a.b1[hn];
      for (int m = 0; m < NF; ++m) pre += double(a.w1[int64_t(hn) * NF + m]) * phi[m];
      g += double(a.w2[hn]) * pre * sigmoid_d(pre);
    }
    u[e] = double(a.lambda[hk]) * double(p) + g + (p == 0 ? double(a.bump[hk]) : 0.0);
  }
}

// Sums vals[0..n) over the block (warp shuffles, then the warps in order) into out[0..n).
__device__ void block_sum_write(const double* vals, int n, double (*red)[kMaxFeatures + 2],
                                float* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = 0; i < n; ++i) {
    double v = vals[i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
    if (lane == 0) red[warp][i] = v;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    double v = 0;
    for (int w = 0; w < kKeyThreads / 32; ++w) v += red[w][i];
    out[i] = float(v);
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kKeyThreads)
    goat_key_partials_kernel(GoatKeyArgs a, const float* du_in, float* part) {
  __shared__ double red[kKeyThreads / 32][kMaxFeatures + 2];
  const int hk = blockIdx.y, NF = 2 * a.F + 2, cols = 2 + a.N * (2 + NF);
  float* out = part + (int64_t(blockIdx.x) * a.Hkv + hk) * cols;
  double phi[kKeysPerThread][kMaxFeatures], du[kKeysPerThread];
  int64_t p[kKeysPerThread];
  for (int k = 0; k < kKeysPerThread; ++k) {
    const int j = blockIdx.x * kKeyChunk + k * kKeyThreads + threadIdx.x;
    p[k] = a.pos0 + j;
    du[k] = j < a.L ? double(du_in[int64_t(j) * a.Hkv + hk]) : 0.0;  // 0: no contribution
    if (j < a.L) goat_features(a, p[k], phi[k]);
  }
  double vals[kMaxFeatures + 2];
  vals[0] = vals[1] = 0;
  for (int k = 0; k < kKeysPerThread; ++k) {
    vals[0] += du[k] * double(p[k]);     // d lambda: u = lambda p + ...
    vals[1] += p[k] == 0 ? du[k] : 0.0;  // d bump: only at global position 0
  }
  block_sum_write(vals, 2, red, out);
  for (int n = 0; n < a.N; ++n) {
    const int hn = hk * a.N + n;
    for (int i = 0; i < 2 + NF; ++i) vals[i] = 0;
    for (int k = 0; k < kKeysPerThread; ++k) {
      if (du[k] == 0.0) continue;
      double pre = a.b1[hn];
      for (int m = 0; m < NF; ++m) pre += double(a.w1[int64_t(hn) * NF + m]) * phi[k][m];
      const double sg = sigmoid_d(pre);
      vals[0] += du[k] * pre * sg;  // d w2_n = du silu(pre)
      // silu'(x) = sigmoid(x) (1 + x (1 - sigmoid(x)))
      const double back = du[k] * double(a.w2[hn]) * sg * (1.0 + pre * (1.0 - sg));
      vals[1] += back;                                               // d b1_n
      for (int m = 0; m < NF; ++m) vals[2 + m] += back * phi[k][m];  // d W1_n,m
    }
    block_sum_write(vals, 2 + NF, red, out + 2 + n * (2 + NF));
  }
}

__global__ void goat_key_reduce_kernel(GoatKeyArgs a, const float* part, int chunks,
                                       GoatKeyGradSlices g) {
  const int NF = 2 * a.F + 2, cols = 2 + a.N * (2 + NF);
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < a.Hkv * cols;
       e += gridDim.x * blockDim.x) {
    const int hk = e / cols, c = e % cols;
    double acc = 0;
    for (int k = 0; k < chunks; ++k) acc += part[(int64_t(k) * a.Hkv + hk) * cols + c];
    const float v = float(acc);
    if (c == 0) {
      g.lambda[hk] += v;
    } else if (c == 1) {
      g.bump[hk] += v;
    } else {
      const int n = (c - 2) / (2 + NF), w = (c - 2) % (2 + NF), hn = hk * a.N + n;
      if (w == 0)
        g.w2[hn] += v;
      else if (w == 1)
        g.b1[hn] += v;
      else
        g.w1[int64_t(hn) * NF + (w - 2)] += v;
    }
  }
}

__global__ void pope_delta_trig_kernel(const float* delta, int n, float2* out) {
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
    const double dl = fmin(fmax(double(delta[e]), -kTwoPi), 0.0);
    double sn, cs;
    sincos(dl, &sn, &cs);
    out[e] = make_float2(float(cs), float(sn));
  }
}

__global__ void alibi_kernel(int H, float* out) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h < H) out[h] = float(exp2(-8.0 * (h + 1) / H));
}

// o = o_f32 * exp(lse_old - lse_new) per element; reads lse before sink_lse_kernel runs.
__global__ void sink_o_kernel(int B, int Lq, int H, int Dv, const float* sink, const float* o_f32,
                              const float* lse, __nv_bfloat16* o) {
  const int64_t n = int64_t(B) * Lq * H * Dv;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = e / Dv;  // (b, i, h)
    const int h = int(row % H), i = int((row / H) % Lq), b = int(row / (int64_t(H) * Lq));
    const float old = lse[(int64_t(b) * H + h) * Lq + i], s = sink[h];
    const float mx = fmaxf(old, s);
    const float nl = mx + logf(expf(old - mx) + expf(s - mx));
    const float f = old == -INFINITY ? 0.f : expf(old - nl);
    o[e] = __float2bfloat16(o_f32[e] * f);
  }
}

__global__ void sink_lse_kernel(int B, int Lq, int H, const float* sink, float* lse) {
  const int64_t n = int64_t(B) * H * Lq;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int h = int((e / Lq) % H);
    const float old = lse[e], s = sink[h], mx = fmaxf(old, s);
    lse[e] = mx + logf(expf(old - mx) + expf(s - mx));
  }
}

__global__ void sink_backward_kernel(int B, int Lq, int H, const float* sink, const float* lse,
                                     const float* delta, float* dsink) {
  __shared__ double red[32];
  const int h = blockIdx.x;
  double acc = 0;
  for (int64_t e = threadIdx.x; e < int64_t(B) * Lq; e += blockDim.x) {
    const int64_t idx = (e / Lq * H + h) * Lq + e % Lq;  // [b, h, i]
    acc += exp(double(sink[h]) - double(lse[idx])) * double(delta[idx]);
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

}  // namespace

void goat_key_bias(const GoatKeyArgs& a, double* u, cudaStream_t s) {
  const int64_t n = int64_t(a.L) * a.Hkv;
  if (n == 0) return;
  goat_key_bias_kernel<<<blocks_for(n, 128), 128, 0, s>>>(a, u);
  LCR_CUDA_CHECK_LAUNCH();
}

int goat_key_chunks(int L) { return (L + kKeyChunk - 1) / kKeyChunk; }

void goat_key_param_partials(const GoatKeyArgs& a, const float* du, float* part, cudaStream_t s) {
  if (a.L == 0 || a.Hkv == 0) return;
  require(2 * a.F + 2 <= kMaxFeatures,
          "CUDA GOAT supports goat.feature_freqs <= ", (kMaxFeatures - 2) / 2, ", got ", a.F,
          "; lower goat.feature_freqs");
  goat_key_partials_kernel<<<dim3(goat_key_chunks(a.L), a.Hkv), kKeyThreads, 0, s>>>(a, du, part);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_key_param_reduce(const GoatKeyArgs& a, const float* part, const GoatKeyGradSlices& g,
                           cudaStream_t s) {
  if (a.L == 0 || a.Hkv == 0) return;
  const int n = a.Hkv * (2 + a.N * (2 + 2 * a.F + 2));
  goat_key_reduce_kernel<<<blocks_for(n, 128), 128, 0, s>>>(a, part, goat_key_chunks(a.L), g);
  LCR_CUDA_CHECK_LAUNCH();
}

void pope_delta_trig(const float* delta, int n, float2* out, cudaStream_t s) {
  if (n == 0) return;
  pope_delta_trig_kernel<<<blocks_for(n, 128), 128, 0, s>>>(delta, n, out);
  LCR_CUDA_CHECK_LAUNCH();
}

void alibi_slopes(int H, float* out, cudaStream_t s) {
  if (H == 0) return;
  alibi_kernel<<<(H + 127) / 128, 128, 0, s>>>(H, out);
  LCR_CUDA_CHECK_LAUNCH();
}

void sink_forward(int B, int Lq, int H, int Dv, const float* sink, const float* o_f32, float* lse,
                  __nv_bfloat16* o, cudaStream_t s) {
  const int64_t n = int64_t(B) * Lq * H * Dv;
  if (n == 0) return;
  sink_o_kernel<<<blocks_for(n, 256), 256, 0, s>>>(B, Lq, H, Dv, sink, o_f32, lse, o);
  LCR_CUDA_CHECK_LAUNCH();
  sink_lse_kernel<<<blocks_for(int64_t(B) * H * Lq, 256), 256, 0, s>>>(B, Lq, H, sink, lse);
  LCR_CUDA_CHECK_LAUNCH();
}

void sink_backward(int B, int Lq, int H, const float* sink, const float* lse, const float* delta,
                   float* dsink, cudaStream_t s) {
  if (H == 0) return;
  sink_backward_kernel<<<H, 256, 0, s>>>(B, Lq, H, sink, lse, delta, dsink);
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

}  // namespace lcr::cuda::lanes
