#pragma once
// lcr's CUDA scaled-dot-product attention: bf16 operands, fp32 accumulation on tensor
// cores, FlashAttention-2 tiling (online softmax, no L x L matrix in memory). The math is
// that of kernels/attention/kokkos/sdpa.hpp, so the scheme lanes of kernels/schemes map
// (q, k) -> (q', k') the same way for both backends:
//
//   per (b, h, i, j), global positions p_i = q_pos0 + i, p_j = k_pos0 + j:
//     x_ij = scale <q_i, k_j> - slope_h (p_i - p_j) + bias_q[b,i,h] - bias_k[b,j,h]
//     s_ij = softcap > 0 ? softcap tanh(x_ij / softcap) : x_ij
//     causal (always): key j is seen by query i iff p_j <= p_i
//     lse_i = log sum_j exp(s_ij),  o_i = sum_j exp(s_ij - lse_i) v_j
//
// GQA: query head h reads KV head h / (H / Hkv). All tensors are row-major (LayoutRight)
// device arrays; the host functions only check and launch (stream-ordered, no sync).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace lcr::cuda {

// Which implementation runs a call: lcr's kernels (below), cuDNN's fused attention (the
// vendor specialisation in kernels/attention/cuda/cudnn, loaded at run time; an error when it
// cannot serve the call), or cuDNN where it serves the call and lcr's kernels elsewhere.
// cuDNN serves the plain causal product only (cudnn_sdpa.hpp says which calls).
enum class SdpaImpl { Lcr, Cudnn, Auto };
const char* sdpa_impl_name(SdpaImpl impl);
// "lcr", "cudnn" or "auto"; lcr::Error naming the choices otherwise.
SdpaImpl parse_sdpa_impl(const std::string& name);
// Whether this build and machine can run cuDNN's attention; *why says why not.
bool cudnn_attention_available(std::string* why);

struct SdpaArgs {
  int B = 0, Lq = 0, Lk = 0, H = 0, Hkv = 0, D = 0, Dv = 0;
  const __nv_bfloat16* q = nullptr;  // [B, Lq, H, D]   device
  const __nv_bfloat16* k = nullptr;  // [B, Lk, Hkv, D]
  const __nv_bfloat16* v = nullptr;  // [B, Lk, Hkv, Dv]
  int64_t q_pos0 = 0, k_pos0 = 0;
  float scale = 1.f, softcap = 0.f;
  const float* alibi_slopes = nullptr;  // [H] or null
  const float* bias_q = nullptr;        // [B, Lq, H] or null (FoX cumulative log gates)
  const float* bias_k = nullptr;        // [B, Lk, H] or null
  SdpaImpl impl = SdpaImpl::Lcr;
};

// lcr::Error on bad dimensions, null tensors, H not a multiple of Hkv, or a head width
// the kernels do not support (D and Dv: any multiple of 8 from 8 to 256; D may differ
// from Dv, e.g. PoPE D = 2 Dv), or softcap < 0.
void check(const SdpaArgs& a);

// o [B, Lq, H, Dv] bf16 and/or o_f32 [B, Lq, H, Dv] fp32 (either may be null, not both;
// with both, o is o_f32 rounded to bf16), lse [B, H, Lq] fp32. A row that sees no key:
// lse = -inf, o = 0.
void sdpa_forward(const SdpaArgs& a, __nv_bfloat16* o, float* o_f32, float* lse, cudaStream_t s);

// The forward on cuDNN alone, for callers that would otherwise ask lcr's kernels for more
// than cuDNN writes (the fp32 output): true when a.impl is Cudnn or Auto and cuDNN ran the
// call (o bf16, lse); false, with nothing launched, when a.impl is Lcr or (Auto) cuDNN cannot
// serve it; lcr::Error for impl Cudnn when it cannot. Lq = 0: false.
bool sdpa_forward_vendor(const SdpaArgs& a, __nv_bfloat16* o, float* lse, cudaStream_t s);

// delta[b,h,i] = <dO_i, O_i> in fp32, [B, H, Lq]; o and dout are [B, Lq, H, Dv] bf16.
void sdpa_row_delta(int B, int Lq, int H, int Dv, const __nv_bfloat16* o, const __nv_bfloat16* dout,
                    float* delta, cudaStream_t s);

// Backward given the FINAL lse (after sink / ring merging) and delta from sdpa_row_delta.
// dq [B,Lq,H,D], dk [B,Lk,Hkv,D], dv [B,Lk,Hkv,Dv] are fp32; accumulate = true ADDS into
// them (the ring sums over steps), false overwrites. dbias_q [B,Lq,H] / dbias_k [B,Lk,H]
// fp32 or null (then not computed), same accumulate rule. dbias_q_i = sum_j dS_ij,
// dbias_k_j = -sum_i dS_ij, with dS the gradient of the pre-softcap logit x.
//
// dbias_q_sums [3][B, Lq, H] fp32 or null (then not computed), same accumulate rule: the
// row sums A_i = sum_j P_ij dP_ij c_ij, C_i = sum_j P_ij c_ij and D_i = sum_j P_ij dP_ij,
// with c_ij = 1 - tanh^2(x_ij / softcap) (1 without softcap), taken from the fp32 P and dP
// before anything is rounded. A_i - D_i C_i is dbias_q_i with delta_i replaced by D_i: equal
// in exact arithmetic (delta_i = <dO_i, O_i> = sum_j P_ij dP_ij), but the forward rounds P
// to bf16 in O += P V, so the delta of its O is off from D_i by ~2^-9 sum_j |P_ij dP_ij|,
// and dbias_q_i, which nearly cancels, carries that offset (times C_i) in full; A_i - D_i C_i
// does not. Used for the FoX query lane under softcap, where no closed form exists.
//
// o [B, Lq, H, Dv] bf16 or null: the forward's output that delta was formed from. cuDNN
// forms delta itself from o and dout, so with impl Cudnn / Auto only calls that pass o can
// run there (delta is then not read). With o given, delta may be null: it is then formed
// from o (sdpa_row_delta, stream-ordered scratch) only when lcr's kernels run the call, so a
// call cuDNN serves skips that pass.
void sdpa_backward(const SdpaArgs& a, const float* lse, const float* delta,
                   const __nv_bfloat16* dout, float* dq, float* dk, float* dv, float* dbias_q,
                   float* dbias_k, bool accumulate, cudaStream_t s, float* dbias_q_sums = nullptr,
                   const __nv_bfloat16* o = nullptr);

// The backward with dq [B, Lq, H, D] and dk [B, Lk, Hkv, D] in bf16, as cuDNN's fused
// attention leaves them, for a caller that reads them once more anyway (the lane maps'
// backward reads d q', d k'): no widening pass and half the bytes to read. dv fp32, written
// (no accumulate); delta is formed by cuDNN from o. Only cuDNN runs this form: with impl
// Auto it returns false, launching nothing, when cuDNN cannot serve the call (the caller
// then takes sdpa_backward); with impl Cudnn that is an lcr::Error naming why; impl Lcr:
// false.
bool sdpa_backward_bf16_qk(const SdpaArgs& a, const float* lse, const __nv_bfloat16* o,
                           const __nv_bfloat16* dout, __nv_bfloat16* dq, __nv_bfloat16* dk,
                           float* dv, cudaStream_t s);

}  // namespace lcr::cuda
