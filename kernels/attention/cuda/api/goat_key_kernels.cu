// GOAT's key bias on the GPU (contracts in lane_kernels.hpp): the position features phi(j),
// u(j) = lambda p + w2 . silu(W1 phi + b1) + bump 1{p = 0} for every key and KV head, the
// MLP's parameter-gradient partials from du, and the projection of du onto its known sum.
// Every reduction runs in a fixed order (no atomics): the results are bitwise reproducible.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention/cuda/api/lane_kernels.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"

namespace lcr::cuda::lanes {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxFeatures = 2 * 16 + 2;  // phi width for up to 16 feature pairs
// goat_key_bias: a block = (kBiasKeys keys, one KV head) of kBiasThreads threads.
constexpr int kBiasThreads = 128, kBiasKeys = 256;
// goat_key_param_partials: a block = (kKeyChunk keys, one KV head, kKeyUnits hidden units)
// of kKeyWarps warps, phi staged kKeyTile keys at a time.
constexpr int kKeyWarps = 4, kKeyThreads = 32 * kKeyWarps, kKeyUnits = 16;
constexpr int kKeyChunk = 512, kKeyTile = 64;
// goat_du_project: kProjectBlocks slices of the keys per KV head.
constexpr int kProjectBlocks = 16, kProjectThreads = 256;

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

// GOAT's MLP g(p) = w2 . silu(W1 phi(p) + b1) runs in fp32 (pre-activation, sigmoid, silu
// and the per-key gradient terms), phi read as double and rounded. That is enough: g is
// O(1) and reaches the logits through the bf16 hi/lo lanes of sqrt(d_h) u, which carry u to
// ~2^-16 relative, far above fp32's 2^-24 on g; the tests bound the parameter gradients at
// 10x a naive bf16 error. What fp32 would not carry stays double: u = lambda p + g + bump
// (lambda p grows with the position, up to ~1e7) and the sums of the per-key gradient
// terms over the keys.
__device__ __forceinline__ float sigmoid_f(float x) {
  const float e = expf(-fabsf(x)), d = 1.f + e;  // d in [1, 2]
  // r = 1 / d as the IEEE division computes it for such d (approximate reciprocal, one
  // Newton step), without its branch for out-of-range divisors, which would keep the
  // compiler from overlapping the sigmoids of different keys and units.
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  r = fmaf(r, fmaf(-d, r, 1.f), r);
  return x >= 0.f ? r : e * r;  // exp(x) / (1 + exp(x)) below 0, without overflow
}

// The MLP kernels unroll their register arrays over P >= NF = 2F + 2, one instance per
// class of feature_freqs: F <= 4 (the default), 8, 16. Entries NF .. P - 1 of phi and W1
// are zero, so the loops need no bounds (and cost nothing extra at F = 4, 8, 16).
void check_feature_freqs(int F) {
  require(F <= (kMaxFeatures - 2) / 2,
          "CUDA GOAT supports goat.feature_freqs <= ", (kMaxFeatures - 2) / 2, ", got ", F,
          "; lower goat.feature_freqs");
}
template <class Fn>
void with_phi_width(int F, Fn&& launch) {
  check_feature_freqs(F);
  const int NF = 2 * F + 2;
  if (NF <= 10)
    launch(std::integral_constant<int, 10>());
  else if (NF <= 18)
    launch(std::integral_constant<int, 18>());
  else
    launch(std::integral_constant<int, kMaxFeatures>());
}

// Block = (kBiasKeys keys, KV head hk), keys j and j + kBiasThreads per thread (two
// independent chains) with their phi in registers as fp32. The head's weights go to shared
// memory as fp32 rows of P + 2 per hidden unit n: b1_n, w2_n, W1_n,0 .. W1_n,P-1 (a
// multiple of 4 floats, read as float4 broadcasts).
template <int P>
__global__ void __launch_bounds__(kBiasThreads) goat_key_bias_kernel(GoatKeyArgs a, double* u) {
  constexpr int kRow = P + 2, kKeys = kBiasKeys / kBiasThreads;
  static_assert(kRow % 4 == 0, "float4 rows");
  extern __shared__ float4 wsm[];  // [N][kRow / 4]
  const int hk = blockIdx.y, NF = 2 * a.F + 2, N = a.N;
  float* w = reinterpret_cast<float*>(wsm);
  for (int e = threadIdx.x; e < N * kRow; e += kBiasThreads) {
    const int n = e / kRow, m = e % kRow - 2, hn = hk * N + n;
    w[e] = m == -2 ? a.b1[hn] : m == -1 ? a.w2[hn] : m < NF ? a.w1[int64_t(hn) * NF + m] : 0.f;
  }
  float phi[kKeys][P];  // keys past L compute on key L - 1 and store nothing
#pragma unroll
  for (int k = 0; k < kKeys; ++k) {
    const int j = min(int(blockIdx.x) * kBiasKeys + k * kBiasThreads + int(threadIdx.x), a.L - 1);
    const double2* phi_j = reinterpret_cast<const double2*>(a.phi + int64_t(j) * NF);
#pragma unroll
    for (int i = 0; i < P / 2; ++i) {
      const double2 v = 2 * i < NF ? phi_j[i] : make_double2(0, 0);
      phi[k][2 * i] = float(v.x), phi[k][2 * i + 1] = float(v.y);
    }
  }
  __syncthreads();
  float g[kKeys] = {};
  for (int n = 0; n < N; ++n) {
    float r[kRow];
#pragma unroll
    for (int q = 0; q < kRow / 4; ++q) {
      const float4 v = wsm[n * (kRow / 4) + q];
      r[4 * q] = v.x, r[4 * q + 1] = v.y, r[4 * q + 2] = v.z, r[4 * q + 3] = v.w;
    }
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      float pre = r[0];
#pragma unroll
      for (int m = 0; m < P; ++m) pre = fmaf(r[2 + m], phi[k][m], pre);
      g[k] = fmaf(r[1], pre * sigmoid_f(pre), g[k]);  // w2 silu(pre)
    }
  }
#pragma unroll
  for (int k = 0; k < kKeys; ++k) {
    const int j = int(blockIdx.x) * kBiasKeys + k * kBiasThreads + int(threadIdx.x);
    const int64_t p = a.pos0 + j;
    if (j < a.L)
      u[int64_t(j) * a.Hkv + hk] =
          double(a.lambda[hk]) * double(p) + double(g[k]) + (p == 0 ? double(a.bump[hk]) : 0.0);
  }
}

