#pragma once
// The UT transform of one fine block in fp32 on the CUDA cores (it is a 64-step forward
// substitution, too sequential for the tensor cores, and fp32 keeps T as exact as the
// Kokkos path's): with W the block's rows w_t (n = 64, padded rows zero) and D = diag(beta),
//   Gm  = strictLower(W W^T)                          (only the strict lower part is used)
//   Lam = (I + strictLower(D Gm))^-1                  unit lower triangular
//   T   = Lam D
// Lam[r][c] = delta_rc - beta_r sum_{c <= l < r} Gm[r][l] Lam[l][c], row after row.
// Needs 256 threads (64 columns x 4 partial sums).
#include "kernels/attention/cuda/path/device/mma.cuh"
#include "kernels/attention/cuda/path/device/params.cuh"

namespace lcr::cuda::LCR_PATHK {

// Wf [64 x (D+1)] fp32 (odd leading dimension), Gm [64 x kFld] <- strict lower W W^T.
LCR_DEV void gram_lower(const float* Wf, int D, float* Gm) {
  for (int e = tid(); e < kBlk * kBlk; e += nthreads()) {
    const int r = e / kBlk, c = e % kBlk;
    float s = 0.f;
    if (c < r)
      for (int k = 0; k < D; ++k) s += Wf[r * (D + 1) + k] * Wf[c * (D + 1) + k];
    Gm[r * kFld + c] = s;
  }
  sync_cta();
}

// Lam [64 x kFld] <- (I + strictLower(D Gm))^-1.
LCR_DEV void ut_inverse(const float* Gm, const float* beta, float* Lam) {
  for (int e = tid(); e < kBlk * kBlk; e += nthreads()) {
    const int r = e / kBlk, c = e % kBlk;
    Lam[r * kFld + c] = r == c ? 1.f : 0.f;
  }
  sync_cta();
  const int c = tid() >> 2, q = tid() & 3;
  for (int r = 1; r < kBlk; ++r) {
    float s = 0.f;
    if (c < r)
      for (int l = c + q; l < r; l += 4) s += Gm[r * kFld + l] * Lam[l * kFld + c];
    s = quad_sum(s);
    if (c < r && q == 0) Lam[r * kFld + c] = -beta[r] * s;
    sync_cta();
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
