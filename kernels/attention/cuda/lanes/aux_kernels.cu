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
constexpr int kProjectThreads = 1024;  // goat_du_project: one block per KV head
constexpr int kFoxSeg = 64;            // positions per FoX scan segment

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
__global__ void goat_features_kernel(GoatKeyArgs a, double* phi) {
  const int NF = 2 * a.F + 2;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < a.L; j += gridDim.x * blockDim.x) {
    const double p = double(a.pos0 + j);
    double* row = phi + int64_t(j) * NF;
    for (int m = 0; m < a.F; ++m) {
      double sn, cs;
      sincos(p * a.feature_freq[m], &sn, &cs);
      row[2 * m] = sn;
      row[2 * m + 1] = cs;
    }
    row[2 * a.F] = p * a.inv_train_len;
    row[2 * a.F + 1] = log1p(p) * a.inv_log_train;
  }
}

// Block = (kKeyThreads keys, KV head hk): the head's MLP weights go to shared memory as
// double once per block (read as broadcasts in the loops), one key per thread.
__global__ void __launch_bounds__(kKeyThreads) goat_key_bias_kernel(GoatKeyArgs a, double* u) {
  extern __shared__ double wsm[];  // w1 [N][NF], b1 [N], w2 [N] of head hk
  const int hk = blockIdx.y, NF = 2 * a.F + 2, N = a.N;
  double *w1 = wsm, *b1 = w1 + N * NF, *w2 = b1 + N;
  for (int i = threadIdx.x; i < N * NF; i += kKeyThreads) w1[i] = a.w1[int64_t(hk) * N * NF + i];
  for (int i = threadIdx.x; i < N; i += kKeyThreads)
    b1[i] = a.b1[hk * N + i], w2[i] = a.w2[hk * N + i];
  __syncthreads();
  const int j = blockIdx.x * kKeyThreads + threadIdx.x;
  if (j >= a.L) return;
  const int64_t p = a.pos0 + j;
  const double* phi_j = a.phi + int64_t(j) * NF;
  double g = 0;
  for (int k = 0; k < N; ++k) {
    double pre = b1[k];
    for (int m = 0; m < NF; ++m) pre += w1[k * NF + m] * phi_j[m];
    g += w2[k] * pre * sigmoid_d(pre);  // w2 silu(pre)
  }
  u[int64_t(j) * a.Hkv + hk] =
      double(a.lambda[hk]) * double(p) + g + (p == 0 ? double(a.bump[hk]) : 0.0);
}