// C += A B for one warp: A [8 x 4] row-major (lane l holds A[l / 4][l % 4]), B [4 x 8]
// (lane l holds B[l % 4][l / 4]), C [8 x 8] (lane l holds C[l / 4][2 (l % 4) + i]); FP64
// tensor cores, double products and sums (mma.m8n8k4, sm_80 and newer).
__device__ __forceinline__ void mma_f64_8x8x4(double a, double b, double (&c)[2]) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
      : "+d"(c[0]), "+d"(c[1])
      : "d"(a), "d"(b));
}

// Shared memory of goat_key_partials_kernel: the staged tile of keys, then (reusing it) the
// per-warp sums.
template <int P>
struct KeyPartialsSmem {
  // Columns of B: 1 (-> d b1), phi_0 .. phi_P-1 (-> d W1), zeros to a multiple of 8.
  static constexpr int kCols = (P + 8) / 8 * 8;
  struct Tile {
    double b[kKeyTile][kCols + 4];  // rows padded so that 4 keys x 8 columns hit distinct banks
    float phi_du[kKeyTile][P + 2];  // phi as fp32 (zero past NF), then du and a zero
  };
  union {
    Tile tile;
    double sums[kKeyWarps][kKeyUnits][kCols + 1];  // per warp: C, then d w2 in column kCols
  } u;
  double lambda_bump[2][kKeyWarps];
};

