#pragma once
// Host references for the CUDA SDPA tests, computed straight from the definition in
// kernels/attention/cuda/sdpa.hpp with the logits of each row materialised:
//   kExact: float64 everywhere (the truth the errors are measured against);
//   kNaiveBf16: what a plain bf16 implementation computes (FlashAttention's yardstick):
//     fp32 logits and softmax, P rounded to bf16 before P V and P^T dO, dS rounded to
//     bf16 before dS K and dS^T Q, O rounded to bf16, delta from the rounded O.
// Inputs are given already rounded to bf16 (the values the GPU sees), so both references
// and the kernel compute the same function of the same numbers.
#include <cstdint>
#include <vector>

namespace lcr::cuda::test {

struct RefProblem {
  int B = 1, Lq = 1, Lk = 1, H = 1, Hkv = 1, D = 8, Dv = 8;
  int64_t q_pos0 = 0, k_pos0 = 0;
  double scale = 1.0, softcap = 0.0;
  std::vector<float> q, k, v, dout;   // [B,Lq,H,D], [B,Lk,Hkv,D], [B,Lk,Hkv,Dv], [B,Lq,H,Dv]
  std::vector<float> slopes;          // [H] or empty
  std::vector<float> bias_q, bias_k;  // [B,Lq,H], [B,Lk,H] or empty
};

struct RefResult {
  std::vector<double> o, lse;                // [B,Lq,H,Dv], [B,H,Lq]
  std::vector<double> dq, dk, dv, dbq, dbk;  // gradients for `dout`, same layouts as inputs
};

enum class RefMode { kExact, kNaiveBf16 };

// Forward and backward of the whole problem; multithreaded over (b, KV head).
RefResult sdpa_reference(const RefProblem& p, RefMode mode);

}  // namespace lcr::cuda::test