// Sums vals[0..n) over the block (warp shuffles, then the warps in order) into out[0..n).
// Unrolled over the array's full size with a guard, so vals stays in registers.
__device__ __forceinline__ void block_sum_write(const double (&vals)[kMaxFeatures + 2], int n,
                                                double (*red)[kMaxFeatures + 2], float* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < kMaxFeatures + 2; ++i) {
    if (i >= n) break;
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

// Block = (kKeyChunk keys, KV head hk), the head's MLP weights in shared memory as double
// (as in goat_key_bias_kernel).
__global__ void __launch_bounds__(kKeyThreads)
    goat_key_partials_kernel(GoatKeyArgs a, const float* du_in, float* part) {
  __shared__ double red[kKeyThreads / 32][kMaxFeatures + 2];
  extern __shared__ double wsm[];  // w1 [N][NF], b1 [N], w2 [N] of head hk
  const int hk = blockIdx.y, NF = 2 * a.F + 2, N = a.N, cols = 2 + N * (2 + NF);
  double *w1 = wsm, *b1 = w1 + N * NF, *w2 = b1 + N;
  for (int i = threadIdx.x; i < N * NF; i += kKeyThreads) w1[i] = a.w1[int64_t(hk) * N * NF + i];
  for (int i = threadIdx.x; i < N; i += kKeyThreads)
    b1[i] = a.b1[hk * N + i], w2[i] = a.w2[hk * N + i];
  float* out = part + (int64_t(blockIdx.x) * a.Hkv + hk) * cols;
  double du[kKeysPerThread];
  int j[kKeysPerThread];
#pragma unroll
  for (int k = 0; k < kKeysPerThread; ++k) {
    j[k] = blockIdx.x * kKeyChunk + k * kKeyThreads + threadIdx.x;
    du[k] = j[k] < a.L ? double(du_in[int64_t(j[k]) * a.Hkv + hk]) : 0.0;  // 0: no contribution
  }
  double vals[kMaxFeatures + 2];
  vals[0] = vals[1] = 0;
#pragma unroll
  for (int k = 0; k < kKeysPerThread; ++k) {
    const int64_t p = a.pos0 + j[k];
    vals[0] += du[k] * double(p);   // d lambda: u = lambda p + ...
    vals[1] += p == 0 ? du[k] : 0;  // d bump: only at global position 0
  }
  block_sum_write(vals, 2, red, out);  // its barrier also publishes the staged weights
  for (int n = 0; n < N; ++n) {
#pragma unroll
    for (int i = 0; i < kMaxFeatures + 2; ++i) vals[i] = 0;
#pragma unroll
    for (int k = 0; k < kKeysPerThread; ++k) {
      if (du[k] == 0.0) continue;
      const double* phi_j = a.phi + int64_t(j[k]) * NF;
      double pre = b1[n];
      for (int m = 0; m < NF; ++m) pre += w1[n * NF + m] * phi_j[m];
      const double sg = sigmoid_d(pre);
      vals[0] += du[k] * pre * sg;  // d w2_n = du silu(pre)
      // silu'(x) = sigmoid(x) (1 + x (1 - sigmoid(x)))
      const double back = du[k] * w2[n] * sg * (1.0 + pre * (1.0 - sg));
      vals[1] += back;  // d b1_n
#pragma unroll
      for (int m = 0; m < kMaxFeatures; ++m)
        if (m < NF) vals[2 + m] += back * phi_j[m];  // d W1_n,m
    }
    block_sum_write(vals, 2 + NF, red, out + 2 + n * (2 + NF));
  }
}

// Adds the reduced sums [Hkv, cols] into the parameter slices.
__global__ void goat_key_scatter_kernel(GoatKeyArgs a, const float* sums, GoatKeyGradSlices g) {
  const int NF = 2 * a.F + 2, cols = 2 + a.N * (2 + NF);
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < a.Hkv * cols;
       e += gridDim.x * blockDim.x) {
    const int hk = e / cols, c = e % cols;
    const float v = sums[e];
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

// Query rows (per batch row and head) that see the key at position pj.
__device__ __forceinline__ double goat_key_rows(int64_t pj, int Lq, int64_t q_pos0) {
  const int64_t last = q_pos0 + Lq - 1, first = pj > q_pos0 ? pj : q_pos0;
  return last >= first ? double(last - first + 1) : 0.0;
}

__global__ void __launch_bounds__(kProjectThreads)
    goat_du_project_kernel(int L, int Hkv, int G, int64_t k_pos0, int Lq, int64_t q_pos0,
                           const float* dsink, float* du) {
  __shared__ double red[2][kProjectThreads];
  const int hk = blockIdx.x;
  double sum = 0, wsum = 0;
  for (int j = threadIdx.x; j < L; j += kProjectThreads) {
    sum += double(du[int64_t(j) * Hkv + hk]);
    wsum += goat_key_rows(k_pos0 + j, Lq, q_pos0);
  }
  red[0][threadIdx.x] = sum;
  red[1][threadIdx.x] = wsum;
  __syncthreads();
  for (int w = kProjectThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) {
      red[0][threadIdx.x] += red[0][threadIdx.x + w];
      red[1][threadIdx.x] += red[1][threadIdx.x + w];
    }
    __syncthreads();
  }
  if (red[1][0] == 0) return;  // no query sees any key: du is 0 already
  double target = 0;
  if (dsink)
    for (int h = hk * G; h < (hk + 1) * G; ++h) target -= double(dsink[h]);
  const double per_row = (red[0][0] - target) / red[1][0];
  for (int j = threadIdx.x; j < L; j += kProjectThreads) {
    const double w = goat_key_rows(k_pos0 + j, Lq, q_pos0);
    if (w > 0) du[int64_t(j) * Hkv + hk] = float(double(du[int64_t(j) * Hkv + hk]) - per_row * w);
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

// o = o_f32 * f with f = exp(lse_old - lse_new) (1 without a sink); o_f32 scaled in place.
// Reads lse before sink_lse_kernel updates it (stream order).
__global__ void finish_o_kernel(int B, int Lq, int H, int Dv, const float* sink, float* o_f32,
                                const float* lse, __nv_bfloat16* o) {
  const int64_t n = int64_t(B) * Lq * H * Dv;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    float v = o_f32[e];
    if (sink) {
      const int64_t row = e / Dv;  // (b, i, h)
      const int h = int(row % H), i = int((row / H) % Lq), b = int(row / (int64_t(H) * Lq));
      const float old = lse[(int64_t(b) * H + h) * Lq + i], s = sink[h];
      const float mx = fmaxf(old, s);
      const float nl = mx + logf(expf(old - mx) + expf(s - mx));
      v *= old == -INFINITY ? 0.f : expf(old - nl);
      o_f32[e] = v;
    }
    o[e] = __float2bfloat16(v);
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

// One warp per row (b, i, h): delta[b, h, i] = sum_c o_f32 dout.
__global__ void row_delta_f32_kernel(int B, int Lq, int H, int Dv, const float* o,
                                     const __nv_bfloat16* dout, float* delta) {
  const int64_t rows = int64_t(B) * Lq * H;
  const int lane = threadIdx.x % 32;
  for (int64_t r = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; r < rows;
       r += int64_t(gridDim.x) * blockDim.x / 32) {
    float acc = 0.f;
    for (int c = lane; c < Dv; c += 32) acc += o[r * Dv + c] * __bfloat162float(dout[r * Dv + c]);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(kFull, acc, off);
    const int h = int(r % H), i = int((r / H) % Lq), b = int(r / (int64_t(H) * Lq));
    if (lane == 0) delta[(int64_t(b) * H + h) * Lq + i] = acc;
  }
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

// Shared memory of one head's key-bias MLP weights (goat_key_bias, goat_key_param_partials).
size_t mlp_smem(const GoatKeyArgs& a) {
  const size_t bytes = sizeof(double) * a.N * (2 * a.F + 2 + 2);
  require(bytes <= 40 * 1024,
          "CUDA GOAT keeps one head's key-bias MLP in 40 KiB of shared memory: ",
          "goat.mlp_hidden * (2 goat.feature_freqs + 4) must be <= 5120, got ", a.N, " * ",
          2 * a.F + 4, "; lower goat.mlp_hidden");
  return bytes;
}

}  // namespace

void goat_features(const GoatKeyArgs& a, double* phi, cudaStream_t s) {
  if (a.L == 0) return;
  require(a.F <= (kMaxFeatures - 2) / 2,
          "CUDA GOAT supports goat.feature_freqs <= ", (kMaxFeatures - 2) / 2, ", got ", a.F,
          "; lower goat.feature_freqs");
  goat_features_kernel<<<blocks_for(a.L, 128), 128, 0, s>>>(a, phi);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_key_bias(const GoatKeyArgs& a, double* u, cudaStream_t s) {
  const int64_t n = int64_t(a.L) * a.Hkv;
  if (n == 0) return;
  const size_t smem = mlp_smem(a);
  goat_key_bias_kernel<<<dim3((a.L + kKeyThreads - 1) / kKeyThreads, a.Hkv), kKeyThreads, smem,
                         s>>>(a, u);
  LCR_CUDA_CHECK_LAUNCH();
}

int goat_key_chunks(int L) { return (L + kKeyChunk - 1) / kKeyChunk; }
int goat_key_cols(const GoatKeyArgs& a) { return 2 + a.N * (2 + 2 * a.F + 2); }

void goat_key_param_partials(const GoatKeyArgs& a, const float* du, float* part, cudaStream_t s) {
  if (a.L == 0 || a.Hkv == 0) return;
  goat_key_partials_kernel<<<dim3(goat_key_chunks(a.L), a.Hkv), kKeyThreads, mlp_smem(a), s>>>(
      a, du, part);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_key_param_scatter(const GoatKeyArgs& a, const float* sums, const GoatKeyGradSlices& g,
                            cudaStream_t s) {
  const int n = a.Hkv * goat_key_cols(a);
  if (n == 0) return;
  goat_key_scatter_kernel<<<blocks_for(n, 128), 128, 0, s>>>(a, sums, g);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_du_project(int L, int Hkv, int G, int64_t k_pos0, int Lq, int64_t q_pos0,
                     const float* dsink, float* du, cudaStream_t s) {
  if (L == 0 || Hkv == 0 || Lq == 0) return;
  goat_du_project_kernel<<<Hkv, kProjectThreads, 0, s>>>(L, Hkv, G, k_pos0, Lq, q_pos0, dsink, du);
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

void finish_output(int B, int Lq, int H, int Dv, const float* sink, float* o_f32, float* lse,
                   __nv_bfloat16* o, cudaStream_t s) {
  const int64_t n = int64_t(B) * Lq * H * Dv;
  if (n == 0) return;
  finish_o_kernel<<<blocks_for(n, 256), 256, 0, s>>>(B, Lq, H, Dv, sink, o_f32, lse, o);
  LCR_CUDA_CHECK_LAUNCH();
  if (!sink) return;
  sink_lse_kernel<<<blocks_for(int64_t(B) * H * Lq, 256), 256, 0, s>>>(B, Lq, H, sink, lse);
  LCR_CUDA_CHECK_LAUNCH();
}

void row_delta_f32(int B, int Lq, int H, int Dv, const float* o_f32, const __nv_bfloat16* dout,
                   float* delta, cudaStream_t s) {
  const int64_t rows = int64_t(B) * Lq * H;
  if (rows == 0) return;
  row_delta_f32_kernel<<<blocks_for(rows * 32, 256), 256, 0, s>>>(B, Lq, H, Dv, o_f32, dout, delta);
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
