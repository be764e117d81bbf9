#pragma once
// The model's non-attention layers on the GPU: the CUDA twins of core/model/layers.hpp,
// loss.hpp and the AdamW update of optimizer.hpp, same math, same "ADDED / overwritten"
// contract. fp32 device pointers, rows r = b L + t, row-major [R, D]; every call is
// stream-ordered and checks its launch (lcr::Error on failure).
//
// Determinism: every reduction (RMSNorm gain gradient, bias gradient, embedding gradient,
// gradient norm) is summed in a fixed order by one thread or in fixed-size row blocks whose
// partials are summed in block order: the same bits on every run of the same GPU build.
// The embedding backward needs no atomics: the host sorts the rows by token once per batch
// (EmbeddingPlan) and cuts each token's rows into chunks of at most kEmbeddingChunk; one
// thread per (chunk, column) sums a chunk's rows in order, then one per (token, column) adds
// the token's chunk sums in order (so a frequent token's thousands of rows do not run as one
// serial chain on one multiprocessor, which is slow when a batch has few distinct tokens).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace lcr::cuda::model {

// Scratch for the row-block partial sums of the reductions above: [rows_blocks(R), N].
constexpr int kRowBlock = 256;
inline int64_t row_blocks(int64_t R) { return (R + kRowBlock - 1) / kRowBlock; }
inline int64_t partial_floats(int64_t R, int64_t N) { return row_blocks(R) * N; }

// y = x / sqrt(mean_d x^2 + eps) * g; x, y [R, D], g [D], rstd [R].
void rmsnorm_forward(int64_t R, int64_t D, const float* x, const float* g, float eps, float* y,
                     float* rstd, cudaStream_t s);
// dx ADDED, dg ADDED; partial: partial_floats(R, D) scratch floats.
void rmsnorm_backward(int64_t R, int64_t D, const float* x, const float* g, const float* rstd,
                      const float* dy, float* dx, float* dg, float* partial, cudaStream_t s);

// h = silu(gate) * up over n values.
void swiglu_forward(int64_t n, const float* gate, const float* up, float* h, cudaStream_t s);
// dgate, dup overwritten.
void swiglu_backward(int64_t n, const float* gate, const float* up, const float* dh, float* dgate,
                     float* dup, cudaStream_t s);

// x[r] = E[tokens[r]]; tokens [R] device int32 in [0, V) (checked by the caller).
void embedding_forward(int64_t R, int64_t D, const int32_t* tokens, const float* E, float* x,
                       cudaStream_t s);

// The rows of a batch grouped by token, built on the host from the host token ids:
// rows[starts[u] .. starts[u+1]) are the rows (increasing) holding token ids[u].
constexpr int32_t kEmbeddingChunk = 64;
struct EmbeddingPlan {
  std::vector<int32_t> ids;     // distinct tokens, increasing
  std::vector<int32_t> starts;  // ids.size() + 1
  std::vector<int32_t> rows;    // R
  // rows[chunks[c] .. chunks[c+1]) is chunk c (<= kEmbeddingChunk rows of one token); token
  // u's chunks are id_chunks[u] .. id_chunks[u+1).
  std::vector<int32_t> chunks;     // n_chunks + 1
  std::vector<int32_t> id_chunks;  // ids.size() + 1
  int64_t n_chunks() const { return int64_t(chunks.size()) - 1; }
};
EmbeddingPlan plan_embedding_backward(const int32_t* host_tokens, int64_t R);
// dE[ids[u]] += sum of dx over that token's rows (in row order within a chunk, chunks in
// order). Device copies of the plan's arrays; n_ids = ids.size(), partial: n_chunks * D
// floats of scratch.
void embedding_backward(int64_t n_ids, int64_t n_chunks, int64_t D, const int32_t* ids,
                        const int32_t* id_chunks, const int32_t* chunks, const int32_t* rows,
                        const float* dx, float* partial, float* dE, cudaStream_t s);

