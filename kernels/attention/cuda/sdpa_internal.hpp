#pragma once
// Internal to lcr_cuda_sdpa: the parameter block the kernels receive by value, the width
// classes, and the launchers the public functions of sdpa.hpp dispatch to (the choice of
// kernel per class: sdpa_heuristics.hpp). The tuning library (sdpa_tuning.hpp), its benchmark
// and the tests include this to run other tilings through the same dispatch.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/cuda/sdpa.hpp"

namespace lcr::cuda::detail {

struct KernelParams {
  SdpaArgs a;
  // forward outputs
  __nv_bfloat16* o = nullptr;
  float* o_f32 = nullptr;
  float* lse = nullptr;
  // backward inputs / outputs
  const float* lse_in = nullptr;
  const float* delta = nullptr;
  const __nv_bfloat16* dout = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr, *dbias_q = nullptr, *dbias_k = nullptr;
  float* dbias_q_sums = nullptr;  // [3][B, Lq, H] row sums A, C, D (sdpa.hpp)
  bool accumulate = false;
  int n_tiles = 0;  // query tiles (forward) or key tiles (backward)
};

// Padded head width class the kernels are compiled for: 64, 128 or 256 (the real width
// may be smaller; the padding lanes are zero-filled in shared memory).
inline int width_class(int d) { return d <= 64 ? 64 : (d <= 128 ? 128 : 256); }
// The nine (QK, V) width-class pairs as an index 0..8, 3 * c(D) + c(Dv) with c = 0, 1, 2 for
// 64, 128, 256; pair_dp / pair_dvp give the pair's widths back.
constexpr int kWidthPairs = 9;
inline int width_pair(int D, int Dv) {
  auto c = [](int d) { return d <= 64 ? 0 : (d <= 128 ? 1 : 2); };
  return 3 * c(D) + c(Dv);
}
constexpr int pair_dp(int i) { return 64 << (i / 3); }
constexpr int pair_dvp(int i) { return 64 << (i % 3); }

// One kernel of one tile configuration and path, launched on stream s.
using SdpaLauncher = void (*)(KernelParams, cudaStream_t);
// The kernels a call of one width class can take, one per path (sdpa_heuristics.hpp says
// which path a call takes): plain null: plain calls take opts; bias (kBias) null: such calls
// take opts; opts null (tuning alternatives only): the variant cannot serve options.
struct SdpaKernels {
  SdpaLauncher plain = nullptr, opts = nullptr, bias = nullptr;
};
// The kernels the library ships for the width class of (D, Dv): sdpa_heuristics.hpp's choice,
// for code with wgmma (sm_90a) or without (mma.sync only); the two-argument forms for the
// code the current device runs (device_code.hpp).
const SdpaKernels& forward_kernels(int D, int Dv, bool wgmma);
const SdpaKernels& backward_kernels(int D, int Dv, bool wgmma);
const SdpaKernels& forward_kernels(int D, int Dv);
const SdpaKernels& backward_kernels(int D, int Dv);
// Runs the path p's arguments take on k's kernel for it (the backward zeroes dq, dbias_q and
// dbias_q_sums first unless p.accumulate); false, running nothing, when k has no kernel for
// that path. sdpa_forward / sdpa_backward call these with forward_kernels / backward_kernels;
// the tuning library (sdpa_tuning.hpp) with its alternatives.
bool launch_forward(const KernelParams& p, const SdpaKernels& k, cudaStream_t s);
bool launch_backward(const KernelParams& p, const SdpaKernels& k, cudaStream_t s);

// Where one forward CTA works (both forward kernels): query tile qt of BM rows, the tiles
// issued last-first (in causal attention they carry the most keys), batch b, head h, KV head
// hk; keys j < jend are those some row of the tile sees (j < Lk and k_pos0 + j <= q_pos0 + i0 +
// nq - 1), n_kt tiles of BN; q, k, v: the tile's first query row, the head's first key and
// value rows, with their row strides.
struct FwdTile {
  int b, h, hk, i0, nq, jend, n_kt;
  int64_t dpos;  // p_i - p_j = dpos + i - j
  const __nv_bfloat16 *q, *k, *v;
  int64_t q_ld, k_ld, v_ld;
};
__host__ __device__ inline FwdTile fwd_tile(const KernelParams& p, int block, int BM, int BN) {
  const SdpaArgs& a = p.a;
  FwdTile t;
  const int bh_count = a.B * a.H, bh = block % bh_count;
  const int qt = p.n_tiles - 1 - block / bh_count;
  t.b = bh / a.H, t.h = bh % a.H, t.hk = t.h / (a.H / a.Hkv);
  t.i0 = qt * BM;
  t.nq = a.Lq - t.i0 < BM ? a.Lq - t.i0 : BM;
  t.dpos = a.q_pos0 - a.k_pos0;
  const int64_t jend = t.dpos + t.i0 + t.nq;
  t.jend = int(jend < 0 ? 0 : (jend > a.Lk ? a.Lk : jend));
  t.n_kt = (t.jend + BN - 1) / BN;
  t.q_ld = int64_t(a.H) * a.D, t.k_ld = int64_t(a.Hkv) * a.D, t.v_ld = int64_t(a.Hkv) * a.Dv;
  t.q = a.q + (int64_t(t.b) * a.Lq + t.i0) * t.q_ld + int64_t(t.h) * a.D;
  t.k = a.k + int64_t(t.b) * a.Lk * t.k_ld + int64_t(t.hk) * a.D;
  t.v = a.v + int64_t(t.b) * a.Lk * t.v_ld + int64_t(t.hk) * a.Dv;
  return t;
}

// The vendor specialisation (sdpa_vendor.cpp): true when cuDNN ran the call (a.impl is
// Cudnn or Auto and cuDNN serves it), false when lcr's kernels should; throws for impl Cudnn
// when cuDNN cannot serve it. dq16 / dk16 (with dq, dk null): cuDNN's bf16 dQ / dK left
// there, not widened (sdpa_backward_bf16_qk).
bool vendor_forward(const SdpaArgs& a, __nv_bfloat16* o, const float* o_f32, float* lse,
                    cudaStream_t s);
bool vendor_backward(const SdpaArgs& a, const float* lse, const __nv_bfloat16* o,
                     const __nv_bfloat16* dout, float* dq, float* dk, float* dv,
                     const float* dbias_q, const float* dbias_k, const float* dbias_q_sums,
                     bool accumulate, cudaStream_t s, __nv_bfloat16* dq16 = nullptr,
                     __nv_bfloat16* dk16 = nullptr);

// Whether the option logic (ALiBi, bias lanes, softcap) is needed; without it the
// kernels run the plain instantiation.
inline bool has_options(const SdpaArgs& a) {
  return a.alibi_slopes || a.bias_q || a.bias_k || a.softcap > 0.f;
}
// Whether a forward call takes the option path (kOpts): options, or a scale the plain path
// cannot take (it finds the row max on unscaled S, which needs scale > 0).
inline bool forward_needs_options(const SdpaArgs& a) { return has_options(a) || !(a.scale > 0.f); }
// Options that split into a row term and a column term of the logit (FoX's bias lanes,
// ALiBi), no softcap and a positive scale: the kernels' kBias form serves these. (The wgmma
// forward's kBias, and its backward's at QK 64, start S's accumulators from the column term
// over the scale and find the row max before scaling, as the plain path does; any other scale
// takes the option path.)
inline bool row_col_terms_only(const SdpaArgs& a) {
  return (a.bias_q || a.bias_k || a.alibi_slopes) && !(a.softcap > 0.f) && a.scale > 0.f;
}

// The path a call takes among a width class's kernels (launch_forward, launch_backward and the
// emulators pick with these): kBias for a row and a column term alone where the class has that
// kernel, kPlain without options where it has a plain one, else kOpts (which serves all).
enum class SdpaPath { kPlain, kOpts, kBias };
inline SdpaPath forward_path(const SdpaArgs& a, bool has_plain = true, bool has_bias = true) {
  if (has_bias && row_col_terms_only(a)) return SdpaPath::kBias;
  return forward_needs_options(a) || !has_plain ? SdpaPath::kOpts : SdpaPath::kPlain;
}
// The backward's kBias form gives dbias_k only; dbias_q and its sums take the option path.
inline SdpaPath backward_path(const KernelParams& p, bool has_plain = true, bool has_bias = true) {
  if (has_bias && row_col_terms_only(p.a) && !p.dbias_q && !p.dbias_q_sums) return SdpaPath::kBias;
  const bool opts = has_options(p.a) || p.dbias_q || p.dbias_k || p.dbias_q_sums;
  return opts || !has_plain ? SdpaPath::kOpts : SdpaPath::kPlain;
}

// sdpa_backward's parameters (its contract; the emulators take the same): outputs of the query
// side only where there are queries.
inline KernelParams backward_params(const SdpaArgs& a, const float* lse, const float* delta,
                                    const __nv_bfloat16* dout, float* dq, float* dk, float* dv,
                                    bool accumulate, float* dbias_q, float* dbias_k,
                                    float* dbias_q_sums) {
  KernelParams p;
  p.a = a;
  p.lse_in = lse;
  p.delta = delta;
  p.dout = dout;
  p.dq = a.Lq > 0 ? dq : nullptr;
  p.dk = dk;
  p.dv = dv;
  p.dbias_q = a.Lq > 0 ? dbias_q : nullptr;
  p.dbias_k = dbias_k;
  p.dbias_q_sums = a.Lq > 0 ? dbias_q_sums : nullptr;
  p.accumulate = accumulate;
  return p;
}

}  // namespace lcr::cuda::detail
