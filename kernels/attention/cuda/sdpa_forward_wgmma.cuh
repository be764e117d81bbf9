#pragma once
// Forward kernel of the CUDA SDPA on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a), the
// same math and outputs as sdpa_forward_kernel.cuh (sdpa.hpp's definition), for the width
// classes QK 64 / V 64, QK 128 / V 128, QK 128 / V 64 and QK 256 / V 128 (PoPE at d = 128).
//
// One CTA = one (query tile of 64 NWG rows, batch b, head h), NWG warpgroups of 64 rows each.
// Per key tile of 64 rows (K and V in three shared-memory stages filled with cp.async, the
// next tile's copy overlapping this tile's math, one CTA barrier per tile):
//   S = Q K^T   [64 x 64] per warpgroup, K from shared memory (wgmma.cuh's 128-byte-swizzled
//               tiles, read K-major), Q as register fragments loaded once (kQRegs) or from
//               shared memory too; fp32 accumulators in registers
//   logits, mask, online softmax exactly as the mma.sync kernel (the accumulator layout of a
//               warp's 16 rows is the mma.sync C fragments side by side, wgmma.cuh)
//   O += P V    P from the accumulators as bf16 register fragments, V read MN-major
// software-pipelined: the tensor cores run S of tile j and then P V of tile j - 1 while the
// warpgroup forms the softmax of tile j (FlashAttention-3's intra-warpgroup overlap).
// Modes (compile time): plain (the scale folded into the exponent), kBias (row + column terms:
// FoX's bias lanes, ALiBi; no softcap: the column term is where S's accumulators start, the
// row term goes to lse, so the softmax is the plain one) and kOpts (any option, per element),
// as the mma.sync kernel's three paths. MB: the CTAs per SM the register budget is set for (launch
// bounds). Defaults per width class and the measurements behind them: sdpa_forward.cu,
// docs/cuda.md.
//
// The source builds twice (device/simt.cuh): nvcc for the GPU and the host compiler with
// LCR_CUDA_EMU for the SIMT emulator, so the tests check its indexing, fragment layouts and
// barriers without a GPU (tests/cuda/test_sdpa.cpp, CudaSdpaWgmmaEmu).
#include <algorithm>
#include <cmath>

#include "kernels/attention/cuda/device/wgmma.cuh"
#include "kernels/attention/cuda/sdpa_internal.hpp"

namespace lcr::cuda::LCR_SDPAWG {

using namespace ::lcr::cuda::LCR_PATHK;
using ::lcr::cuda::detail::fwd_tile;
using ::lcr::cuda::detail::FwdTile;
using ::lcr::cuda::detail::KernelParams;

enum WgMode : int { kWgPlain = 0, kWgBias = 1, kWgOpts = 2 };
constexpr int kWgBN = 64;  // keys per tile

template <int DP, int DVP, int NWG>
struct WgFwdSmem {
  bf16 *Q, *K, *V;  // Swz tiles: Q [64 NWG x DP]; K [3][64 x DP]; V [3][64 x DVP]
  float* bk;        // [3][64] kOpts: key bias lane; kBias: the column term z (fetch_bk)
  static LCR_HD std::size_t carve(SmemCarver& c, WgFwdSmem* s) {
    WgFwdSmem t;
    t.Q = c.take_1k<bf16>(64 * NWG * DP);
    t.K = c.take_1k<bf16>(3 * kWgBN * DP);
    t.V = c.take_1k<bf16>(3 * kWgBN * DVP);
    t.bk = c.take<float>(3 * kWgBN);
    if (s) *s = t;
    return c.off;
  }
};

template <int DP, int DVP, int NWG, int MB, int kMode, bool kQRegs>
LCR_KERNEL_BOUNDS(128 * NWG, MB)
void sdpa_fwd_wg_kernel(const KernelParams p) {
  static_assert(
      (DP == 64 || DP == 128 || DP == 256) && (DVP == 64 || DVP == 128) && (NWG == 1 || NWG == 2),
      "tile shape");
  constexpr int BM = 64 * NWG, NT = 128 * NWG, BN = kWgBN;
  constexpr bool kB = kMode != kWgPlain;
  check_smem_base();
  using Smem = WgFwdSmem<DP, DVP, NWG>;
  Smem s;
  SmemCarver carver{smem_base()};
  Smem::carve(carver, &s);

  const SdpaArgs& a = p.a;
  const int wg = warp() / 4, w = warp() % 4, g = lane() >> 2, t = lane() & 3;
  const FwdTile ft = fwd_tile(p, bid_x(), BM, BN);
  const int b = ft.b, h = ft.h, i0 = ft.i0, nq = ft.nq, jend = ft.jend, n_kt = ft.n_kt;
  const int64_t dpos = ft.dpos, q_ld = ft.q_ld, k_ld = ft.k_ld, v_ld = ft.v_ld;
  const bf16 *qbase = ft.q, *kbase = ft.k, *vbase = ft.v;

  // Per-row option terms, fixed for the whole tile (sdpa_forward_kernel.cuh says why kBias
  // takes them relative to c0, the row term of the tile's first row).
  float bq[2] = {0.f, 0.f}, slope = 0.f, c0 = 0.f;
  if constexpr (kB) {
    if (a.alibi_slopes) slope = load_ro(a.alibi_slopes + h);
    if (kMode == kWgBias && a.bias_q) c0 = load_ro(a.bias_q + (int64_t(b) * a.Lq + i0) * a.H + h);
    LCR_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int i = i0 + 64 * wg + 16 * w + g + 8 * r;
      if (a.bias_q && i < a.Lq) bq[r] = load_ro(a.bias_q + (int64_t(b) * a.Lq + i) * a.H + h) - c0;
      if (kMode == kWgBias) bq[r] -= slope * float(64 * wg + 16 * w + g + 8 * r);
    }
  }

  // The column term of key j0 + x, thread x < 64, staged per tile in s.bk: read into a
  // register while a tile runs, stored to the other stage after it (plain loads: one per key).
  // kOpts: the key bias lane (zero past Lk). kBias: z_j = -(C_j - c0) / scale with C_j - c0 =
  // (bias_k_j - c0) + slope (p_i0 - p_j), the value S's accumulators start from (init_bias), so
  // that S = z + Q K^T leaves the tensor cores with the column term in it and the softmax is the
  // plain path's. Adding C_j per (row, key) in the softmax instead cost the D = 64 kernel 31
  // registers (spills at MB = 2) and ran well below the plain path.
  // The sum's rounding is fp32's at |z|: where |z| is large enough for it to matter, the key is
  // exp(-|C_j - c0|) below the row's maximum (C_j - c0 grows with the distance to the tile).
  const bool has_bk = kMode == kWgBias || (kMode == kWgOpts && a.bias_k != nullptr);
  const float inv_scale = 1.f / a.scale;
  auto fetch_bk = [&](int j0) {
    const int j = j0 + tid();
    const float bk =
        a.bias_k && j < a.Lk ? load_ro(a.bias_k + (int64_t(b) * a.Lk + j) * a.H + h) : 0.f;
    if constexpr (kMode == kWgBias)
      return -fmaf(slope, float(dpos + i0 - j), bk - c0) * inv_scale;
    else
      return bk;
  };

