#pragma once
// Launchers of the CUDA lane kernels (lane_kernels.cu, goat_key_kernels.cu,
// aux_kernels.cu): plain structs of device pointers and sizes, no Kokkos, so both nvcc and
// the host orchestration (attention_cuda.cpp) include this. All launches are stream-ordered and
// checked; a launcher with nothing to do (an empty tensor) launches nothing.
//
// Row kernels: a group of TPR threads per row x [d] (a row = one (b, position, head); TPR
// a power of two >= 4 with 8 TPR >= the row's widths, each thread 8 elements, so a warp
// works on 32 / TPR rows at once). The forward strides over the rows in memory order; in the
// backward a block of kWarps warps owns kPositions consecutive positions of ONE head for
// every batch row, so per-head parameter gradients are summed per block in a fixed order
// and written as one partial row per block (partials [chunks, Hx, cols], chunk = position
// / kPositions); reduce_partials then sums the partials in a fixed order. No atomics
// anywhere: the results are bitwise reproducible. Copy and GOAT without QK-RMSNorm take the
// element-parallel kernels of element_kernels.cu instead (lanes_forward / lanes_backward
// choose; same values, bit for bit).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention/spec.hpp"
#include "kernels/schemes/goat/goat_recipe.hpp"

namespace lcr::cuda::lanes {

// Warps per block of the row kernels; positions per backward block (each block writes one
// partial row of the parameter gradients, so fewer, longer blocks also shorten the
// reductions: 128 gives 2K blocks at L = 16K, H = 16).
constexpr int kWarps = 4;
constexpr int kPositions = 128;
constexpr int kMaxRowWidth = 256;  // x width d and lane width dp handled per row
constexpr int kMaxTable = 128;     // frequencies per trig table (d/2, d or R)

inline int position_chunks(int L) { return (L + kPositions - 1) / kPositions; }

// Blocks of `threads` for a grid-stride loop over n items: at least 1, at most 65535.
inline int blocks_for(int64_t n, int threads) {
  return int(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 65535)));
}

enum class LaneKind : int { Copy = 0, Rope = 1, Goat = 2, Pope = 3 };

// A position table: entry [t, m] = (cos, sin)(freq[m] * coord_m(pos0 + t)), the angle
// formed in double (positions up to ~1e7 keep ~1e-9 rad), stored as float2 [L, M].
// coord: axis 0 = p, 1 = p / grid_w, 2 = p % grid_w (GOAT2D).
struct TrigSpec {
  int M = 0;
  int64_t grid_w = 1;
  double freq[kMaxTable] = {};
  int axis[kMaxTable] = {};
};
void trig_table(const TrigSpec& spec, int64_t pos0, int L, float2* out, cudaStream_t s);

// The lane map of one side (queries or keys). x [B, L, Hx, d] bf16 -> y [B, L, Hx, dp]
// bf16, dp = the padded lane width (a multiple of 8; padding lanes are zero).
struct RowLaneArgs {
  LaneKind kind = LaneKind::Copy;
  bool is_query = true;
  int B = 0, L = 0, Hx = 0, d = 0, dp = 0;
  int64_t pos0 = 0;
  const __nv_bfloat16* x = nullptr;
  const float* gain = nullptr;  // QK-RMSNorm gain [d], or null (no norm)
  float eps = 1e-6f;
  const float2* trig = nullptr;  // [L, M] table of this side's positions
  int M = 0;
  float scale = 1.f;       // RoPE: YaRN factor a; GOAT: content scale (queries) / 1 (keys)
  float pass_scale = 1.f;  // RoPE: the factor on the dims past rotary (pass_through_factor)
  // RoPE: the first `rotary` dims rotate, pairs (2m, 2m+1) or (m, m + rotary/2).
  int rotary = 0;
  bool interleaved = false;
  // GOAT: q' = [scale q_c, lane_scale (a cos + b sin, a sin - b cos) per mode, 1, 1],
  //       k' = [k_c, cos, sin per mode, hi(sqrt(d_h) u), lo(sqrt(d_h) u)].
  int R = 0;
  const float* alpha = nullptr;  // [H, R] (queries)
  const float* beta = nullptr;   // [H, R] (queries)
  float lane_scale = 1.f;        // sqrt(d_h)
  const double* u = nullptr;     // [L, Hkv] key bias u(j) (keys)
  double u_scale = 1.0;          // sqrt(d_h): k' carries sqrt(d_h) u against q' = 1
  // Forward scratch [L, Hx, 2R + 2]: the prior lanes of each (position, head), formed once
  // per call (they do not depend on the batch row), then copied into every row.
  __nv_bfloat16* prior = nullptr;
  // PoPE: keys' phase adds clamp(delta[hk, c]); (cos, sin) of it per [Hkv, d].
  const float2* delta_trig = nullptr;
  const float* delta = nullptr;  // [Hkv, d] raw values (the clamp's gradient mask)
};
void lanes_forward(const RowLaneArgs& a, __nv_bfloat16* y, cudaStream_t s);

