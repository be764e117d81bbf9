#pragma once
// The UT transform of one fine block: with W the block's rows w_t (n = 64, padded rows zero)
// and D = diag(beta),
//   Gm  = strictLower(W W^T)                          (only the strict lower part is used)
//   Lam = (I + strictLower(D Gm))^-1                  unit lower triangular
//   T   = Lam D
// Gm on the tensor cores from w split into bf16 hi + lo (gram_lower_split), Lam in fp32 on
// the CUDA cores, blockwise (ut_inverse: small triangular solves and products, too short for
// the tensor cores). Needs 256 threads.
#include "kernels/attention/cuda/path/device/params.cuh"
#include "kernels/attention/cuda/path/device/tile.cuh"

namespace lcr::cuda::LCR_PATHK {

// The bf16 pair of x - bf16(x), y - bf16(y) (pack_bf16 rounds to nearest, as the hi tile's
// pack_bf16(x, y) did): hi + lo keeps 16 significant bits of x and y.
LCR_DEV uint32_t pack_bf16_lo(float x, float y) {
  return pack_bf16(x - to_f(__float2bfloat16(x)), y - to_f(__float2bfloat16(y)));
}

// Gm [64 x kFld] <- strict lower W W^T, as hi hi^T + hi lo^T + lo hi^T on the tensor cores
// (W = hi + lo, 64 x pad(D) bf16 tiles each). Each entry is a dot product of unit rows, so
// the dropped lo lo^T term and the remainder's rounding leave ~2^-16 absolute: a hundred
// times below what storing w in bf16 once costs (the tests' naive yardstick), and below the
// bf16 rounding of the transitions built from T. Not an fp32 loop on the CUDA cores: that
// reads two shared-memory words per multiply-add, and Gm at D = 128 then takes a large part
// of prep_kernel, whose warps stall on fixed-latency dependencies (ncu).
template <int D>
LCR_DEV void gram_lower_split(const bf16* W, const bf16* Wlo, float* Gm) {
  const Term t[3] = {{op(W, pad(D)), op(W, pad(D), true), D, 1.f},
                     {op(W, pad(D)), op(Wlo, pad(D), true), D, 1.f},
                     {op(Wlo, pad(D)), op(W, pad(D), true), D, 1.f}};
  cta_gemm(kBlk, kBlk, t, [&](int r, int c, float v) { Gm[r * kFld + c] = c < r ? v : 0.f; });
}

// Lam [64 x kFld] <- (I + strictLower(D Gm))^-1, blockwise: the 8 x 8 diagonal blocks by
// substitution (one thread per column, in registers), then three doubling levels b = 8, 16,
// 32, each turning pairs of inverted b x b blocks into one 2b x 2b block:
//   [L11 0; L21 L22]^-1 = [Lam11 0; -Lam22 (L21 Lam11) Lam22],  L21 = D Gm's block.
// The critical path is 8 substitution steps and six b x b products (~13 barriers) instead of
// 63 row steps with a barrier each. Lam may be Gm (in place: every entry of Gm is read by
// one phase only, the one that writes Lam's entry there, and each phase reads all before it
// writes). Needs 256 threads.
LCR_DEV void ut_inverse(const float* Gm, const float* beta, float* Lam) {
  constexpr int kB0 = 8, kThreads = 256, kPer = kBlk * kBlk / 2 / kThreads;  // outputs, b = 32
  const int c = tid(), r0 = c - c % kB0;
  float x[kB0];  // Lam[r0 + i][c] (thread c < 64)
  if (c < kBlk) {
    LCR_UNROLL
    for (int i = 0; i < kB0; ++i) {
      const int r = r0 + i;
      float acc = 0.f;
      LCR_UNROLL
      for (int l = 0; l < i; ++l) acc += Gm[r * kFld + r0 + l] * x[l];
      x[i] = r < c ? 0.f : (r == c ? 1.f : -beta[r] * acc);
    }
  }
  sync_cta();
  if (c < kBlk) {  // column c above and inside its diagonal block; below it the levels write
    for (int r = 0; r < r0; ++r) Lam[r * kFld + c] = 0.f;
    LCR_UNROLL
    for (int i = 0; i < kB0; ++i) Lam[(r0 + i) * kFld + c] = x[i];
  }
  sync_cta();
  // One in-place pass of level b over the lower-left b x b block of every 2b x 2b merge: each
  // thread forms its outputs value(i0, i, j, r) (merge origin i0, block entry (i, j), row r),
  // then, after a barrier, writes them there.
  auto level_pass = [&](int b, auto&& value) {
    const int n = kBlk / 2 * b;  // outputs of the level: 64 / (2b) merges of b x b
    float y[kPer];
    LCR_UNROLL
    for (int u = 0; u < kPer; ++u) {
      const int e = tid() + u * kThreads;
      if (e >= n) break;
      const int i0 = 2 * b * (e / (b * b)), i = (e / b) % b, j = e % b;
      y[u] = value(i0, i, j, i0 + b + i);
    }
    sync_cta();
    LCR_UNROLL
    for (int u = 0; u < kPer; ++u) {
      const int e = tid() + u * kThreads;
      if (e >= n) break;
      const int i0 = 2 * b * (e / (b * b)), i = (e / b) % b, j = e % b;
      Lam[(i0 + b + i) * kFld + i0 + j] = y[u];
    }
    sync_cta();
  };
  for (int b = kB0; b < kBlk; b *= 2) {
    level_pass(b, [&](int i0, int, int j, int r) {  // X = L21 Lam11
      float acc = 0.f;
      for (int l = j; l < b; ++l) acc += Gm[r * kFld + i0 + l] * Lam[(i0 + l) * kFld + i0 + j];
      return beta[r] * acc;
    });
    level_pass(b, [&](int i0, int i, int j, int r) {  // Lam21 = -Lam22 X
      float acc = Lam[r * kFld + i0 + j];             // Lam22's unit diagonal
      for (int l = 0; l < i; ++l)
        acc += Lam[r * kFld + i0 + b + l] * Lam[(i0 + b + l) * kFld + i0 + j];
      return -acc;
    });
  }
}

// C [64 x kFld] = op(A) op(B) for 64 x 64 fp32 tiles (kFld leading dimension), on the CUDA
// cores: 256 threads, 4 x 4 outputs each. ta / tb: use the transpose of A / B.
LCR_DEV void simt_gemm64(const float* A, bool ta, const float* B, bool tb, float* C, float alpha) {
  const int r0 = (tid() / 16) * 4, c0 = (tid() % 16) * 4;
  float acc[4][4] = {};
  for (int k = 0; k < kBlk; ++k) {
    float a[4], b[4];
    for (int i = 0; i < 4; ++i) {
      a[i] = ta ? A[k * kFld + r0 + i] : A[(r0 + i) * kFld + k];
      b[i] = tb ? B[(c0 + i) * kFld + k] : B[k * kFld + c0 + i];
    }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
  }
  sync_cta();  // C may alias nothing, but callers reuse A/B right after
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) C[(r0 + i) * kFld + c0 + j] = alpha * acc[i][j];
  sync_cta();
}

}  // namespace lcr::cuda::LCR_PATHK
