// Public backward entry point of the CUDA SDPA (sdpa.hpp) and its tile shapes per
// head-width class (BM query rows per step; the mma.sync key tile is 16 rows per warp):
//   plain and bias-lane / ALiBi (kBias) paths at QK / V 64 / 64, 128 / 128, 128 / 64 and
//                  256 / 128: wgmma (sdpa_backward_wgmma.cuh), two warpgroups of 64 keys x
//                  queries 128 (64-wide) or 64; at 256 / 128 the warpgroups share 64 keys,
//                  split dK's and dV's columns and S^T's query columns
//   option path (softcap, dbias_q), mma.sync (sdpa_backward_kernel.cuh):
//   D, Dv <= 64  : keys 128 (8 warps) x queries 64, dQ pipelined
//   D, Dv <= 128 : keys 128 (8 warps) x queries 64 (dK, dV, S^T, dP^T in ~200 registers),
//                  dQ pipelined (kPipe), 32-row dQ blocks
//   wider        : keys 64 (4 warps) x queries 32 (dK/dV of 256 lanes partly spill)
// The mma.sync plain tilings (keys 128 x queries 128 at 64 wide, x 16 at 256 / 128, ...)
// remain as variants for the benchmark.
// dq, dbias_q and dbias_q_sums are accumulated with fp32 atomics (sdpa_backward_kernel.cuh
// says why); without `accumulate` they are zeroed first on the same stream.
#include <utility>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/sdpa_backward_kernel.cuh"
#include "kernels/attention/cuda/sdpa_backward_wgmma.cuh"