// y[r, :] += b; y [R, N].
void add_bias(int64_t R, int64_t N, const float* b, float* y, cudaStream_t s);
// db ADDED with sum_r dy[r, :]; partial: partial_floats(R, N) scratch floats.
void bias_backward(int64_t R, int64_t N, const float* dy, float* db, float* partial,
                   cudaStream_t s);

// logits [R, V], labels [R] (-1 = ignored) -> lse [R], row_loss [R] = lse - logit[label]
// (0 when ignored). Sums in fp32 with the row max subtracted.
// With a row stride ld >= V (rows padded for aligned LM-head products, GpuModel): the
// columns [V, ld) are ignored by the forward and set to 0 by the backward.
void cross_entropy_forward(int64_t R, int64_t V, int64_t ld, const float* logits,
                           const int32_t* labels, float* lse, float* row_loss, cudaStream_t s);
inline void cross_entropy_forward(int64_t R, int64_t V, const float* logits, const int32_t* labels,
                                  float* lse, float* row_loss, cudaStream_t s) {
  cross_entropy_forward(R, V, V, logits, labels, lse, row_loss, s);
}
// dlogits = scale (softmax - onehot) for labelled rows, 0 for ignored rows; in place allowed.
void cross_entropy_backward(int64_t R, int64_t V, int64_t ld, const float* logits,
                            const int32_t* labels, const float* lse, float scale, float* dlogits,
                            cudaStream_t s);
inline void cross_entropy_backward(int64_t R, int64_t V, const float* logits, const int32_t* labels,
                                   const float* lse, float scale, float* dlogits, cudaStream_t s) {
  cross_entropy_backward(R, V, V, logits, labels, lse, scale, dlogits, s);
}

// Conversions and vector ops over n values.
void to_bf16(int64_t n, const float* x, __nv_bfloat16* y, cudaStream_t s);
void to_f32(int64_t n, const __nv_bfloat16* x, float* y, cudaStream_t s);
void axpy(int64_t n, float a, const float* x, float* y, cudaStream_t s);  // y += a x
void scale(int64_t n, float a, float* x, cudaStream_t s);                 // x *= a
// y[r, c] += x[r, c] for r < rows, c < cols, rows of x and y ldx and ldy floats apart.
void add_rows(int64_t rows, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
              cudaStream_t s);

// FoX under context parallelism: dz[b, t, h] += after[b, h] sigmoid(-z[b, t, h]) over
// z, dz [B, L, H] (the gradient the later chunks' dc sum adds through log sigmoid).
void fox_gate_add_suffix(int64_t B, int64_t L, int64_t H, const float* z, const float* after,
                         float* dz, cudaStream_t s);

// Number of NaN/Inf among n values (synchronises the stream; used after a bad loss only).
int64_t count_nonfinite(int64_t n, const float* x, cudaStream_t s);

// ---- AdamW (core/model/optimizer.hpp, same update order) ----
constexpr int64_t kNormChunk = 8192;
inline int64_t norm_chunks(int64_t n) { return (n + kNormChunk - 1) / kNormChunk; }
// part[c] = sum of g^2 over chunk c (kNormChunk values, in order, in double).
void sumsq_chunks(int64_t n, const float* g, double* part, cudaStream_t s);
struct AdamWStep {
  float lr, beta1, beta2, eps;
  float wd_factor;  // 1 - lr weight_decay
  float scale;      // clip scale applied to g
  float bc1, bc2;   // 1 - beta^t
};
// decay [n] uint8 (1 = weight decay applies). p, m, v updated in place.
void adamw_update(int64_t n, float* p, const float* g, float* m, float* v, const uint8_t* decay,
                  const AdamWStep& a, cudaStream_t s);
// p = clamp(p, lo, hi) over n values.
void clamp_values(int64_t n, float* p, float lo, float hi, cudaStream_t s);

}  // namespace lcr::cuda::model