// Block = (kKeyChunk keys, KV head hk, hidden units z kKeyUnits .. + kKeyUnits - 1; units
// >= N get zero weights and add nothing). The chunk's phi and du go through shared memory
// kKeyTile keys at a time. A warp takes 4 keys at a time, lane l computing key l % 4 for the
// units l / 4 and l / 4 + 8 in fp32 (weights in registers): back = du w2 silu'(pre), which
// is the A operand of the [units x keys] x [keys x (1, phi)] product that gives d b1 and
// d W1 on the FP64 tensor cores (mma_f64_8x8x4: two unit halves x kCols / 8 column tiles),
// and du silu(pre), summed in double for d w2. Keys past the tile and keys with du = 0 add
// exact zeros. At the end the warps' sums are added in warp order into the block's partial
// row (and d lambda, d bump from du, per warp, then in warp order). Every sum runs in a
// fixed order: no atomics.
template <int P>
__global__ void __launch_bounds__(kKeyThreads)
    goat_key_partials_kernel(GoatKeyArgs a, const float* du_in, float* part) {
  static_assert(kKeyTile <= kKeyThreads, "one thread stages each key's du");
  using Smem = KeyPartialsSmem<P>;
  constexpr int kCols = Smem::kCols, kTiles = kCols / 8, kHalves = kKeyUnits / 8;
  __shared__ __align__(16) Smem sm;
  const int hk = blockIdx.y, NF = 2 * a.F + 2, N = a.N, per = 2 + NF, cols = 2 + N * per;
  const int t = threadIdx.x, warp = t / 32, kq = t % 4, ul = t % 32 / 4;
  // This lane's units ul + 8 h of the block's group (A rows l / 4 of the two unit halves).
  float w1[kHalves][P], b1[kHalves], w2[kHalves];
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    const int n = blockIdx.z * kKeyUnits + ul + 8 * h;
    const bool ok = n < N;
#pragma unroll
    for (int m = 0; m < P; ++m)
      w1[h][m] = ok && m < NF ? a.w1[(int64_t(hk) * N + n) * NF + m] : 0.f;
    b1[h] = ok ? a.b1[hk * N + n] : 0.f;
    w2[h] = ok ? a.w2[hk * N + n] : 0.f;
  }
  // The constant columns of B: 1 in column 0, zeros from 1 + NF (staging writes 1 .. NF).
  for (int e = t; e < kKeyTile * kCols; e += kKeyThreads) {
    const int k = e / kCols, c = e % kCols;
    if (c == 0 || c > NF) sm.u.tile.b[k][c] = c == 0 ? 1.0 : 0.0;
  }
  double acc[kHalves][kTiles][2] = {}, dw2[kHalves] = {};
  double lambda = 0, bump = 0;  // d lambda = sum du p (u = lambda p + ...), d bump = du at p = 0
  const int j0 = blockIdx.x * kKeyChunk, nkeys = min(kKeyChunk, a.L - j0);
  // Staging is software-pipelined: each thread holds its share of the next tile (the phi
  // pairs e = t, t + kKeyThreads, .. and the du of key t) in registers while the block
  // computes on the current one.
  constexpr int kPairs = (kKeyTile * P / 2 + kKeyThreads - 1) / kKeyThreads;
  double2 next[kPairs];
  float next_du = 0.f;
  const auto fetch = [&](int k0) {
    const int nk = min(kKeyTile, nkeys - k0);
    const double2* src = reinterpret_cast<const double2*>(a.phi + int64_t(j0 + k0) * NF);
#pragma unroll
    for (int i = 0; i < kPairs; ++i)
      if (t + i * kKeyThreads < nk * (NF / 2)) next[i] = src[t + i * kKeyThreads];
    if (t < nk) next_du = du_in[int64_t(j0 + k0 + t) * a.Hkv + hk];
  };
  fetch(0);
  for (int k0 = 0; k0 < nkeys; k0 += kKeyTile) {
    const int nk = min(kKeyTile, nkeys - k0);
    __syncthreads();  // the previous tile is read (and the constant columns written)
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const int e = t + i * kKeyThreads, k = e / (NF / 2), m = e % (NF / 2) * 2;
      if (e >= nk * (NF / 2)) break;
      sm.u.tile.b[k][1 + m] = next[i].x;
      sm.u.tile.b[k][2 + m] = next[i].y;
      sm.u.tile.phi_du[k][m] = float(next[i].x);
      sm.u.tile.phi_du[k][m + 1] = float(next[i].y);
    }
    if (t < nk) {
      for (int m = NF; m < P; ++m) sm.u.tile.phi_du[t][m] = 0.f;
      sm.u.tile.phi_du[t][P] = next_du;
      sm.u.tile.phi_du[t][P + 1] = 0.f;
      const int64_t p = a.pos0 + j0 + k0 + t;
      lambda += double(next_du) * double(p);
      bump += p == 0 ? double(next_du) : 0.0;
    }
    if (k0 + kKeyTile < nkeys) fetch(k0 + kKeyTile);
    __syncthreads();
    for (int kb = 4 * warp; kb < nk; kb += 4 * kKeyWarps) {
      const int k = kb + kq < nk ? kb + kq : kb;  // a staged row; du = 0 past the tile
      float f[P + 2];
#pragma unroll
      for (int q = 0; q < (P + 2) / 4; ++q) {
        const float4 v = reinterpret_cast<const float4*>(sm.u.tile.phi_du[k])[q];
        f[4 * q] = v.x, f[4 * q + 1] = v.y, f[4 * q + 2] = v.z, f[4 * q + 3] = v.w;
      }
      const float du = kb + kq < nk ? f[P] : 0.f;
      double back[kHalves];
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        float pre = b1[h];
#pragma unroll
        for (int m = 0; m < P; ++m) pre = fmaf(w1[h][m], f[m], pre);
        const float sg = sigmoid_f(pre);
        dw2[h] += double(du * pre * sg);  // d w2_n = du silu(pre)
        // silu'(x) = sigmoid(x) (1 + x (1 - sigmoid(x)))
        back[h] = double(du * w2[h] * sg * (1.f + pre * (1.f - sg)));
      }
#pragma unroll
      for (int c = 0; c < kTiles; ++c) {
        const double bv = sm.u.tile.b[k][ul + 8 * c];
#pragma unroll
        for (int h = 0; h < kHalves; ++h) mma_f64_8x8x4(back[h], bv, acc[h][c]);
      }
    }
  }
  __syncthreads();  // the last tile is read: sums reuses its memory
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
#pragma unroll
    for (int c = 0; c < kTiles; ++c) {
      sm.u.sums[warp][ul + 8 * h][8 * c + 2 * kq] = acc[h][c][0];
      sm.u.sums[warp][ul + 8 * h][8 * c + 2 * kq + 1] = acc[h][c][1];
    }
    dw2[h] += __shfl_xor_sync(kFull, dw2[h], 1);  // the lane's 4 keys, fixed order
    dw2[h] += __shfl_xor_sync(kFull, dw2[h], 2);
    if (kq == 0) sm.u.sums[warp][ul + 8 * h][kCols] = dw2[h];
  }
  for (int o = 16; o > 0; o >>= 1) {
    lambda += __shfl_xor_sync(kFull, lambda, o);
    bump += __shfl_xor_sync(kFull, bump, o);
  }
  if (t % 32 == 0) sm.lambda_bump[0][warp] = lambda, sm.lambda_bump[1][warp] = bump;
  __syncthreads();
  float* out = part + (int64_t(blockIdx.x) * a.Hkv + hk) * cols;
  if (blockIdx.z == 0 && t < 2) {
    double v = 0;
    for (int w = 0; w < kKeyWarps; ++w) v += sm.lambda_bump[t][w];
    out[t] = float(v);
  }
  // Output o = (unit - z kKeyUnits) per + (d w2, d b1, d W1_0 ..): the group's columns are
  // contiguous; d w2 sits in column kCols of the sums, d b1 and d W1 in 0 .. NF.
  const int units = min(kKeyUnits, N - int(blockIdx.z) * kKeyUnits);
  for (int o = t; o < units * per; o += kKeyThreads) {
    const int nl = o / per, c = o % per, col = c == 0 ? kCols : c - 1;
    double v = 0;
    for (int w = 0; w < kKeyWarps; ++w) v += sm.u.sums[w][nl][col];
    out[2 + blockIdx.z * kKeyUnits * per + o] = float(v);
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

// goat_du_project in two launches over a grid of (kProjectBlocks slices, KV head hk), so
// that it spreads over the GPU and runs on any sm_80+ part: block r sums du and the row
// counts over its slice of the keys (threads stride the slice, then warp butterflies, then
// the warps in order) into sums[hk][r]; then every block adds the kProjectBlocks sums of its
// head in slice order (the same value in every block) and corrects its slice in place.
__device__ __forceinline__ void project_slice(int L, int& j0, int& j1) {
  const int span = (L + kProjectBlocks - 1) / kProjectBlocks;
  j0 = min(L, int(blockIdx.x) * span);
  j1 = min(L, j0 + span);
}

__global__ void __launch_bounds__(kProjectThreads)
    goat_du_sums_kernel(int L, int Hkv, int64_t k_pos0, int Lq, int64_t q_pos0, const float* du,
                        double2* sums) {
  __shared__ double red[2][kProjectThreads / 32];
  const int hk = blockIdx.y;
  int j0, j1;
  project_slice(L, j0, j1);
  double sum = 0, wsum = 0;
  for (int j = j0 + threadIdx.x; j < j1; j += kProjectThreads) {
    sum += double(du[int64_t(j) * Hkv + hk]);
    wsum += goat_key_rows(k_pos0 + j, Lq, q_pos0);
  }
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(kFull, sum, o);
    wsum += __shfl_xor_sync(kFull, wsum, o);
  }
  if (threadIdx.x % 32 == 0) red[0][threadIdx.x / 32] = sum, red[1][threadIdx.x / 32] = wsum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double2 v = make_double2(0, 0);
    for (int w = 0; w < kProjectThreads / 32; ++w) v.x += red[0][w], v.y += red[1][w];
    sums[hk * kProjectBlocks + blockIdx.x] = v;
  }
}