// Backward of lanes_forward (QK-RMSNorm included): dy [B, L, Hx, dp] fp32 (or dy16, the
// same in bf16: cuDNN's d q', d k' from sdpa_backward_bf16_qk) -> dx [B, L, Hx, d] fp32
// (overwritten). Parameter-gradient partials, each [chunks, Hx, cols]
// (chunks = position_chunks(L)) or null when not wanted:
//   gain_part  cols d    d gain (summed over heads by the reduction)
//   mode_part  cols 2R   GOAT queries: [sum g0 cos + g1 sin | sum g0 sin - g1 cos] per mode
//   delta_part cols d    PoPE keys: d delta (zero where delta is outside the clamp range)
// du [L, Hx] (GOAT keys): d loss / d u(j), summed over the batch.
struct RowLaneGrads {
  const float* dy = nullptr;
  const __nv_bfloat16* dy16 = nullptr;  // instead of dy when set
  float* dx = nullptr;
  float* gain_part = nullptr;
  float* mode_part = nullptr;
  float* delta_part = nullptr;
  float* du = nullptr;
};
void lanes_backward(const RowLaneArgs& a, const RowLaneGrads& g, cudaStream_t s);

// out[h * ncols + c] += out_scale * sum_chunk part[(chunk * Hx + h) * stride + col0 + c],
// or, with sum_heads, out[c] += out_scale * sum_{chunk, h} (...). One block per output
// element, sums in double in a fixed order (threads stride the items, then a tree).
void reduce_partials(const float* part, int chunks, int Hx, int stride, int col0, int ncols,
                     bool sum_heads, double out_scale, float* out, cudaStream_t s);

// ---- GOAT's query gate (goat.query_gate; kernels/schemes/goat/goat.hpp) ----
// g = sigmoid(gate_bias_h - softplus(gate_scale_h) |q_c|) per query row, q_c the content
// after QK-RMSNorm. A row of q' is [content_scale q_c (d), the prior lanes (2R + 2: per mode
// lane_scale (al cos + be sin, al sin - be cos), then 1, 1 against u's two key lanes),
// padding to dp]. One warp a row.
struct GoatGateArgs {
  int B = 0, L = 0, H = 0, d = 0, dp = 0, R = 0, M = 0;
  const __nv_bfloat16* x = nullptr;  // q [B, L, H, d]
  const float* gain = nullptr;       // QK-RMSNorm gain [d], or null
  float eps = 1e-6f;
  float content_scale = 1.f, lane_scale = 1.f;
  const float *gate_scale = nullptr, *gate_bias = nullptr;  // [H]
  const float *alpha = nullptr, *beta = nullptr;            // [H, R], the lane parameters
  const float2* trig = nullptr;                             // [L, M] the queries' table
};
// g [B, L, H]: the gate of every query row.
void goat_gate_values(const GoatGateArgs& a, float* g, cudaStream_t s);
// q' [B, L, H, dp]: the prior lanes times g, in place.
void goat_gate_forward(const GoatGateArgs& a, __nv_bfloat16* q2, cudaStream_t s);
// From d q' (dy fp32, or dy16 bf16 when set) into dz [B, L, H, dp] fp32 for the query lanes'
// backward: the prior lanes times g, the content lanes plus the gate's share
// -d pre softplus(gate_scale) q_c / (|q_c| content_scale), where d pre = dg g (1 - g) and dg
// = sum over the prior lanes of d q' times the ungated lane. rows [B, L, H, 2] = (d pre, |q_c|).
void goat_gate_backward(const GoatGateArgs& a, const float* dy, const __nv_bfloat16* dy16,
                        float* dz, float* rows, cudaStream_t s);
// dscale_h += sum -d pre |q_c| sigmoid(gate_scale_h), dbias_h += sum d pre over the rows of
// head h: one block a head, doubles, a fixed order.
void goat_gate_param_grads(const GoatGateArgs& a, const float* rows, float* dscale, float* dbias,
                           cudaStream_t s);

// ---- GOAT recipe "authors" (kernels/schemes/goat/goat_recipe.hpp), one thread an element ----
// lane [m.lane_total()] = the lane parameters of the authors' buffer a [m.authors_total()].
void goat_recipe_expand(const goat::RecipeMap& m, const float* a, float* lane, cudaStream_t s);
// da [m.authors_total()] += the gradient of the authors' parameters from the lane ones dl.
void goat_recipe_contract(const goat::RecipeMap& m, const float* a, const float* dl, float* da,
                          cudaStream_t s);

// ---- GOAT key bias u(j) = lambda p + w2 . silu(W1 phi(p) + b1) + bump 1{p = 0} ----
struct GoatKeyArgs {
  int L = 0, Hkv = 0, N = 0, F = 0;  // N hidden units, F feature pairs (phi has 2F + 2)
  int64_t pos0 = 0;
  double feature_freq[kMaxTable] = {};
  double inv_train_len = 1, inv_log_train = 1;
  const double* phi = nullptr;                              // [L, 2F+2] goat_features
  const float *lambda = nullptr, *bump = nullptr;           // [Hkv]
  const float *w1 = nullptr, *b1 = nullptr, *w2 = nullptr;  // [Hkv, N, 2F+2], [Hkv, N] x2
};
// phi(p) for p = pos0 .. pos0 + L - 1 into [L, 2F + 2] (double; depends on positions only,
// so the attention API computes it once per key span and caches it).
void goat_features(const GoatKeyArgs& a, double* phi, cudaStream_t s);
void goat_key_bias(const GoatKeyArgs& a, double* u, cudaStream_t s);  // u [L, Hkv]
// Partials [chunks, Hkv, 2 + N (2 + NF)] of the key-bias parameter gradients from du
// [L, Hkv]; per KV head the columns are lambda, bump, then per hidden unit n: w2_n, b1_n,
// W1_n,0 .. W1_n,NF-1. chunks = goat_key_chunks(L). Reduce them with reduce_partials into
// a zeroed [Hkv, cols] buffer, then goat_key_param_scatter adds that to the slices.
int goat_key_chunks(int L);
int goat_key_cols(const GoatKeyArgs& a);
void goat_key_param_partials(const GoatKeyArgs& a, const float* du, float* part, cudaStream_t s);
struct GoatKeyGradSlices {
  float *lambda = nullptr, *bump = nullptr, *w1 = nullptr, *b1 = nullptr, *w2 = nullptr;
};
void goat_key_param_scatter(const GoatKeyArgs& a, const float* sums, const GoatKeyGradSlices& out,
                            cudaStream_t s);
