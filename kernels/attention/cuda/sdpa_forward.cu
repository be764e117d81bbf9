// Public forward entry points of the CUDA SDPA (sdpa.hpp) and the choice of kernel and tile
// shape per head-width class (the tables below; variant 0 is the default):
//   D, Dv <= 64  : plain path and bias lanes / ALiBi (kBias) on wgmma (sdpa_forward_wgmma.cuh:
//                  two warpgroups of 64 rows, 64-key tiles, Q in registers); softcap: mma.sync
//                  64 x 64, 4 warps of 16 rows
//   D, Dv <= 128 : wgmma, every path (two warpgroups, Q in registers); also QK 128 / V 64
//                  (PoPE at d = 64: wgmma, Q from shared memory)
//   wider        : mma.sync 64 x 64, 4 warps (Q re-read from shared memory: registers hold
//                  O); PoPE's QK 256 / V 128 plain path: wgmma (two warpgroups, Q from
//                  shared memory)
// The alternatives below exist for the benchmark's tuning runs (--variants all).
#include <cstdint>
#include <utility>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/sdpa_forward_kernel.cuh"
#include "kernels/attention/cuda/sdpa_forward_wgmma.cuh"

namespace lcr::cuda {
namespace detail {
namespace {

struct FwdVariant {
  const char* name;
  void (*plain)(KernelParams, cudaStream_t);
  void (*opts)(KernelParams, cudaStream_t);  // null: the variant has no option path
  // Bias lanes and/or ALiBi, no softcap (row_col_terms_only): the plain path with the
  // terms folded in (kBias); null: such calls take the option path.
  void (*bias)(KernelParams, cudaStream_t) = nullptr;
};

#define LCR_FWD(DP, DVP, BM, BN, NW)                                                            \
  FwdVariant {                                                                                  \
#BM "x" #BN "_w" #NW, &launch_fwd < DP, DVP, BM, BN, NW, false>, &launch_fwd < DP, DVP, BM, \
        BN, NW, true>                                                                           \
  }
// Plain path with NW warps, option path with NWO warps (same tile).
#define LCR_FWD_SPLIT(DP, DVP, BM, BN, NW, NWO)                                     \
  FwdVariant {                                                                      \
#BM "x" #BN "_w" #NW "/opts_w" #NWO, &launch_fwd < DP, DVP, BM, BN, NW, false>, \
        &launch_fwd < DP, DVP, BM, BN, NWO, true>                                   \
  }
#define LCR_FWD_PLAIN(DP, DVP, BM, BN, NW) \
  FwdVariant { #BM "x" #BN "_w" #NW, &launch_fwd < DP, DVP, BM, BN, NW, false>, nullptr }
#define LCR_FWD_OPTS(DP, DVP, BM, BN, NW) \
  FwdVariant { #BM "x" #BN "_w" #NW, nullptr, &launch_fwd < DP, DVP, BM, BN, NW, true> }

// The wgmma kernels (sdpa_forward_wgmma.cuh): NWG warpgroups of 64 rows, 64-key tiles, at
// least MB CTAs per SM; every mode in the one kernel.
#define LCR_FWD_WG(DP, DVP, NWG, MB, QR)                                                      \
  FwdVariant {                                                                                \
    "wg" #NWG "x64_mb" #MB "_qr" #QR, &launch_fwd_wg<DP, DVP, NWG, MB, QR, sdpawg::kWgPlain>, \
        &launch_fwd_wg<DP, DVP, NWG, MB, QR, sdpawg::kWgOpts>,                                \
        &launch_fwd_wg<DP, DVP, NWG, MB, QR, sdpawg::kWgBias>                                 \
  }

// Defaults measured on an H200 (2026-12-02 ~01:27 UTC, bench_cuda_sdpa --variants all
// --fwd-only [--bias | --alibi], TFLOP/s at 1x16x16384 / 1x8x65536; scripts/device/
// wgmma_fwd_check.sh). D = Dv = 64: the plain path on wgmma (369 / 374 against 319 / 324 for
// the mma.sync 128 x 64 tiles); the option path keeps the mma.sync 64 x 64 tiles with Q in
// registers (187 vs 159 for 128 x 64 on 2026-11-30). Bias lanes / ALiBi (kBias) on wgmma since
// the column term starts S's accumulators (2026-12-04 ~19:20 UTC, A/B in one call, FoX-like
// lanes / ALiBi at 1x16x16384 and 1x8x65536): 333 / 345 and 344 / 355 TFLOP/s against the
// mma.sync 128 x 64 kBias tiles' 268 / 279 and 276 / 286 (variant 1).
const FwdVariant k64_64[] = {
    FwdVariant{"wg2x64_mb2_qr1/opts_64x64_w4", &launch_fwd_wg<64, 64, 2, 2, true, sdpawg::kWgPlain>,
               &launch_fwd<64, 64, 64, 64, 4, true>,
               &launch_fwd_wg<64, 64, 2, 2, true, sdpawg::kWgBias>},
    FwdVariant{"wg2x64_mb2_qr1/opts_64x64_w4/bias_128x64_w4",
               &launch_fwd_wg<64, 64, 2, 2, true, sdpawg::kWgPlain>,
               &launch_fwd<64, 64, 64, 64, 4, true>, &launch_fwd<64, 64, 128, 64, 4, false, true>},
    FwdVariant{"128x64_w4/opts_64x64_w4", &launch_fwd<64, 64, 128, 64, 4, false>,
               &launch_fwd<64, 64, 64, 64, 4, true>, &launch_fwd<64, 64, 128, 64, 4, false, true>},
    LCR_FWD(64, 64, 128, 64, 4),
    FwdVariant{"64x64_w4", &launch_fwd<64, 64, 64, 64, 4, false>, nullptr,
               &launch_fwd<64, 64, 64, 64, 4, false, true>},
    LCR_FWD_PLAIN(64, 64, 128, 128, 8),
    LCR_FWD_PLAIN(64, 64, 128, 32, 4),
    LCR_FWD_PLAIN(64, 64, 64, 128, 4),
    LCR_FWD_OPTS(64, 64, 128, 64, 8),
    LCR_FWD_WG(64, 64, 2, 2, 0),
    LCR_FWD_WG(64, 64, 2, 2, 1),
    LCR_FWD_WG(64, 64, 2, 1, 1),
    LCR_FWD_WG(64, 64, 1, 4, 1)};
// D = Dv = 128: wgmma for every path, two warpgroups, Q in registers (same run: 390 plain,
// 349 bias lanes, 351 ALiBi against the mma.sync default's 360 / 319 / 329). The mma.sync
// default before it (two m-tiles per warp for the plain path, 331 vs 312 for one on
// 2026-11-29; the option path one m-tile per warp) stays as a variant. kBias with the column
// term in S's accumulators (2026-12-04): ALiBi 356 -> 376, FoX-like lanes 357 -> 350.
const FwdVariant k128_128[] = {
    LCR_FWD_WG(128, 128, 2, 1, 1),
    FwdVariant{"128x64_w4/opts_w8", &launch_fwd<128, 128, 128, 64, 4, false>,
               &launch_fwd<128, 128, 128, 64, 8, true>,
               &launch_fwd<128, 128, 128, 64, 4, false, true>},
    FwdVariant{"128x64_w8", &launch_fwd<128, 128, 128, 64, 8, false>, nullptr,
               &launch_fwd<128, 128, 128, 64, 8, false, true>},
    LCR_FWD_PLAIN(128, 128, 128, 32, 4),
    LCR_FWD_PLAIN(128, 128, 64, 64, 4),
    LCR_FWD_PLAIN(128, 128, 128, 128, 8),
    LCR_FWD_WG(128, 128, 2, 1, 0),
    LCR_FWD_WG(128, 128, 1, 2, 1)};
// QK 128 / V 64 (PoPE at d = 64): wgmma for every path, Q from shared memory (Q in registers
// spills here): 439 plain, 345 bias lanes, 349 ALiBi against 367 / 175 / 175 (same run);
// kBias with the column term in S's accumulators (2026-12-04): 434 bias lanes, 447 ALiBi.
const FwdVariant k128_64[] = {LCR_FWD_WG(128, 64, 2, 2, 0), LCR_FWD_SPLIT(128, 64, 128, 64, 4, 8),
                              LCR_FWD_PLAIN(128, 64, 128, 64, 8), LCR_FWD_WG(128, 64, 2, 2, 1),
                              LCR_FWD_WG(128, 64, 2, 1, 1)};
// PoPE at d = 128 (QK 256, V 128), plain path: wgmma, two warpgroups, Q from shared memory,
// 3.66 vs 4.69 ms for the mma.sync 128 x 32 tiles (two m-tiles per warp; 64x64_w4 6.47,
// 128x64_w8 5.61) at 1x16x16384 (H200, 2026-12-02 ~03:30 UTC, --variants all); the option
// path keeps the mma.sync 64 x 64 tiles.
const FwdVariant k256_128[] = {
    FwdVariant{"wg2x64_mb1_qr0/opts_64x64_w4",
               &launch_fwd_wg<256, 128, 2, 1, false, sdpawg::kWgPlain>,
               &launch_fwd<256, 128, 64, 64, 4, true>},
    FwdVariant{"128x32_w4/opts_64x64_w4", &launch_fwd<256, 128, 128, 32, 4, false>,
               &launch_fwd<256, 128, 64, 64, 4, true>},
    LCR_FWD(256, 128, 64, 64, 4), LCR_FWD_PLAIN(256, 128, 128, 64, 8),
    LCR_FWD_WG(256, 128, 2, 1, 0)};
// Generic widths: the option path serves plain calls too (a few % slower, rarely used).
const FwdVariant k64_128[] = {LCR_FWD_OPTS(64, 128, 128, 64, 8)};
const FwdVariant k64_256[] = {LCR_FWD_OPTS(64, 256, 64, 64, 4)};
const FwdVariant k128_256[] = {LCR_FWD_OPTS(128, 256, 64, 64, 4)};
const FwdVariant k256_64[] = {LCR_FWD_OPTS(256, 64, 64, 64, 4)};
const FwdVariant k256_256[] = {LCR_FWD_OPTS(256, 256, 64, 64, 4)};

std::pair<const FwdVariant*, int> variants(int D, int Dv) {
  static const VariantTables<FwdVariant> tables{span(k64_64),   span(k128_128), span(k128_64),
                                                span(k256_128), span(k64_128),  span(k64_256),
                                                span(k128_256), span(k256_64),  span(k256_256)};
  return tables.pick(D, Dv);
}

// delta[b,h,i] = <o[b,i,h,:], dout[b,i,h,:]>: o, dout [B, Lq, H, Dv], delta [B, H, Lq].
// TPR threads per row (a power of two, TPR * 8 >= Dv up to a warp), 16 bytes of o and of dout
// per thread and step, rows in delta's (b, h, i) order so a warp's stores are contiguous: the
// form for Dv % 8 == 0 and 16-byte aligned o, dout (every call lcr makes).
template <int TPR>
__global__ void row_delta_vec_kernel(int B, int Lq, int H, int Dv, const __nv_bfloat16* o,
                                     const __nv_bfloat16* dout, float* delta) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, row = t / TPR;
  const int c0 = int(t % TPR);
  const bool in = row < int64_t(B) * H * Lq;
  float s = 0.f;
  if (in) {  // no early return: every lane takes part in the shuffles
    const int64_t i = row % Lq, bh = row / Lq, h = bh % H, b = bh / H;
    const int64_t off = ((b * Lq + i) * H + h) * Dv;
    const uint4* o16 = reinterpret_cast<const uint4*>(o + off);
    const uint4* d16 = reinterpret_cast<const uint4*>(dout + off);
    for (int c = c0; c < Dv / 8; c += TPR) {
      const uint4 x = o16[c], y = d16[c];
      const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&x);
      const __nv_bfloat162* y2 = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 a = __bfloat1622float2(x2[k]), d = __bfloat1622float2(y2[k]);
        s = fmaf(a.x, d.x, fmaf(a.y, d.y, s));
      }
    }
  }
#pragma unroll
  for (int m = TPR / 2; m >= 1; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
  if (c0 == 0 && in) delta[row] = s;
}

// Launches row_delta_vec_kernel with the least TPR (a power of two) such that TPR * 8 >= Dv,
// at most 32.
template <int TPR>
void launch_row_delta_vec(int B, int Lq, int H, int Dv, const __nv_bfloat16* o,
                          const __nv_bfloat16* dout, float* delta, cudaStream_t s) {
  if constexpr (TPR < 32) {
    if (TPR * 8 < Dv) return launch_row_delta_vec<2 * TPR>(B, Lq, H, Dv, o, dout, delta, s);
  }
  constexpr int kThreads = 256;
  const int64_t threads = int64_t(B) * Lq * H * TPR;
  row_delta_vec_kernel<TPR><<<unsigned((threads + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      B, Lq, H, Dv, o, dout, delta);
}

// The general form (any even Dv, 4-byte alignment): one warp per row, bf16 pairs.
__global__ void row_delta_kernel(int B, int Lq, int H, int Dv, const __nv_bfloat16* o,
                                 const __nv_bfloat16* dout, float* delta) {
  // One warp per (b, i, h) row of o; lanes stride over Dv in bf16 pairs.
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= int64_t(B) * Lq * H) return;
  const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(o + row * Dv);
  const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(dout + row * Dv);
  float s = 0.f;
  for (int c = lane; c < Dv / 2; c += 32) {
    const float2 x = __bfloat1622float2(o2[c]), y = __bfloat1622float2(d2[c]);
    s += x.x * y.x + x.y * y.y;
  }
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
  if (lane == 0) {
    const int h = int(row % H);
    const int64_t bi = row / H, i = bi % Lq, b = bi / Lq;
    delta[(b * H + h) * Lq + i] = s;
  }
}

}  // namespace

bool launch_forward(const KernelParams& p, int variant, cudaStream_t s) {
  const auto [v, n] = variants(p.a.D, p.a.Dv);
  if (variant < 0 || variant >= n) return false;
  const bool opts = forward_needs_options(p.a);
  auto fn = opts || !v[variant].plain ? v[variant].opts : v[variant].plain;
  if (row_col_terms_only(p.a) && v[variant].bias) fn = v[variant].bias;
  if (!fn) return false;  // a plain-only tuning variant asked to run options
  fn(p, s);
  return true;
}

const char* forward_variant_name(int D, int Dv, int variant) {
  const auto [v, n] = variants(D, Dv);
  return variant >= 0 && variant < n ? v[variant].name : nullptr;
}

}  // namespace detail

void sdpa_forward(const SdpaArgs& a, __nv_bfloat16* o, float* o_f32, float* lse, cudaStream_t s) {
  check(a);
  require(o != nullptr || o_f32 != nullptr,
          "cuda sdpa_forward: pass o (bf16), o_f32 (fp32) or both");
  require(lse != nullptr, "cuda sdpa_forward: lse [B, H, Lq] is required");
  if (a.Lq == 0) return;
  if (detail::vendor_forward(a, o, o_f32, lse, s)) return;
  detail::KernelParams p;
  p.a = a;
  p.o = o;
  p.o_f32 = o_f32;
  p.lse = lse;
  detail::launch_forward(p, 0, s);
}

void sdpa_row_delta(int B, int Lq, int H, int Dv, const __nv_bfloat16* o, const __nv_bfloat16* dout,
                    float* delta, cudaStream_t s) {
  require(B >= 0 && Lq >= 0 && H >= 1 && Dv >= 2 && Dv % 2 == 0,
          "cuda sdpa_row_delta: need B, Lq >= 0, H >= 1 and an even Dv; got B=", B, " Lq=", Lq,
          " H=", H, " Dv=", Dv);
  const int64_t rows = int64_t(B) * Lq * H;
  if (rows == 0) return;
  require(o && dout && delta, "cuda sdpa_row_delta: o, dout and delta must be device pointers");
  // The 16-byte form where it can (the warp-per-row form, 4 bytes a lane: 53 us for the 64 MB
  // at 1x16x16384, Dv = 64, ncu on 2026-11-30, ~1.2 TB/s).
  const bool vec =
      Dv % 8 == 0 && (reinterpret_cast<uintptr_t>(o) | reinterpret_cast<uintptr_t>(dout)) % 16 == 0;
  if (vec) {
    detail::launch_row_delta_vec<1>(B, Lq, H, Dv, o, dout, delta, s);
    LCR_CUDA_CHECK_LAUNCH();
    return;
  }
  constexpr int kWarps = 8;
  detail::row_delta_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(
      B, Lq, H, Dv, o, dout, delta);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda
