#pragma once
// Forward kernel of the CUDA SDPA, FlashAttention-2 style on mma.sync tensor cores.
//
// One CTA = one (query tile of BM rows, batch b, head h); NW warps, each owning 16*MT
// query rows. Per key tile of BN rows (double-buffered in shared memory via cp.async, the
// next tile's copy overlapping this tile's math):
//   S = Q K^T            [BM x BN] fp32 accumulators, Q and K bf16 through ldmatrix
//   logits -> log2 domain, mask (causal p_j <= p_i, j < Lk), online softmax: running max
//   m and sum l per row, O rescaled by 2^(m_old - m_new)
//   O += P V             P rounded to bf16 straight from the accumulators (no smem trip)
// Key tiles past the tile's last query position are never visited (causal block skip);
// only tiles that straddle the diagonal or the sequence end pay for element masking.
// Query tiles are issued last-first: in causal attention they carry the most key tiles.
// One source for two builds (device/simt.cuh): nvcc for the GPU, and host C++ with
// LCR_CUDA_EMU for the SIMT emulator (sdpa_mma_emu.cpp), in namespace LCR_SDPAMMA.
#include <algorithm>
#include <cmath>

#include "kernels/attention/cuda/sdpa_device.cuh"
#include "kernels/attention/cuda/sdpa_internal.hpp"

namespace lcr::cuda::LCR_SDPAMMA {

using ::lcr::cuda::detail::fwd_tile;
using ::lcr::cuda::detail::FwdTile;
using ::lcr::cuda::detail::KernelParams;

template <int DP, int DVP, int BM, int BN, int NW>
struct FwdTraits {
  static constexpr int kThreads = NW * 32;
  static constexpr int MT = BM / (16 * NW);  // 16-row m-tiles per warp
  static_assert(MT >= 1 && BM == 16 * NW * MT, "BM must be 16 * warps * m-tiles");
  static_assert(BN % 16 == 0 && DP % 64 == 0 && DVP % 64 == 0, "tile shape");
  // Q fragments stay in registers for one m-tile per warp; with two, the registers go to
  // the doubled S and O accumulators and Q is re-read (one ldmatrix per 4 mma).
  static constexpr bool kQInRegs = MT == 1 && DP <= 128;
  static constexpr size_t kSmemTiles = sizeof(__nv_bfloat16) * (BM * DP + 2 * BN * (DP + DVP));
  // The option path also stages the key bias lane of each K/V tile: [2][BN] fp32.
  static constexpr size_t smem(bool opts) {
    return kSmemTiles + (opts ? 2 * BN * sizeof(float) : 0);
  }
};

// kBias (with kOpts = false): additive terms that split into a row term and a column term,
// x = s scale + R_i - C_j, and no softcap: FoX's bias lanes (R = bias_q, C = bias_k) and
// ALiBi (-slope (p_i - p_j): R = -slope p_i, C = -slope p_j), alone or together. The column
// term is folded into the log2-domain logits as they leave the accumulators (one FFMA per
// element, as on the plain path), and the row term only shifts the row's lse: it is added
// in the epilogue and never touches the tile. Both terms are taken relative to c0, the
// row term of the tile's first row (x is unchanged by a shift common to both terms):
// FoX's lanes are cumulative sums that reach |c| ~ 1e3 at 16K, and without the shift the
// row's lse would be the difference of two such numbers (measured 6.6e-5 absolute lse error
// at 1x16x16384, against 3e-7 with the lanes' difference formed per element).
template <int DP, int DVP, int BM, int BN, int NW, bool kOpts, bool kBias>
LCR_KERNEL_THREADS(NW * 32)
void sdpa_fwd_kernel(const KernelParams p) {
  using T = FwdTraits<DP, DVP, BM, BN, NW>;
  constexpr int MT = T::MT, NTH = T::kThreads;
  LCR_SDPA_SMEM(smem_raw);
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [BM][DP]
  __nv_bfloat16* sK = sQ + BM * DP;                                // [2][BN][DP]
  __nv_bfloat16* sV = sK + 2 * BN * DP;                            // [2][BN][DVP]
  float* sBk = reinterpret_cast<float*>(sV + 2 * BN * DVP);        // [2][BN] (kOpts, kBias)

  const SdpaArgs& a = p.a;
  const int tid = ::lcr::cuda::LCR_PATHK::tid(), warp = tid / 32, lane = tid % 32, g = lane / 4,
            t = lane % 4;
  const FwdTile ft = fwd_tile(p, bid_x(), BM, BN);
  const int b = ft.b, h = ft.h, i0 = ft.i0, nq = ft.nq, jend = ft.jend, n_kt = ft.n_kt;
  const int64_t dpos = ft.dpos, q_ld = ft.q_ld, k_ld = ft.k_ld, v_ld = ft.v_ld;
  const __nv_bfloat16 *qbase = ft.q, *kbase = ft.k, *vbase = ft.v;

  float acc[MT][DVP / 8][4];
  zero_acc(acc);
  float row_m[MT][2], row_l[MT][2];  // log2-domain running max, per-thread partial sum
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) row_m[mt][r] = -INFINITY, row_l[mt][r] = 0.f;