__global__ void __launch_bounds__(kProjectThreads)
    goat_du_correct_kernel(int L, int Hkv, int G, int64_t k_pos0, int Lq, int64_t q_pos0,
                           const float* dsink, const double2* sums, float* du) {
  __shared__ double per_row;
  const int hk = blockIdx.y;
  if (threadIdx.x == 0) {
    double total = 0, rows = 0, target = 0;
    for (int r = 0; r < kProjectBlocks; ++r)
      total += sums[hk * kProjectBlocks + r].x, rows += sums[hk * kProjectBlocks + r].y;
    if (dsink)
      for (int h = hk * G; h < (hk + 1) * G; ++h) target -= double(dsink[h]);
    per_row = rows > 0 ? (total - target) / rows : 0.0;  // 0: no query sees any key
  }
  __syncthreads();
  int j0, j1;
  project_slice(L, j0, j1);
  for (int j = j0 + threadIdx.x; j < j1; j += kProjectThreads) {
    const double w = goat_key_rows(k_pos0 + j, Lq, q_pos0);
    if (w > 0) du[int64_t(j) * Hkv + hk] = float(double(du[int64_t(j) * Hkv + hk]) - per_row * w);
  }
}

// goat_key_bias_kernel keeps one head's MLP weights in shared memory (fp32 rows of P + 2).
void check_mlp_size(const GoatKeyArgs& a) {
  require(a.N * (2 * a.F + 4) <= 5120, "CUDA GOAT keeps one head's key-bias MLP in shared memory: ",
          "goat.mlp_hidden * (2 goat.feature_freqs + 4) must be <= 5120, got ", a.N, " * ",
          2 * a.F + 4, "; lower goat.mlp_hidden");
}

}  // namespace

void goat_features(const GoatKeyArgs& a, double* phi, cudaStream_t s) {
  if (a.L == 0) return;
  check_feature_freqs(a.F);
  goat_features_kernel<<<blocks_for(a.L, 128), 128, 0, s>>>(a, phi);
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_key_bias(const GoatKeyArgs& a, double* u, cudaStream_t s) {
  if (int64_t(a.L) * a.Hkv == 0) return;
  check_mlp_size(a);
  const dim3 grid((a.L + kBiasKeys - 1) / kBiasKeys, a.Hkv);
  with_phi_width(a.F, [&](auto P) {
    const size_t smem = sizeof(float) * a.N * (P + 2);  // <= 40 KiB by check_mlp_size (F >= 1)
    goat_key_bias_kernel<P><<<grid, kBiasThreads, smem, s>>>(a, u);
  });
  LCR_CUDA_CHECK_LAUNCH();
}

int goat_key_chunks(int L) { return (L + kKeyChunk - 1) / kKeyChunk; }
int goat_key_cols(const GoatKeyArgs& a) { return 2 + a.N * (2 + 2 * a.F + 2); }

void goat_key_param_partials(const GoatKeyArgs& a, const float* du, float* part, cudaStream_t s) {
  if (a.L == 0 || a.Hkv == 0) return;
  const dim3 grid(goat_key_chunks(a.L), a.Hkv, std::max(1, (a.N + kKeyUnits - 1) / kKeyUnits));
  with_phi_width(
      a.F, [&](auto P) { goat_key_partials_kernel<P><<<grid, kKeyThreads, 0, s>>>(a, du, part); });
  LCR_CUDA_CHECK_LAUNCH();
}

void goat_key_param_scatter(const GoatKeyArgs& a, const float* sums, const GoatKeyGradSlices& g,
                            cudaStream_t s) {
  const int n = a.Hkv * goat_key_cols(a);
  if (n == 0) return;
  goat_key_scatter_kernel<<<blocks_for(n, 128), 128, 0, s>>>(a, sums, g);
  LCR_CUDA_CHECK_LAUNCH();
}

int goat_du_project_doubles(int Hkv) { return 2 * kProjectBlocks * Hkv; }

void goat_du_project(int L, int Hkv, int G, int64_t k_pos0, int Lq, int64_t q_pos0,
                     const float* dsink, float* du, double* scratch, cudaStream_t s) {
  if (L == 0 || Hkv == 0 || Lq == 0) return;
  auto* sums = reinterpret_cast<double2*>(scratch);
  const dim3 grid(kProjectBlocks, Hkv);
  goat_du_sums_kernel<<<grid, kProjectThreads, 0, s>>>(L, Hkv, k_pos0, Lq, q_pos0, du, sums);
  LCR_CUDA_CHECK_LAUNCH();
  goat_du_correct_kernel<<<grid, kProjectThreads, 0, s>>>(L, Hkv, G, k_pos0, Lq, q_pos0, dsink,
                                                          sums, du);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda::lanes