namespace lcr::cuda {
namespace detail {
namespace {

struct BwdVariant {
  const char* name;
  void (*plain)(KernelParams, cudaStream_t);
  void (*opts)(KernelParams, cudaStream_t);
  // Bias lanes and/or ALiBi, no softcap, no dbias_q / dbias_q_sums: the plain tiling with
  // the terms folded in (kBias); null: such calls take the option path.
  void (*bias)(KernelParams, cudaStream_t) = nullptr;
};

#define LCR_BWD(DP, DVP, BM, NW)                                                              \
  BwdVariant {                                                                                \
    "q" #BM "_w" #NW, &launch_bwd<DP, DVP, BM, NW, false>, &launch_bwd<DP, DVP, BM, NW, true> \
  }
#define LCR_BWD_PLAIN(DP, DVP, BM, NW) \
  BwdVariant { "q" #BM "_w" #NW, &launch_bwd<DP, DVP, BM, NW, false>, nullptr }
#define LCR_BWD_OPTS(DP, DVP, BM, NW) \
  BwdVariant { "q" #BM "_w" #NW, nullptr, &launch_bwd<DP, DVP, BM, NW, true> }

// Default: 128-query steps for the plain path (measured 246 vs 236 TFLOP/s at 1x16x16384,
// 255 vs 242 at 1x8x65536, H200, 2026-11-29); the option path keeps 64-query steps. The
// `_pipe` kernels (dQ one step late, one barrier per step) are the defaults since
// 2026-11-30: 262 vs 247 TFLOP/s at 1x16x16384x64, 279 vs 258 at D = 128, 270 vs 253 at
// 1x8x65536x64 (H200, one run, scripts/device/sdpa_check.sh). At D = 128 the dQ product
// also takes two m-tiles per warp (DQM = 2, sdpa_backward_kernel.cuh): 293 vs 283 TFLOP/s
// at 1x16x16384x128; at D = 64 it lost (260 vs 265, 262 vs 275 at 1x8x65536).
// The wgmma kernel (sdpa_backward_wgmma.cuh) for the plain path: NWG warpgroups of 64 keys,
// BM-query steps, at least MB CTAs per SM, K / V fragments in registers (KV); the option path
// keeps the mma.sync kernel OPTS, the bias path (kBias) takes BIAS: the wgmma kernel's kBias
// form in the defaults, the mma.sync one in the others.
#define LCR_BWD_WG(DP, DVP, NWG, BM, MB, KV, OPTS, BIAS)                                         \
  BwdVariant {                                                                                   \
    "wg" #NWG "_q" #BM "_mb" #MB "_kv" #KV, &launch_bwd_wg<DP, DVP, NWG, BM, MB, KV>, OPTS, BIAS \
  }
#define LCR_BWD_OPTS64 &launch_bwd<64, 64, 64, 8, 1, true>
#define LCR_BWD_BIAS64 &launch_bwd<64, 64, 128, 8, false, true, 1, true>
#define LCR_BWD_OPTS128 &launch_bwd<128, 128, 64, 8, true, true, 2>
#define LCR_BWD_BIAS128 &launch_bwd<128, 128, 64, 8, false, true, 2, true>

// Defaults since 2026-12-02 (H200, scripts/device/wgmma_bwd_check.sh, ~03:45 UTC): the plain
// path on wgmma, 310 against 262 TFLOP/s (q128_w8_pipe) at 1x16x16384x64 (321 vs 272 at
// 1x8x65536 in the ~03:30 run), 355 vs 296 (q64_w8_pipe_dq2) at D = 128, 300 vs 233 at QK 128 /
// V 64; the bias-lane / ALiBi path (kBias) on wgmma too (293 / 340 / 306 against the mma.sync
// kBias kernel's 234 / 273 / 243 at the three benchmark shapes, ~04:47 UTC); the option path
// (softcap, dbias_q) keeps its mma.sync kernel. dq leaves the wgmma kernels through shared
// memory and bulk reductions where dq is 16-byte aligned (launch_bwd_wg; 392 vs 346-355 TFLOP/s
// at D = 128, 327 vs 300 at 128 / 64, 242 vs 222 at 256 / 128, D = 64 unchanged, ~13:05 UTC),
// else by 8-byte atomics (a 16-byte form measured 297 / 354 / 307 / 291 / 216 against 303 / 346
// / 315 / 301 / 217 TFLOP/s, ~06:48 UTC, and was removed: docs/cuda.md). Since 2026-12-03 the
// reductions are the TMA engine's tensor form, on the kBias path too (its backward 1.03x /
// 1.11x / 1.03x / 1.14x / 1.20x faster than with atomics at 16K D 64 / 16K D 128 / 64K D 64 /
// 128 / 64 / 256 / 128: docs/cuda.md "dq by tensor reductions").
const BwdVariant k64_64[] = {
    LCR_BWD_WG(64, 64, 2, 128, 1, 0, LCR_BWD_OPTS64, (&launch_bwd_wg<64, 64, 2, 128, 1, 0, 1>)),
    BwdVariant{"q128_w8_pipe/opts_q64", &launch_bwd<64, 64, 128, 8, false, true>,
               &launch_bwd<64, 64, 64, 8, true, true>,
               &launch_bwd<64, 64, 128, 8, false, true, 1, true>},
    BwdVariant{"q128_w8/opts_q64", &launch_bwd<64, 64, 128, 8, false>,
               &launch_bwd<64, 64, 64, 8, true>},
    BwdVariant{"q64_w8_pipe", &launch_bwd<64, 64, 64, 8, false, true>, nullptr},
    LCR_BWD_PLAIN(64, 64, 64, 8),
    LCR_BWD_PLAIN(64, 64, 64, 4),
    LCR_BWD_PLAIN(64, 64, 32, 8),
    LCR_BWD_WG(64, 64, 1, 64, 2, 0, LCR_BWD_OPTS64, LCR_BWD_BIAS64),
    LCR_BWD_WG(64, 64, 2, 64, 1, 1, LCR_BWD_OPTS64, LCR_BWD_BIAS64)};
const BwdVariant k128_128[] = {
    LCR_BWD_WG(128, 128, 2, 64, 1, 0, LCR_BWD_OPTS128, (&launch_bwd_wg<128, 128, 2, 64, 1, 0, 1>)),
    BwdVariant{"q64_w8_pipe_dq2", &launch_bwd<128, 128, 64, 8, false, true, 2>,
               &launch_bwd<128, 128, 64, 8, true, true, 2>,
               &launch_bwd<128, 128, 64, 8, false, true, 2, true>},
    BwdVariant{"q64_w8_pipe", &launch_bwd<128, 128, 64, 8, false, true>,
               &launch_bwd<128, 128, 64, 8, true, true>},
    LCR_BWD(128, 128, 64, 8),
    LCR_BWD_PLAIN(128, 128, 64, 4),
    LCR_BWD_PLAIN(128, 128, 32, 8),
    LCR_BWD_PLAIN(128, 128, 32, 4)};
const BwdVariant k128_64[] = {
    LCR_BWD_WG(128, 64, 2, 64, 1, 1, (&launch_bwd<128, 64, 64, 8, true>),
               (&launch_bwd_wg<128, 64, 2, 64, 1, 0, 1>)),
    LCR_BWD(128, 64, 64, 8),
    LCR_BWD_WG(128, 64, 2, 64, 1, 0, (&launch_bwd<128, 64, 64, 8, true>), nullptr)};
// PoPE at d = 128 (QK 256 / V 128): 16-query steps and 8 warps keep dK, dV of 16 keys x 384
// lanes per warp with few spills (measured 177 vs 151 (q16_w4) vs 128 (q32_w4) TFLOP/s at
// 1x16x16384, H200, 2026-11-29); the option path keeps q32_w4.
// wgmma (2026-12-02; docs/cuda.md "QK 256 / V 128 backward by query columns"): the two
// warpgroups split dK's and dV's columns over one 64-key tile and S^T's query columns: 222.3
// against 191.1 (q16_w8_pipe) at 1x16x16384, 223.4 against 194.7 at 1x8x65536 (~06:36 UTC;
// 198.4 / 196.8 when each warpgroup formed all of S^T, ~04:23).
const BwdVariant k256_128[] = {
    LCR_BWD_WG(256, 128, 2, 64, 1, 0, (&launch_bwd<256, 128, 32, 4, true>),
               (&launch_bwd_wg<256, 128, 2, 64, 1, 0, 1>)),
    // dQ one step late (kPipe): 21.55 vs 23.39 ms at 1x16x16384, 169.5 vs 185.5 at
    // 1x8x65536 (H200, 2026-11-30 08:28 UTC); the default since the SDPA suite ran it.
    BwdVariant{"q16_w8_pipe/opts_q32_w4", &launch_bwd<256, 128, 16, 8, false, true>,
               &launch_bwd<256, 128, 32, 4, true>},
    BwdVariant{"q16_w8", &launch_bwd<256, 128, 16, 8, false>, nullptr},
    LCR_BWD_PLAIN(256, 128, 16, 4), LCR_BWD_PLAIN(256, 128, 32, 4)};
const BwdVariant k64_128[] = {LCR_BWD_OPTS(64, 128, 64, 8)};
const BwdVariant k64_256[] = {LCR_BWD_OPTS(64, 256, 32, 4)};
const BwdVariant k128_256[] = {LCR_BWD_OPTS(128, 256, 32, 4)};
const BwdVariant k256_64[] = {LCR_BWD_OPTS(256, 64, 32, 4)};
const BwdVariant k256_256[] = {LCR_BWD_OPTS(256, 256, 32, 4)};

std::pair<const BwdVariant*, int> variants(int D, int Dv) {
  static const VariantTables<BwdVariant> tables{span(k64_64),   span(k128_128), span(k128_64),
                                                span(k256_128), span(k64_128),  span(k64_256),
                                                span(k128_256), span(k256_64),  span(k256_256)};
  return tables.pick(D, Dv);
}

}  // namespace

bool launch_backward(const KernelParams& p, int variant, cudaStream_t s) {
  const auto [v, n] = variants(p.a.D, p.a.Dv);
  if (variant < 0 || variant >= n) return false;
  const bool opts = has_options(p.a) || p.dbias_q || p.dbias_k || p.dbias_q_sums;
  auto fn = opts || !v[variant].plain ? v[variant].opts : v[variant].plain;
  if (row_col_terms_only(p.a) && !p.dbias_q && !p.dbias_q_sums && v[variant].bias)
    fn = v[variant].bias;
  if (!fn) return false;
  if (!p.accumulate) {
    const auto& a = p.a;
    if (p.dq) LCR_CUDA_CHECK(cudaMemsetAsync(p.dq, 0, sizeof(float) * a.B * a.Lq * a.H * a.D, s));
    if (p.dbias_q)
      LCR_CUDA_CHECK(cudaMemsetAsync(p.dbias_q, 0, sizeof(float) * a.B * a.Lq * a.H, s));
    if (p.dbias_q_sums)
      LCR_CUDA_CHECK(cudaMemsetAsync(p.dbias_q_sums, 0, sizeof(float) * 3 * a.B * a.Lq * a.H, s));
  }
  fn(p, s);
  return true;
}

const char* backward_variant_name(int D, int Dv, int variant) {
  const auto [v, n] = variants(D, Dv);
  return variant >= 0 && variant < n ? v[variant].name : nullptr;
}

}  // namespace detail

void sdpa_backward(const SdpaArgs& a, const float* lse, const float* delta,
                   const __nv_bfloat16* dout, float* dq, float* dk, float* dv, float* dbias_q,
                   float* dbias_k, bool accumulate, cudaStream_t s, float* dbias_q_sums,
                   const __nv_bfloat16* o) {
  check(a);
  require(a.Lq == 0 || (lse && (delta || o) && dout && dq),
          "cuda sdpa_backward: lse, delta (or o), dout and dq must be device pointers when "
          "Lq > 0");
  require(a.Lk == 0 || (dk && dv),
          "cuda sdpa_backward: dk and dv must be device pointers when Lk > 0");
  auto aligned8 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7u) == 0; };
  require(aligned8(dq) && aligned8(dk) && aligned8(dv),
          "cuda sdpa_backward: dq, dk, dv must be 8-byte aligned (they are updated as float2)");
  detail::KernelParams p;
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
  if (a.Lk == 0) {  // no key: every gradient that exists is zero
    if (!accumulate) {
      if (p.dq) LCR_CUDA_CHECK(cudaMemsetAsync(p.dq, 0, sizeof(float) * a.B * a.Lq * a.H * a.D, s));
      if (p.dbias_q)
        LCR_CUDA_CHECK(cudaMemsetAsync(p.dbias_q, 0, sizeof(float) * a.B * a.Lq * a.H, s));
      if (p.dbias_q_sums)
        LCR_CUDA_CHECK(cudaMemsetAsync(p.dbias_q_sums, 0, sizeof(float) * 3 * a.B * a.Lq * a.H, s));
    }
    return;
  }
  if (detail::vendor_backward(a, lse, o, dout, dq, dk, dv, dbias_q, dbias_k, dbias_q_sums,
                              accumulate, s))
    return;
  float* own_delta = nullptr;  // delta left to this call (sdpa.hpp): formed from o here
  if (!delta) {
    LCR_CUDA_CHECK(cudaMallocAsync(&own_delta, sizeof(float) * a.B * a.H * a.Lq, s));
    sdpa_row_delta(a.B, a.Lq, a.H, a.Dv, o, dout, own_delta, s);
    p.delta = own_delta;
  }
  detail::launch_backward(p, 0, s);
  if (own_delta) LCR_CUDA_CHECK(cudaFreeAsync(own_delta, s));
}

}  // namespace lcr::cuda