  // Local query row index of (m-tile mt, half r) for this thread.
  auto qrow = [&](int mt, int r) { return warp * 16 * MT + mt * 16 + g + 8 * r; };

  // Key bias lane of the key tile at j0 into stage st (option path; zero past Lk), in the
  // tile's cp.async group: one strided global read per key instead of one per element.
  auto load_key_bias = [&](int st, int j0) {
    if constexpr (kOpts || kBias) {
      if (a.bias_k)
        for (int x = tid; x < BN; x += NTH) {
          const int j = j0 + x;
          const bool ok = j < a.Lk;
          cp_async4(smem_addr(sBk + st * BN + x),
                    ok ? a.bias_k + (int64_t(b) * a.Lk + j) * a.H + h : a.bias_k, ok);
        }
    }
  };

  if (n_kt > 0) {
    load_tile<BM, DP, NTH>(sQ, qbase, q_ld, nq, a.D, tid);
    load_tile<BN, DP, NTH>(sK, kbase, k_ld, jend, a.D, tid);
    load_tile<BN, DVP, NTH>(sV, vbase, v_ld, jend, a.Dv, tid);
    load_key_bias(0, 0);
    cp_async_commit();
  }

  // Per-row option terms, fixed for the whole tile.
  // kBias: bq = R_i - c0 = (bias_q_i - bias_q_i0) - slope (i - i0); positions enter as
  // exact integer differences.
  float bq[MT][2] = {}, slope = 0.f, c0 = 0.f;
  if constexpr (kOpts || kBias) {
    if (a.alibi_slopes) slope = load_ro(a.alibi_slopes + h);
    if (kBias && a.bias_q) c0 = load_ro(a.bias_q + (int64_t(b) * a.Lq + i0) * a.H + h);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = i0 + qrow(mt, r);
        if (a.bias_q && i < a.Lq)
          bq[mt][r] = load_ro(a.bias_q + (int64_t(b) * a.Lq + i) * a.H + h) - c0;
        if (kBias) bq[mt][r] -= slope * float(qrow(mt, r));
      }
  }
  const float sl2 = a.scale * kLog2e;
  const float inv_cap = a.softcap > 0.f ? 1.f / a.softcap : 0.f;

  // ldmatrix lane addressing (sdpa_device.cuh): Q as A operand (rows lane%16, chunk half
  // lane/16), K as B operand (rows lane%8 + 8*(lane/16), chunk half (lane/8)%2), V as the
  // transposed B operand (rows lane%8 + 8*((lane/8)%2), chunk half lane/16).
  const uint32_t sQ_addr = smem_addr(sQ), sK_addr = smem_addr(sK), sV_addr = smem_addr(sV);
  const uint32_t q_off = Swz<DP>::thread_off(warp * 16 * MT + (lane & 15), lane >> 4);
  const uint32_t k_off = Swz<DP>::thread_off((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t v_off = Swz<DVP>::thread_off((lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4);

  uint32_t qf[T::kQInRegs ? MT : 1][T::kQInRegs ? DP / 16 : 1][4];

  for (int kt = 0; kt < n_kt; ++kt) {
    const int st = kt & 1, j0 = kt * BN;
    // Wait for this tile (the only copy in flight). The barrier also means every warp is
    // done with the other stage (read in the previous iteration), so the next tile's copy
    // goes there now and overlaps this tile's math: one barrier per tile.
    cp_async_wait<0>();
    sync_cta();
    if (kt + 1 < n_kt) {
      const int jn = j0 + BN;
      load_tile<BN, DP, NTH>(sK + (st ^ 1) * BN * DP, kbase + jn * k_ld, k_ld, jend - jn, a.D, tid);
      load_tile<BN, DVP, NTH>(sV + (st ^ 1) * BN * DVP, vbase + jn * v_ld, v_ld, jend - jn, a.Dv,
                              tid);
      load_key_bias(st ^ 1, jn);
    }
    cp_async_commit();
    const uint32_t cK = sK_addr + st * BN * DP * 2, cV = sV_addr + st * BN * DVP * 2;

    if constexpr (T::kQInRegs) {
      if (kt == 0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int kk = 0; kk < DP / 16; ++kk)
            ldsm_x4(qf[mt][kk], Swz<DP>::at(sQ_addr, q_off, kk, mt * 16));
      }
    }

    // S = Q K^T for this warp's rows.
    float s[MT][BN / 8][4];
    zero_acc(s);
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      uint32_t af[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (T::kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) af[mt][e] = qf[mt][kk][e];
        } else {
          ldsm_x4(af[mt], Swz<DP>::at(sQ_addr, q_off, kk, mt * 16));
        }
      }
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        uint32_t bf[4];
        ldsm_x4(bf, Swz<DP>::at(cK, k_off, kk, np * 16));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816(s[mt][2 * np], af[mt], bf[0], bf[1]);
          mma16816(s[mt][2 * np + 1], af[mt], bf[2], bf[3]);
        }
      }
    }

    // Options (ALiBi, bias lanes, softcap) turn S into log2-domain logits here; the plain
    // path keeps raw S and folds the scale into the exponent (one FFMA per element).
    if constexpr (kOpts) {
      const float* cBk = sBk + st * BN;
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        const float2 bk = a.bias_k ? *reinterpret_cast<const float2*>(cBk + n * 8 + 2 * t)
                                   : make_float2(0.f, 0.f);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            // p_i - p_j of column 0, minus the column; bq - bk: the bias lanes' sum.
            const float rel = float(dpos + i0 + qrow(mt, r) - j0);
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              const int col = n * 8 + 2 * t + c;
              float x = fmaf(s[mt][n][2 * r + c], a.scale, bq[mt][r] - (c ? bk.y : bk.x));
              if (a.alibi_slopes) x -= slope * (rel - float(col));
              if (a.softcap > 0.f) x = a.softcap * tanhf(x * inv_cap);
              s[mt][n][2 * r + c] = x * kLog2e;
            }
          }
      }
    }
    if constexpr (kBias) {
      const float* cBk = sBk + st * BN;
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        // C_j - c0 = (bias_k_j - c0) + slope (p_i0 - p_j), p_i0 - p_j = rel0 - column.
        float2 bk = a.bias_k ? *reinterpret_cast<const float2*>(cBk + n * 8 + 2 * t)
                             : make_float2(0.f, 0.f);
        const float rel0 = float(dpos + i0 - j0 - (n * 8 + 2 * t));
        bk.x = fmaf(slope, rel0, bk.x - c0) * kLog2e;
        bk.y = fmaf(slope, rel0 - 1.f, bk.y - c0) * kLog2e;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            s[mt][n][2 * r] = fmaf(s[mt][n][2 * r], sl2, -bk.x);
            s[mt][n][2 * r + 1] = fmaf(s[mt][n][2 * r + 1], sl2, -bk.y);
          }
      }
    }
    // Masking only where the tile straddles the diagonal or the sequence end: column
    // n*8 + 2t + c is visible to a row iff it is <= the row's limit (causal p_j <= p_i and
    // j < Lk in one int32 per row, computed once per tile).
    const bool full = (j0 + BN <= a.Lk) && (dpos + i0 - (j0 + BN - 1) >= 0);
    if (!full) {
      const int kv_last = imin(BN, a.Lk - j0) - 1;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int64_t l64 = dpos + i0 + qrow(mt, r) - j0;
          const int lim = int(l64 < -1 ? -1 : (l64 > kv_last ? kv_last : l64)) - 2 * t;
#pragma unroll
          for (int n = 0; n < BN / 8; ++n)
#pragma unroll
            for (int c = 0; c < 2; ++c)
              if (n * 8 + c > lim) s[mt][n][2 * r + c] = -INFINITY;
        }
    }
    // Multiplier from S to log2-domain logits: sl2 on the plain path (scale > 0 there, so
    // the max of raw S scales to the max logit), 1 where the options already applied it.
    const float mul = kOpts || kBias ? 1.f : sl2;

    // Online softmax: new row max over this tile (the 4 threads of a quad share a row).
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
          mx = fmaxf(mx, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
        mx = fmaxf(mx, shfl_xor(mx, 1));
        mx = fmaxf(mx, shfl_xor(mx, 2));
        mx = fmaxf(row_m[mt][r], mx * mul);
        // A row that has seen nothing yet keeps m = -inf; subtract 0 then so exp2 gives 0.
        const float muse = mx == -INFINITY ? 0.f : mx;
        const float corr = fast_exp2(row_m[mt][r] - muse);
        row_m[mt][r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n) {
          s[mt][n][2 * r] = fast_exp2(fmaf(s[mt][n][2 * r], mul, -muse));
          s[mt][n][2 * r + 1] = fast_exp2(fmaf(s[mt][n][2 * r + 1], mul, -muse));
          sum += s[mt][n][2 * r] + s[mt][n][2 * r + 1];
        }
        row_l[mt][r] = row_l[mt][r] * corr + sum;
#pragma unroll
        for (int n = 0; n < DVP / 8; ++n) acc[mt][n][2 * r] *= corr, acc[mt][n][2 * r + 1] *= corr;
      }

      // O += P V: P (bf16) from the accumulators as the A operand, V through ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pf[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pf[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pf[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pf[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pf[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int np = 0; np < DVP / 16; ++np) {
        uint32_t bf[4];
        ldsm_x4_t(bf, Swz<DVP>::at(cV, v_off, np, kk * 16));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816(acc[mt][2 * np], pf[mt], bf[0], bf[1]);
          mma16816(acc[mt][2 * np + 1], pf[mt], bf[2], bf[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: O / l and lse = m ln2 + ln l; a row that saw no key gets o = 0, lse = -inf.
  const int64_t o_ld = int64_t(a.H) * a.Dv;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = row_l[mt][r];
      l += shfl_xor(l, 1);
      l += shfl_xor(l, 2);
      const int il = qrow(mt, r), i = i0 + il;
      if (i >= a.Lq) continue;
      const float inv = l > 0.f ? 1.f / l : 0.f;
      if (t == 0)
        p.lse[(int64_t(b) * a.H + h) * a.Lq + i] =
            l > 0.f ? row_m[mt][r] * kLn2 + logf(l) + (kBias ? bq[mt][r] : 0.f) : -INFINITY;
      const int64_t orow = (int64_t(b) * a.Lq + i) * o_ld + int64_t(h) * a.Dv;
#pragma unroll
      for (int n = 0; n < DVP / 8; ++n) {
        const int c = n * 8 + 2 * t;
        if (c >= a.Dv) continue;
        const float x0 = acc[mt][n][2 * r] * inv, x1 = acc[mt][n][2 * r + 1] * inv;
        if (p.o_f32) *reinterpret_cast<float2*>(p.o_f32 + orow + c) = make_float2(x0, x1);
        if (p.o) *reinterpret_cast<__nv_bfloat162*>(p.o + orow + c) = __floats2bfloat162_rn(x0, x1);
      }
    }
}

}  // namespace lcr::cuda::LCR_SDPAMMA