  float acc[DVP / 8][4];
  LCR_UNROLL
  for (int n = 0; n < DVP / 8; ++n) LCR_UNROLL
  for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.f, 0.f};
  auto qrow = [&](int r) { return 64 * wg + 16 * w + g + 8 * r; };  // local row of half r

  if (n_kt > 0) {
    async_swz<BM, DP, NT>(s.Q, qbase, q_ld, nq, a.D);
    async_swz<BN, DP, NT>(s.K, kbase, k_ld, jend, a.D);
    async_swz<BN, DVP, NT>(s.V, vbase, v_ld, jend, a.Dv);
    if (has_bk && tid() < BN) s.bk[tid()] = fetch_bk(0);
  }
  cp_async_commit();

  const float sl2 = a.scale * kLog2e;
  const float inv_cap = a.softcap > 0.f ? 1.f / a.softcap : 0.f;

  // Logits, mask and online-softmax update of the tile at j0 (stage st) in sr: sr becomes
  // the tile's probabilities (fp32), row_m / row_l move on, and corr is the factor the output
  // accumulated so far must take (applied by the caller once the products that write it are
  // complete).
  auto softmax_tile = [&](float(&sr)[8][4], int j0, int st, float(&corr)[2]) {
    const float* cBk = s.bk + st * BN;
    if constexpr (kMode == kWgOpts) {
      LCR_UNROLL
      for (int n = 0; n < 8; ++n) {
        const float bk0 = a.bias_k ? cBk[n * 8 + 2 * t] : 0.f;
        const float bk1 = a.bias_k ? cBk[n * 8 + 2 * t + 1] : 0.f;
        LCR_UNROLL
        for (int r = 0; r < 2; ++r) {
          // p_i - p_j of column 0, minus the column; bq - bk: the bias lanes' sum.
          const float rel = float(dpos + i0 + qrow(r) - j0);
          LCR_UNROLL
          for (int c = 0; c < 2; ++c) {
            const int col = n * 8 + 2 * t + c;
            float x = fmaf(sr[n][2 * r + c], a.scale, bq[r] - (c ? bk1 : bk0));
            if (a.alibi_slopes) x -= slope * (rel - float(col));
            if (a.softcap > 0.f) x = a.softcap * fast_tanh(x * inv_cap);
            sr[n][2 * r + c] = x * kLog2e;
          }
        }
      }
    }
    // Masking only where the tile straddles this warpgroup's diagonal or the sequence end.
    const bool full = (j0 + BN <= a.Lk) && (dpos + i0 + 64 * wg - (j0 + BN - 1) >= 0);
    if (!full) {
      const int kv_last = std::min(BN, a.Lk - j0) - 1;
      LCR_UNROLL
      for (int r = 0; r < 2; ++r) {
        const int64_t l64 = dpos + i0 + qrow(r) - j0;
        const int lim = int(l64 < -1 ? -1 : (l64 > kv_last ? kv_last : l64)) - 2 * t;
        LCR_UNROLL
        for (int n = 0; n < 8; ++n) LCR_UNROLL
        for (int c = 0; c < 2; ++c)
          if (n * 8 + c > lim) sr[n][2 * r + c] = -INFINITY;
      }
    }
    const float mul = kMode == kWgOpts ? 1.f : sl2;  // kOpts formed log2 units above
    LCR_UNROLL
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
      LCR_UNROLL
      for (int n = 0; n < 8; ++n) mx = fmaxf(mx, fmaxf(sr[n][2 * r], sr[n][2 * r + 1]));
      mx = fmaxf(row_m[r], quad_max(mx) * mul);
      // A row that has seen nothing yet keeps m = -inf; subtract 0 then so exp2 gives 0.
      const float muse = mx == -INFINITY ? 0.f : mx;
      corr[r] = fast_exp2(row_m[r] - muse);
      row_m[r] = mx;
      float sum = 0.f;
      LCR_UNROLL
      for (int n = 0; n < 8; ++n) {
        sr[n][2 * r] = fast_exp2(fmaf(sr[n][2 * r], mul, -muse));
        sr[n][2 * r + 1] = fast_exp2(fmaf(sr[n][2 * r + 1], mul, -muse));
        sum += sr[n][2 * r] + sr[n][2 * r + 1];
      }
      row_l[r] = row_l[r] * corr[r] + sum;
    }
  };
  // P (sr) as the bf16 A fragments of O += P V. Formed only once the product reading the
  // previous fragments is complete: registers an in-flight wgmma reads, written by other
  // instructions, make ptxas serialise every wgmma of the kernel (its warning C7513).
  auto to_frags = [&](const float(&sr)[8][4], uint32_t(&pa)[4][4]) {
    LCR_UNROLL
    for (int kk = 0; kk < 4; ++kk) c_to_a(pa[kk], sr[2 * kk], sr[2 * kk + 1]);
  };
  // kQRegs: this warp's 16 query rows as mma.sync A fragments, loaded once (ldmatrix), so the
  // S products read only K from shared memory: with both operands there, an m64n64k16 reads
  // 4 KiB per 32 tensor-core cycles, the whole shared-memory bandwidth (128 B per cycle).
  uint32_t aq[kQRegs ? DP / 16 : 1][4];
  auto load_q_frags = [&] {
    if constexpr (kQRegs) {
      const int r = 64 * wg + 16 * w + (lane() & 15), c = 8 * (lane() >> 4);
      LCR_UNROLL
      for (int kk = 0; kk < DP / 16; ++kk) ldsm_x4(aq[kk], s.Q + swz(BM, r, 16 * kk + c));
    }
  };
  // S = Q K^T of stage st, asynchronous (kBias: S = z + Q K^T, the accumulators starting from
  // the staged column term z of their key; before the wgmma_fence that precedes the call).
  constexpr bool kInitS = kMode == kWgBias;
  auto init_bias = [&](float(&sr)[8][4], int st) {
    const float* z = s.bk + st * BN;
    LCR_UNROLL
    for (int n = 0; n < 8; ++n) {
      const float z0 = z[n * 8 + 2 * t], z1 = z[n * 8 + 2 * t + 1];
      sr[n][0] = z0, sr[n][1] = z1, sr[n][2] = z0, sr[n][3] = z1;  // rows g, g + 8
    }
  };
  auto issue_s = [&](float(&sr)[8][4], int st) {
    const bf16* K = s.K + st * BN * DP;
    LCR_UNROLL
    for (int k0 = 0; k0 < DP; k0 += 16) {
      if constexpr (kQRegs)
        wgmma_rs<0>(&sr[0][0], aq[k0 / 16], desc_k(K, BN, k0), kInitS || k0 > 0);
      else
        wgmma_ss<0>(&sr[0][0], desc_k(s.Q, BM, k0, 64 * wg), desc_k(K, BN, k0), kInitS || k0 > 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](const uint32_t(&pa)[4][4], int st) {  // O += P V of stage st
    const bf16* V = s.V + st * BN * DVP;
    LCR_UNROLL
    for (int kk = 0; kk < 4; ++kk) LCR_UNROLL
    for (int hf = 0; hf < DVP / 64; ++hf)
      wgmma_rs<1>(&acc[8 * hf][0], pa[kk], desc_mn(V, BN, 16 * kk, 64 * hf), true);
    wgmma_commit();
  };
  auto rescale = [&](const float(&corr)[2]) {
    LCR_UNROLL
    for (int n = 0; n < DVP / 8; ++n)
      acc[n][0] *= corr[0], acc[n][1] *= corr[0], acc[n][2] *= corr[1], acc[n][3] *= corr[1];
  };

  // Software pipeline over the key tiles, three K/V stages (tile j in stage j % 3): in
  // iteration j the tensor cores compute S_j = Q K_j^T and then O += P_{j-1} V_{j-1} while
  // the warpgroup waits only for S_j, forms P_j (softmax) and, once P_{j-1} V_{j-1} is done,
  // rescales O; tile j + 1 is copied meanwhile. Stages in use in iteration j: K_j, V_{j-1},
  // the copy of j + 1; tile j - 2's stage is free once every warpgroup passed iteration j - 1
  // (its wait for P_{j-2} V_{j-2}), which the barrier at the top of iteration j ensures.
  // Top of iteration kt: tile kt landed and visible to the tensor cores, tile kt + 1's copy
  // issued; returns the key bias of tile kt + 1 this thread stores at the bottom (end_tile).
  auto begin_tile = [&](int kt) {
    cp_async_wait<0>();  // tile kt (the only copy in flight)
    fence_async_smem();  // the landed tiles, for the tensor cores (wgmma.cuh)
    sync_cta();
    const bool next = kt + 1 < n_kt;
    if (next) {
      const int jn = (kt + 1) * BN, sn = (kt + 1) % 3;
      async_swz<BN, DP, NT>(s.K + sn * BN * DP, kbase + jn * k_ld, k_ld, jend - jn, a.D);
      async_swz<BN, DVP, NT>(s.V + sn * BN * DVP, vbase + jn * v_ld, v_ld, jend - jn, a.Dv);
    }
    cp_async_commit();
    return has_bk && next && tid() < BN ? fetch_bk((kt + 1) * BN) : 0.f;
  };
  auto end_tile = [&](int kt, float bk_next) {
    if (has_bk && kt + 1 < n_kt && tid() < BN) s.bk[((kt + 1) % 3) * BN + tid()] = bk_next;
  };

  uint32_t pa[4][4];  // P_{j-1}, the A operand of the product in flight
  float sr[8][4];
  if (n_kt > 0) {  // tile 0: O is still zero, nothing to overlap
    const float bk_next = begin_tile(0);
    load_q_frags();
    if constexpr (kInitS) init_bias(sr, 0);
    wgmma_fence();
    issue_s(sr, 0);
    wgmma_wait<0>();
    fence_regs<32>(&sr[0][0]);
    float corr[2];
    softmax_tile(sr, 0, 0, corr);
    to_frags(sr, pa);
    end_tile(0, bk_next);
  }
  for (int kt = 1; kt < n_kt; ++kt) {
    const int st = kt % 3;
    const float bk_next = begin_tile(kt);
    if constexpr (kInitS) init_bias(sr, st);
    wgmma_fence();
    issue_s(sr, st);
    issue_pv(pa, (kt + 2) % 3);
    wgmma_wait<1>();  // S_kt done; P_{kt-1} V_{kt-1} may still run
    fence_regs<32>(&sr[0][0]);
    float corr[2];
    softmax_tile(sr, kt * BN, st, corr);
    wgmma_wait<0>();
    fence_regs<DVP / 2>(&acc[0][0]);
    rescale(corr);
    to_frags(sr, pa);
    end_tile(kt, bk_next);
  }
  if (n_kt > 0) {  // the last tile's O += P V
    wgmma_fence();
    issue_pv(pa, (n_kt - 1) % 3);
    wgmma_wait<0>();
    fence_regs<DVP / 2>(&acc[0][0]);
  }
  cp_async_wait<0>();

  // Epilogue: O / l and lse = m ln2 + ln l; a row that saw no key gets o = 0, lse = -inf.
  const int64_t o_ld = int64_t(a.H) * a.Dv;
  LCR_UNROLL
  for (int r = 0; r < 2; ++r) {
    const float l = quad_sum(row_l[r]);
    const int i = i0 + qrow(r);
    if (i >= a.Lq) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    if (t == 0)
      p.lse[(int64_t(b) * a.H + h) * a.Lq + i] =
          l > 0.f ? row_m[r] * kLn2 + logf(l) + (kMode == kWgBias ? bq[r] : 0.f) : -INFINITY;
    const int64_t orow = (int64_t(b) * a.Lq + i) * o_ld + int64_t(h) * a.Dv;
    LCR_UNROLL
    for (int n = 0; n < DVP / 8; ++n) {
      const int c = n * 8 + 2 * t;
      if (c >= a.Dv) continue;
      const float x0 = acc[n][2 * r] * inv, x1 = acc[n][2 * r + 1] * inv;
      if (p.o_f32) store_f32x2(p.o_f32 + orow + c, x0, x1);
      if (p.o) *reinterpret_cast<uint32_t*>(p.o + orow + c) = pack_bf16(x0, x1);
    }
  }
}

// Query tiles (into p.n_tiles) and CTAs of a launch with NWG warpgroups (both builds' launchers).
template <int NWG>
inline int64_t wg_fwd_grid(KernelParams& p) {
  p.n_tiles = (p.a.Lq + 64 * NWG - 1) / (64 * NWG);
  return int64_t(p.n_tiles) * p.a.B * p.a.H;
}

// Dynamic shared memory of one instantiation (the launchers of both builds).
template <int DP, int DVP, int NWG>
inline std::size_t wg_fwd_smem_bytes() {
  SmemCarver c;
  return WgFwdSmem<DP, DVP, NWG>::carve(c, nullptr);
}

}  // namespace lcr::cuda::LCR_SDPAWG