// Projects du [L, Hkv] (keys at k_pos0 ..) onto sum_j du(j) = T_hk, which holds exactly when
// the call's keys are every key its queries see and there is no softcap: a shift of u common
// to all keys leaves the softmax unchanged, so sum_j dS_ij = delta_i exp(sink_h - lse_i) per
// row (0 without a sink) and T_hk = -sum_{h of hk's group} dsink[h] (0 when dsink is null).
// The SDPA's du misses that sum by its bf16 dS (dK = dS^T q') and by the offset of delta
// (O made with bf16 P) from its own sum_j P dP, and parameters whose weight on du(j) is
// nearly constant in j (mlp_b1, lambda far from position 0) carry that miss in full. The
// correction is spread over the keys in proportion to the number of query rows that see
// each (Lq queries at q_pos0 ..; keys no query sees keep du = 0). Sums in double in a fixed
// order: per slice of the keys into scratch (goat_du_project_doubles(Hkv) doubles), then
// the slices in order.
int goat_du_project_doubles(int Hkv);
void goat_du_project(int L, int Hkv, int G, int64_t k_pos0, int Lq, int64_t q_pos0,
                     const float* dsink, float* du, double* scratch, cudaStream_t s);

// ---- small helpers ----
// (cos, sin)(clamp(delta, -2 pi, 0)) for PoPE's key phase, n values.
void pope_delta_trig(const float* delta, int n, float2* out, cudaStream_t s);
// ALiBi slopes by the convention (alibi_slope, spec.hpp), formed in double and rounded to
// float like the CPU path.
void alibi_slopes(int H, AlibiSlopes slopes, float* out, cudaStream_t s);

// ---- output, sink, softmax-backward row terms ----
// o [B, Lq, H, Dv] bf16 from the SDPA's fp32 o_f32. With a sink (else null):
// lse [B, H, Lq] <- logaddexp(lse, sink[h]) and o_f32 *= exp(old - new) in place (0 where
// the row saw no key), so o_f32 stays the final output for row_delta_f32.
void finish_output(int B, int Lq, int H, int Dv, const float* sink, float* o_f32, float* lse,
                   __nv_bfloat16* o, cudaStream_t s);
// delta [B, H, Lq] = <dO_i, O_i> from the fp32 output (sdpa_row_delta reads the bf16 one).
void row_delta_f32(int B, int Lq, int H, int Dv, const float* o_f32, const __nv_bfloat16* dout,
                   float* delta, cudaStream_t s);
// dsink[h] = -sum_{b,i} exp(sink[h] - lse) delta (overwritten); lse is the final one. With
// weight [B, Lq, H], each row's term times its weight (GOAT's du total under the query gate).
void sink_backward(int B, int Lq, int H, const float* sink, const float* lse, const float* delta,
                   float* dsink, cudaStream_t s, const float* weight = nullptr);
// FoX query lane without softcap, exactly: a per-row shift of the logits leaves the softmax
// unchanged, so d c_i = sum_j dS_ij = delta_i (1 - sum_j P_ij) = delta_i exp(sink_h - lse_i),
// 0 without a sink. dcq [B, Lq, H] overwritten.
void fox_query_grad(int B, int Lq, int H, const float* delta, const float* lse, const float* sink,
                    float* dcq, cudaStream_t s);
// FoX query lane with softcap (no closed form): d c_i = sum_j dS_ij = A_i - D_i C_i from the
// SDPA backward's row sums (sums = its dbias_q_sums [3][B, Lq, H]; sdpa.hpp says why not
// its dbias_q). dcq [B, Lq, H] overwritten.
void fox_query_grad_from_sums(int B, int Lq, int H, const float* sums, float* dcq, cudaStream_t s);

// ---- FoX: c_t = offset + sum_{s <= t} log sigmoid(x_s) over [B, L, H] (double sums) ----
// scratch: at least fox_scratch_doubles(B, L, H) doubles.
int64_t fox_scratch_doubles(int B, int L, int H);
void fox_cumulative(int B, int L, int H, const float* x, const float* offset, float* c,
                    double* scratch, cudaStream_t s);
// dx_s = sigmoid(-x_s) sum_{t >= s} dc_t (overwritten); doffset[b, h] = sum_t dc_t when given.
void fox_cumulative_backward(int B, int L, int H, const float* x, const float* dc, float* dx,
                             float* doffset, double* scratch, cudaStream_t s);

}  // namespace lcr::cuda::lanes