#if !defined(LCR_CUDA_EMU)
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/sdpa_heuristics.hpp"

namespace lcr::cuda::detail {

template <int DP, int DVP, int BM, int BN, int NW, bool kOpts, bool kBias = false>
void launch_fwd(KernelParams p, cudaStream_t s) {
  using T = LCR_SDPAMMA::FwdTraits<DP, DVP, BM, BN, NW>;
  p.n_tiles = (p.a.Lq + BM - 1) / BM;
  const int64_t grid = int64_t(p.n_tiles) * p.a.B * p.a.H;
  if (grid == 0) return;
  static_assert(!(kOpts && kBias), "kBias is a form of the plain path");
  launch_with_smem(LCR_SDPAMMA::sdpa_fwd_kernel<DP, DVP, BM, BN, NW, kOpts, kBias>, grid,
                   T::kThreads, T::smem(kOpts || kBias), s, p);
}

// Configuration FwdMma<BM, BN, NW> (sdpa_heuristics.hpp) on path kPath.
template <int DP, int DVP, SdpaPath kPath, int BM, int BN, int NW>
constexpr SdpaLauncher launcher(FwdMma<BM, BN, NW>) {
  return &launch_fwd<DP, DVP, BM, BN, NW, kPath == SdpaPath::kOpts, kPath == SdpaPath::kBias>;
}

}  // namespace lcr::cuda::detail
#endif