#if !defined(LCR_CUDA_EMU)
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/sdpa_heuristics.hpp"

namespace lcr::cuda::detail {

// The launcher of configuration FwdWg (sdpa_heuristics.hpp): NWG warpgroups per CTA, at least
// MB CTAs per SM (the register budget), mode as launch_forward (sdpa_forward.cu) picks.
template <int DP, int DVP, int NWG, int MB, bool kQRegs, int kMode>
void launch_fwd_wg(KernelParams p, cudaStream_t s) {
  const int64_t grid = LCR_SDPAWG::wg_fwd_grid<NWG>(p);
  if (grid == 0) return;
  launch_with_smem(LCR_SDPAWG::sdpa_fwd_wg_kernel<DP, DVP, NWG, MB, kMode, kQRegs>, grid, 128 * NWG,
                   LCR_SDPAWG::wg_fwd_smem_bytes<DP, DVP, NWG>(), s, p);
}

// Configuration FwdWg<NWG, MB, kQRegs> (sdpa_heuristics.hpp) on path kPath: the one kernel
// serves every path, in the mode of that path.
template <int DP, int DVP, SdpaPath kPath, int NWG, int MB, bool kQRegs>
constexpr SdpaLauncher launcher(FwdWg<NWG, MB, kQRegs>) {
  constexpr int kMode = kPath == SdpaPath::kOpts   ? LCR_SDPAWG::kWgOpts
                        : kPath == SdpaPath::kBias ? LCR_SDPAWG::kWgBias
                                                   : LCR_SDPAWG::kWgPlain;
  return &launch_fwd_wg<DP, DVP, NWG, MB, kQRegs, kMode>;
}

}  // namespace lcr::cuda::detail
#endif
