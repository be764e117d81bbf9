#pragma once
// Small CUDA kernels for attention computed in parts (partials.cu): the GPU ring
// (parallel/ring/cuda) and the chunked PaTH (path/chunked.hpp). Row gathers/scatters along the
// sequence axis, the fp32 log-sum-exp merge of partial results, the forward's final write
// (sink, bf16), gradient sums and the sink's gradient. All stream-ordered, checked.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace lcr::cuda::partials {

// Rows [src_r0, src_r0 + n) of src [outer, src_L, inner_bytes] -> rows [dst_r0, dst_r0 + n)
// of dst [outer, dst_L, inner_bytes] (q [B, L, H, D]: outer B; lse [B, H, L]: outer B H,
// inner 4 bytes). Uses 16-byte moves when the row width and pointers allow.
void copy_rows(const void* src, int64_t src_L, int64_t src_r0, void* dst, int64_t dst_L,
               int64_t dst_r0, int64_t outer, int64_t n, int64_t inner_bytes, cudaStream_t s);

// acc <- merge(acc, blk) for o [B, L, H, Dv] fp32 and lse [B, H, L] fp32:
//   lse = m + log(exp(lse_acc - m) + exp(lse_blk - m)), m = max (both weights <= 1),
//   o = (exp(lse_acc - m) o_acc + exp(lse_blk - m) o_blk) / (sum of the weights);
// a side with lse = -inf weighs 0; two -inf sides stay (0, -inf).
void merge_partial(float* o_acc, float* lse_acc, const float* o_blk, const float* lse_blk, int B,
                   int64_t L, int H, int Dv, cudaStream_t s);

// The forward's last step for one query chunk of `rows` rows: with a sink,
// lse' = log(exp(lse) + exp(sink_h)) and o' = o exp(lse - lse'); then o' (bf16) goes to
// rows [r0, r0 + rows) of o_dst [B, Lr, H, Dv] and lse' to those of lse_dst [B, H, Lr].
void finish_forward(const float* o_acc, const float* lse_acc, const float* sink, int B,
                    int64_t rows, int H, int Dv, __nv_bfloat16* o_dst, float* lse_dst, int64_t Lr,
                    int64_t r0, cudaStream_t s);

// dst[i] += src[i], i < n.
void add_inplace(float* dst, const float* src, int64_t n, cudaStream_t s);

// dst[i] = float(src[i]), i < n.
void to_f32(float* dst, const __nv_bfloat16* src, int64_t n, cudaStream_t s);

// dsink[h] (+)= -sum_{b,i} exp(sink_h - lse[b,h,i]) delta[b,h,i] over [B, H, L];
// accumulate = false overwrites.
void sink_backward(const float* sink, const float* lse, const float* delta, int B, int H, int64_t L,
                   float* dsink, bool accumulate, cudaStream_t s);

// The gradient of a query-side logit term c_i that enters every logit of row i (FoX's query
// lane), summed over ALL keys, without softcap: sum_j dS_ij = sum_j P_ij (dP_ij - delta_i)
// = delta_i (1 - sum_j P_ij) in exact arithmetic, and sum_j P_ij = exp(lse_keys_i - lse_i),
// lse_keys the keys' own log-sum-exp (the attention's forward lse) and lse the final one
// (after a sink; equal to lse_keys without one, then the result is exactly 0). Summing dS
// over key blocks instead would keep the bf16 rounding of P in O (sdpa.hpp, dbias_q_sums).
//   dq[b, i, h] = delta[b, h, i] (1 - exp(lse_keys[b, h, i] - lse[b, h, i])), [B, L, H] out.
void query_bias_total(const float* delta, const float* lse_keys, const float* lse, int B, int H,
                      int64_t L, float* dq, cudaStream_t s);

}  // namespace lcr::cuda::partials
