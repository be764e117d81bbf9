#pragma once
// Backward kernel of the CUDA SDPA on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a): the
// plain path (no ALiBi, bias lanes or softcap; NoPE, RoPE, GOAT's and PoPE's lanes) and the
// kBias path (FoX's bias lanes and / or ALiBi, dbias_k; no softcap, no dbias_q) of
// sdpa_backward_kernel.cuh, the same math and outputs, for the width classes QK 64 / V 64,
// QK 128 / V 128, QK 128 / V 64 (PoPE at d = 64) and QK 256 / V 128 (PoPE at d = 128: there
// the warpgroups split dK's and dV's columns instead of the keys, and S^T's and dP^T's query
// columns, WgBwdShape::kColSplit).
//
// One CTA = one (key tile of 64 NWG rows, batch b, KV head hk), NWG warpgroups of 64 keys
// each; a warpgroup keeps its keys' dK [64 x D] and dV [64 x Dv] in fp32 registers while
// the CTA walks every (query head of the GQA group, query tile of BM rows) that can see the
// tile, Q / dO / lse / delta double-buffered in shared memory (cp.async, the next step's copy
// overlapping this step's math). Per step, P recomputed from the final lse:
//   S^T = K Q^T, dP^T = V dO^T   [64 x BM] per warpgroup, keys as rows (K, V from shared
//                                memory, or register fragments loaded once: kKVRegs)
//   P^T = 2^(S^T scale log2 e - lse log2 e), dS^T = P^T (dP^T - delta)   (in registers)
//   dV += P^T dO, dK += dS^T Q   P^T, dS^T as bf16 register fragments (the accumulator
//                                layout is the A fragment's), dO and Q read MN-major
//   dS^T -> shared memory (bf16, 128-byte swizzled), CTA barrier, then
//   dQ += dS K                   [BM x D] split over the warpgroups in 64 x 64 blocks, dS
//                                read MN-major (the stored dS^T), K MN-major; added to global
//                                fp32 dq (sdpa_backward_kernel.cuh says why not a separate
//                                pass): staged in shared memory and added by the TMA engine's
//                                bulk reductions (kBulkDq), or by 8-byte atomics. With one
//                                64 x 64 block and two warpgroups (D = 64, BM = 64) each
//                                warpgroup adds its own keys' share (atomics only).
// dK, dV (and dbias_k) are owned by one CTA and written once (deterministic); dq's last bits
// depend on the order the key tiles finish, as in the mma.sync kernel. The pipeline order and
// why every product completes within its step: the comment above the step loop.
//
// The source builds twice (device/simt.cuh): nvcc for the GPU and the host compiler with
// LCR_CUDA_EMU for the SIMT emulator (tests/cuda/test_sdpa.cpp, CudaSdpaWgmmaBwdEmu).
#include <cmath>
#include <cstdint>

#include "kernels/attention/cuda/device/wgmma.cuh"
#include "kernels/attention/cuda/sdpa_internal.hpp"

namespace lcr::cuda::LCR_SDPAWG {

using namespace ::lcr::cuda::LCR_PATHK;
using ::lcr::cuda::detail::KernelParams;

template <int DP, int DVP, int NWG, int BM>
struct WgBwdShape {
  // kColSplit (QK 256 / V 128): the warpgroups share one tile of 64 keys and split the columns
  // of dK and dV (dK of 64 keys x 256 lanes alone is 128 registers per thread). S^T, dP^T and
  // dS^T they split by query columns (m64n32 products, kQCols each): each warpgroup stores its
  // half of P^T and dS^T to shared memory, and after one CTA barrier dV and dK read both
  // halves from there (A operands from shared memory instead of registers). Otherwise
  // warpgroup wg owns keys 64 wg .. 64 wg + 63 and all of S^T's query columns.
  static constexpr bool kColSplit = DP == 256;
  static constexpr int BN = kColSplit ? 64 : 64 * NWG;         // keys per CTA
  static constexpr int kDkCols = kColSplit ? DP / NWG : DP;    // dK columns per warpgroup
  static constexpr int kDvCols = kColSplit ? DVP / NWG : DVP;  // dV columns per warpgroup
  static constexpr int kQCols = kColSplit ? BM / NWG : BM;     // S^T query columns per warpgroup
  // dQ [BM x DP] in 64 x 64 blocks; each warpgroup takes kDqBlocks of them over all BN keys,
  // or (kDqSplitK: one block, two warpgroups) the one block over its own 64 keys.
  static constexpr int kBlocks = (BM / 64) * (DP / 64);
  static constexpr bool kDqSplitK = kBlocks < NWG;
  static constexpr int kDqBlocks = kDqSplitK ? 1 : kBlocks / NWG;
  static_assert(kDqSplitK || kBlocks % NWG == 0, "dQ blocks must split over the warpgroups");
  // dq through shared memory and bulk reductions (kBulkDq) needs one writer per element of
  // the staged [BM x DP] tile: not with kDqSplitK (both warpgroups add to the one block).
  static constexpr bool kBulkDqShape = !kDqSplitK;
  // The staged dq tile is DP / 32 boxes of the TMA engine's tensor reduction, box c = columns
  // 32 c .. 32 c + 31 of the BM rows, [BM][32] fp32 with the 128-byte swizzle (stage_dq).
  static constexpr int kDqBox = BM * 32;
};

constexpr int kWgBwdStages = 2;  // Q / dO / lse / delta buffers

template <int DP, int DVP, int NWG, int BM, bool kBulkDq>
struct WgBwdSmem {
  static constexpr int S = kWgBwdStages;
  bf16 *K, *V, *Q, *dO, *dS;  // Swz tiles: K [BN x DP], V [BN x DVP], Q [S][BM x DP],
                              // dO [S][BM x DVP], dS^T [BN x BM]
  bf16* P;                    // kColSplit: P^T [BN x BM] (Swz)
  float *lse2, *del;          // [S][BM]: lse log2 e (+inf: the row sees nothing), delta
  float* dbk;                 // kColSplit: warpgroup 1's dbias_k sums [BN] (kBias)
  float* dqs;                 // kBulkDq: the step's dq, [DP / 32] boxes [BM][32] fp32, scaled
  static LCR_HD std::size_t carve(SmemCarver& c, WgBwdSmem* s) {
    using Shape = WgBwdShape<DP, DVP, NWG, BM>;
    constexpr int BN = Shape::BN;
    WgBwdSmem t;
    t.K = c.take_1k<bf16>(BN * DP);
    t.V = c.take_1k<bf16>(BN * DVP);
    t.Q = c.take_1k<bf16>(S * BM * DP);
    t.dO = c.take_1k<bf16>(S * BM * DVP);
    t.dS = c.take_1k<bf16>(BN * BM);
    t.P = Shape::kColSplit ? c.take_1k<bf16>(BN * BM) : nullptr;
    t.lse2 = c.take<float>(S * BM);
    t.del = c.take<float>(S * BM);
    t.dbk = Shape::kColSplit ? c.take<float>(BN) : nullptr;  // (used by kBias only)
    t.dqs = kBulkDq ? c.take_1k<float>(BM * DP) : nullptr;   // 1 KiB: the swizzle's atoms
    if (s) *s = t;
    return c.off;
  }
};

// kBias: x = s scale + R_i - C_j (FoX's bias lanes and/or ALiBi, no softcap, no dbias_q), the
// mma.sync kernel's kBias form (sdpa_backward_kernel.cuh): the row term folded into the staged
// lse, the column term one value per key row (at QK 64 where S^T's accumulators start:
// kZInit), both relative to c0 = C of the tile's first key;
// dbias_k = -sum_i dS, written when a query head's last step is done.
// kBulkDq (the plain and the kBias paths): dq leaves through shared memory (the step's [BM x DP]
// tile, scaled) and the TMA engine's tensor reductions (dq_map: dq as [B][Lq][H][D] fp32, boxes of
// 32 columns x BM rows, wg_bwd_dq_map), one instruction per 32 columns, issued after the next
// step's first barrier, instead of per-thread atomics (without them the backward ran 1.3-1.9x
// faster: docs/cuda.md, "dq by bulk reductions"; the earlier form issued one reduction per
// query row, a serial loop over the issuing warps' lanes); dq 16-byte aligned and a map the
// driver accepts (the launcher falls back to the atomics otherwise).
template <int DP, int DVP, int NWG, int BM, int MB, bool kKVRegs, bool kBias = false,
          bool kBulkDq = false>
LCR_KERNEL_BOUNDS(128 * NWG, MB)
void sdpa_bwd_wg_kernel(const KernelParams p, const LCR_GRID_CONSTANT TensorMap dq_map) {
  static_assert(((DP == 64 || DP == 128) && (DVP == 64 || DVP == 128) && DVP <= DP) ||
                    (DP == 256 && DVP == 128 && NWG == 2 && BM == 64),
                "tile shape");
  static_assert((NWG == 1 || NWG == 2) && (BM == 64 || BM == 128) && BM <= 128 * NWG, "tile shape");
  static_assert(!(DP == 256 && kKVRegs), "QK 256: K and V stay in shared memory");
  using Shape = WgBwdShape<DP, DVP, NWG, BM>;
  static_assert(!kBulkDq || Shape::kBulkDqShape, "bulk dq: one writer per staged element");
  constexpr bool kSplit = Shape::kColSplit;
  constexpr int DKW = Shape::kDkCols, DVW = Shape::kDvCols, QW = Shape::kQCols;
  constexpr int BN = Shape::BN, NT = 128 * NWG, NQB = BM / 64;  // NQB: 64-query blocks
  constexpr int NS = kWgBwdStages;
  // kBias's column term as S^T's starting value (and dbias_k's sums skipped without a key lane)
  // at QK 64 only: faster there, slightly slower at QK 128 (docs/cuda.md).
  constexpr bool kZInit = kBias && DP == 64;
  check_smem_base();
  using Smem = WgBwdSmem<DP, DVP, NWG, BM, kBulkDq>;
  Smem s;
  SmemCarver carver{smem_base()};
  Smem::carve(carver, &s);

  const SdpaArgs& a = p.a;
  const int wg = warp() / 4, w = warp() % 4, g = lane() >> 2, t = lane() & 3;
  const int G = a.H / a.Hkv, bh_count = a.B * a.Hkv;
  const int kt = bid_x() / bh_count;  // key tile 0 sees the most queries: first
  const int bh = bid_x() % bh_count, b = bh / a.Hkv, hk = bh % a.Hkv;
  const int j0 = kt * BN, nk = a.Lk - j0 < BN ? a.Lk - j0 : BN;
  const int64_t dpos = a.q_pos0 - a.k_pos0;  // p_i - p_j = dpos + i - j
  // First query tile that sees key j0 (dpos + i - j0 >= 0).
  const int64_t istart64 = j0 - dpos;
  const int nqt = (a.Lq + BM - 1) / BM;
  const int qt0 = istart64 <= 0 ? 0 : int(istart64 >= a.Lq ? nqt : istart64 / BM);
  const int n_steps = G * (nqt - qt0);
  const int64_t q_ld = int64_t(a.H) * a.D, k_ld = int64_t(a.Hkv) * a.D;
  const int64_t v_ld = int64_t(a.Hkv) * a.Dv, o_ld = int64_t(a.H) * a.Dv;

  // Q and dO of (query head h, query tile qt) into stage st (cp.async).
  auto stage_tiles = [&](int h, int qt, int st) {
    const int i0 = qt * BM, nq = a.Lq - i0 < BM ? a.Lq - i0 : BM;
    async_swz<BM, DP, NT>(s.Q + st * BM * DP,
                          a.q + (int64_t(b) * a.Lq + i0) * q_ld + int64_t(h) * a.D, q_ld, nq, a.D);
    async_swz<BM, DVP, NT>(s.dO + st * BM * DVP,
                           p.dout + (int64_t(b) * a.Lq + i0) * o_ld + int64_t(h) * a.Dv, o_ld, nq,
                           a.Dv);
  };
  // lse and delta of row tid() of (h, qt), read a step ahead into registers (plain loads do
  // not stall until their value is used) and stored to the stage at the end of the step.
  // kBias: the key lane of the tile's first key for query head h (0 without a key lane).
  auto bias_ref = [&](int h) {
    return a.bias_k && j0 < a.Lk ? load_ro(a.bias_k + (int64_t(b) * a.Lk + j0) * a.H + h) : 0.f;
  };
  struct RowStats {
    float l2 = INFINITY, del = 0.f;  // padding rows: P = 2^(x - inf) = 0
    float rterm = 0.f;               // kBias: R_i - c0 (bias_q_i - c0 - slope (p_i - p_j0))
  };
  auto fetch_stats = [&](int h, int qt) {
    RowStats r;
    const int i = qt * BM + tid();
    if (tid() < BM && i < a.Lq) {
      r.l2 = load_ro(p.lse_in + (int64_t(b) * a.H + h) * a.Lq + i);
      r.del = load_ro(p.delta + (int64_t(b) * a.H + h) * a.Lq + i);
      if constexpr (kBias) {
        const float sl = a.alibi_slopes ? load_ro(a.alibi_slopes + h) : 0.f;
        const float bqi = a.bias_q ? load_ro(a.bias_q + (int64_t(b) * a.Lq + i) * a.H + h) : 0.f;
        r.rterm = fmaf(-sl, float(dpos + i - j0), bqi - bias_ref(h));
      }
    }
    return r;
  };
  auto store_stats = [&](RowStats r, int st) {
    if (tid() < BM) {  // a row that saw no key (lse = -inf) has P = 0
      s.lse2[st * BM + tid()] =
          r.l2 == -INFINITY || r.l2 == INFINITY ? INFINITY : (r.l2 - r.rterm) * kLog2e;
      s.del[st * BM + tid()] = r.del;
    }
  };

  int h = hk * G, qt = qt0;
  auto next_of = [&](int& nh, int& nqt_) {  // the step after (h, qt)
    const bool head_done = qt == nqt - 1;
    nh = h + head_done, nqt_ = head_done ? qt0 : qt + 1;
  };
  if (n_steps > 0) {
    async_swz<BN, DP, NT>(s.K, a.k + (int64_t(b) * a.Lk + j0) * k_ld + int64_t(hk) * a.D, k_ld, nk,
                          a.D);
    async_swz<BN, DVP, NT>(s.V, a.v + (int64_t(b) * a.Lk + j0) * v_ld + int64_t(hk) * a.Dv, v_ld,
                           nk, a.Dv);
    stage_tiles(h, qt, 0);
    store_stats(fetch_stats(h, qt), 0);
  }
  cp_async_commit();

  // This warpgroup's columns of dK and dV (kColSplit: columns DKW wg .., DVW wg ..).
  float dk[DKW / 8][4], dv[DVW / 8][4];
  LCR_UNROLL
  for (int n = 0; n < DKW / 8; ++n) LCR_UNROLL
  for (int e = 0; e < 4; ++e) dk[n][e] = 0.f;
  LCR_UNROLL
  for (int n = 0; n < DVW / 8; ++n) LCR_UNROLL
  for (int e = 0; e < 4; ++e) dv[n][e] = 0.f;
  const int kw = kSplit ? 0 : 64 * wg;  // this warpgroup's first key row in the tile
  const int dk0 = kSplit ? DKW * wg : 0, dv0 = kSplit ? DVW * wg : 0;
  const int qc0 = kSplit ? QW * wg : 0;  // this warpgroup's first query column of S^T
  const float sl2 = a.scale * kLog2e, inv_scale = 1.f / a.scale;
  const int krow = kw + 16 * w + g;  // this thread's key rows in the tile: krow, krow + 8
  float dbk[2] = {0.f, 0.f};         // kBias: -sum_i dS of the head's steps so far, rows krow, +8
  const int jw0 = j0 + kw;           // this warpgroup's first key

  // kKVRegs: this warp's 16 key rows of K and V as A fragments, loaded once.
  uint32_t ak[kKVRegs ? DP / 16 : 1][4], av[kKVRegs ? DVP / 16 : 1][4];
  if (kKVRegs && n_steps > 0) {  // K and V landed (with step 0's tiles): their fragments
    cp_async_wait<0>();
    sync_cta();
    const int r = kw + 16 * w + (lane() & 15), c = 8 * (lane() >> 4);
    LCR_UNROLL
    for (int kk = 0; kk < DP / 16; ++kk) ldsm_x4(ak[kk], s.K + swz(BN, r, 16 * kk + c));
    LCR_UNROLL
    for (int kk = 0; kk < DVP / 16; ++kk) ldsm_x4(av[kk], s.V + swz(BN, r, 16 * kk + c));
  }

  // This warpgroup's P^T or dS^T fragments (key rows krow, krow + 8; query columns qc0 ..
  // qc0 + QW - 1) into a Swz tile [BN x BM] of shared memory.
  auto store_frags = [&](bf16* tile, const uint32_t(&f)[QW / 16][4]) {
    LCR_UNROLL
    for (int kk = 0; kk < QW / 16; ++kk) {
      const int c = qc0 + 16 * kk + 2 * t;
      *reinterpret_cast<uint32_t*>(tile + swz(BN, krow, c)) = f[kk][0];
      *reinterpret_cast<uint32_t*>(tile + swz(BN, krow + 8, c)) = f[kk][1];
      *reinterpret_cast<uint32_t*>(tile + swz(BN, krow, c + 8)) = f[kk][2];
      *reinterpret_cast<uint32_t*>(tile + swz(BN, krow + 8, c + 8)) = f[kk][3];
    }
  };

  // dQ of a step (this warpgroup's 64 x 64 blocks): issued after the step's dS^T exchange,
  // then, once complete, added to global dq (scaled, 8-byte atomics).
  using DqAcc = float[Shape::kDqBlocks][32];
  auto issue_dq = [&](DqAcc& dq, const bf16* dS) {
    LCR_UNROLL
    for (int u = 0; u < Shape::kDqBlocks; ++u) {
      const int blk = Shape::kDqSplitK ? 0 : wg * Shape::kDqBlocks + u;
      const int mb = blk % NQB, nb = blk / NQB;  // 64-query block, 64-column block
      constexpr int kKeys = Shape::kDqSplitK ? 64 : BN;
      const int kbase = Shape::kDqSplitK ? 64 * wg : 0;
      LCR_UNROLL
      for (int k0 = 0; k0 < kKeys; k0 += 16)
        wgmma_ss<1, 1>(dq[u], desc_mn(dS, BN, kbase + k0, 64 * mb),
                       desc_mn(s.K, BN, kbase + k0, 64 * nb), k0 > 0);
    }
  };
  auto add_dq = [&](const DqAcc& dq, int h, int i0) {
    LCR_UNROLL
    for (int u = 0; u < Shape::kDqBlocks; ++u) {
      const int blk = Shape::kDqSplitK ? 0 : wg * Shape::kDqBlocks + u;
      const int mb = blk % NQB, nb = blk / NQB;
      const int r0 = i0 + 64 * mb + 16 * w + g;  // query row of half 0
      float* dq0 = p.dq + (int64_t(b) * a.Lq + r0) * q_ld + int64_t(h) * a.D + 64 * nb + 2 * t;
      const bool whole = a.D == DP && i0 + BM <= a.Lq;
      LCR_UNROLL
      for (int r = 0; r < 2; ++r) LCR_UNROLL
      for (int n = 0; n < 8; ++n)
        if (whole || (r0 + 8 * r < a.Lq && 64 * nb + 8 * n + 2 * t < a.D))
          atomic_add2(dq0 + 8 * r * q_ld + 8 * n, dq[u][4 * n + 2 * r] * a.scale,
                      dq[u][4 * n + 2 * r + 1] * a.scale);
    }
  };
  // kBulkDq: the step's dq blocks (scaled) into the staged boxes s.dqs, which the engine has
  // read since the last bulk_wait_read; published by the next barrier's fence. Element (row,
  // column 32 c + 4 k + e) of box c at row * 32 + 4 (k ^ (row % 8)) + e (the 128-byte swizzle;
  // row % 8 = g here). A half-warp's 8-byte stores cover rows g .. g + 3 (g = 0 or 4), columns
  // 8 n + 2 t: with every lane at the same n, rows 2m and 2m + 1 land on the same 8 banks (two-way
  // conflicts). Lanes whose g ^ (g >> 1) is odd therefore store their column blocks in the order
  // n ^ 2, which spreads the four rows over four chunk pairs (32 distinct banks).
  auto stage_dq = [&](const DqAcc& dq) {
    const bool flip = (g ^ (g >> 1)) & 1;
    // Word of column block n (mod 4) in the row: 4 ((2 (n ^ 2 flip) + (t >> 1)) ^ g) + 2 (t & 1)
    // = (8 (n % 4) ^ x) + 2 (t & 1), with this lane's x; byte addresses in the shared space,
    // one per n % 4, the rest immediate offsets.
    const int x = 4 * ((t >> 1) ^ g ^ (flip ? 4 : 0));
    const uint32_t lane_s = smem_addr(s.dqs) + 4u * uint32_t((16 * w + g) * 32 + 2 * (t & 1));
    LCR_UNROLL
    for (int u = 0; u < Shape::kDqBlocks; ++u) {
      const int blk = wg * Shape::kDqBlocks + u, mb = blk % NQB, nb = blk / NQB;
      const uint32_t blk_s = lane_s + 4u * uint32_t(2 * nb * Shape::kDqBox + 64 * mb * 32);
      LCR_UNROLL
      for (int m = 0; m < 4; ++m) {
        const uint32_t at = blk_s + 4u * uint32_t((8 * m) ^ x);
        LCR_UNROLL
        for (int hi = 0; hi < 2; ++hi) LCR_UNROLL
        for (int r = 0; r < 2; ++r) {
          const int n = 4 * hi + m, e = 4 * n + 2 * r,
                    ef = 4 * (n ^ 2) + 2 * r;  // block n or n ^ 2
          store_shared_f32x2(at + 4u * uint32_t(hi * Shape::kDqBox + 8 * r * 32),
                             (flip ? dq[u][ef] : dq[u][e]) * a.scale,
                             (flip ? dq[u][ef + 1] : dq[u][e + 1]) * a.scale);
        }
      }
    }
  };
  // ... and, after a barrier, the staged boxes of (query head h, rows i0 ..) added to global dq:
  // lane 0 of warp c issues box c (rows past Lq and columns past D are outside the map's
  // tensor, skipped by the engine).
  static_assert(DP / 32 <= NT / 32, "one warp per dq box");
  auto issue_bulk_dq = [&](int h, int i0) {
    if (lane() == 0 && 32 * warp() < a.D)
      bulk_tensor_add_f32_4d(dq_map, s.dqs + warp() * Shape::kDqBox, 32 * warp(), h, i0, b);
    bulk_commit();
  };

  // The pipeline of step it (stage it % 2), products in issue order:
  //   top barrier: step it's tiles landed (and visible to the tensor cores); every warpgroup
  //     is done with step it - 1, so stage (it + 1) % 2 and dS^T are free: step it + 1's copy
  //     starts (its lse and delta into registers, stored at the end of the step)
  //   S^T, dP^T; wait for S^T -> P^T (exp) -> P^T fragments
  //   dV += P^T dO; wait for dP^T -> dS^T -> fragments, shared memory
  //   dK += dS^T Q; second barrier (every warpgroup's dS^T rows); dQ = dS K; wait for all,
  //   dq to global
  // so the exponentials run beside dP^T, dS^T beside dV, and the other warpgroup's (or CTA's)
  // products beside this one's waits. kColSplit: S^T, dP^T of this warpgroup's query
  // columns; P^T and dS^T to shared memory; the second barrier; then dV, dK and dQ together.
  int dq_h = 0, dq_i0 = 0;  // kBulkDq: query head and first row of the staged step
  for (int it = 0; it < n_steps; ++it) {
    const int st = it % NS, i0 = qt * BM;
    int nh, nq_t;
    next_of(nh, nq_t);
    cp_async_wait<0>();
    fence_async_smem();
    sync_cta();
    if constexpr (kBulkDq)
      if (it > 0) issue_bulk_dq(dq_h, dq_i0);  // the last step's dq (staged, now published)
    const bool more = it + 1 < n_steps;
    if (more) stage_tiles(nh, nq_t, (it + 1) % NS);
    cp_async_commit();
    const RowStats next_stats = more ? fetch_stats(nh, nq_t) : RowStats{};
    const bf16 *Q = s.Q + st * BM * DP, *dO = s.dO + st * BM * DVP;
    bf16* dS = s.dS;
    // kBias: C_j - c0 of this thread's key rows for head h. kZInit: S^T's accumulators start
    // from z = -(C_j - c0) / scale, so that S^T leaves the tensor cores with the column term in
    // it and P^T is the plain path's (|C_j - c0| spans one key tile, so z is small); else ck,
    // the same in log2 units, is added to each element's exponent after the S^T wait.
    float sr[QW / 8][4], dp[QW / 8][4], ck[2] = {0.f, 0.f};
    if constexpr (kBias) {
      const float sl = a.alibi_slopes ? load_ro(a.alibi_slopes + h) : 0.f, c0 = bias_ref(h);
      LCR_UNROLL
      for (int r = 0; r < 2; ++r) {
        const int j = j0 + krow + 8 * r;
        const float bkj =
            a.bias_k && j < a.Lk ? load_ro(a.bias_k + (int64_t(b) * a.Lk + j) * a.H + h) : 0.f;
        ck[r] = fmaf(-sl, float(j - j0), bkj - c0);
        if constexpr (!kZInit) ck[r] *= kLog2e;
      }
      if constexpr (kZInit) {
        LCR_UNROLL
        for (int n = 0; n < QW / 8; ++n) LCR_UNROLL
        for (int e = 0; e < 4; ++e) sr[n][e] = -ck[e >> 1] * inv_scale;
      }
    }
    const float *cL = s.lse2 + st * BM, *cDel = s.del + st * BM;

    // acc = X Y^T over `depth` lanes (acc_in: acc += X Y^T), one commit group: X this
    // warpgroup's key rows of a key-side tile (K or V; its register fragments fr with kKVRegs),
    // Y the step's query-side tile (Q or dO) read K-major, all its rows (kColSplit: this
    // warpgroup's QW, m64n32).
    auto issue_keys_x_queries = [&](float(&acc)[QW / 8][4], const uint32_t(*fr)[4],
                                    const bf16* keys, const bf16* rows, int depth, bool acc_in) {
      LCR_UNROLL
      for (int nb = 0; nb < (kSplit ? 1 : NQB); ++nb) LCR_UNROLL
      for (int k0 = 0; k0 < depth; k0 += 16) {
        const bool accum = acc_in || k0 > 0;
        if constexpr (kSplit)
          wgmma_ss<0, 0, QW>(&acc[0][0], desc_k(keys, BN, k0), desc_k(rows, BM, k0, qc0), accum);
        else if constexpr (kKVRegs)
          wgmma_rs<0>(&acc[8 * nb][0], fr[k0 / 16], desc_k(rows, BM, k0, 64 * nb), accum);
        else
          wgmma_ss<0>(&acc[8 * nb][0], desc_k(keys, BN, k0, kw), desc_k(rows, BM, k0, 64 * nb),
                      accum);
      }
      wgmma_commit();
    };
    wgmma_fence();
    issue_keys_x_queries(sr, ak, s.K, Q, DP, kZInit);   // S^T (kZInit: from z)
    issue_keys_x_queries(dp, av, s.V, dO, DVP, false);  // dP^T
    wgmma_wait<1>();                                    // S^T
    fence_regs<QW / 2>(&sr[0][0]);

    // P^T; element (key row krow + 8 (e / 2), query column 8 n + 2 t + e % 2). Visibility:
    // column >= thr[r] (causality and j < Lk folded, sdpa_backward_kernel.cuh), tested only
    // where the warpgroup's keys straddle the diagonal or the sequence end.
    const bool full = (jw0 + 64 <= a.Lk) && (dpos + i0 - (jw0 + 63) >= 0);
    int thr[2] = {0, 0};
    if (!full) LCR_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int j = j0 + krow + 8 * r;
      const int64_t first = j - dpos - i0;
      thr[r] = (j >= a.Lk ? BM + 1 : int(first < 0 ? 0 : (first > BM ? BM : first))) - 2 * t - qc0;
    }
    uint32_t pf[QW / 16][4], sf[QW / 16][4];
    LCR_UNROLL
    for (int n = 0; n < QW / 8; ++n) {
      const float l0 = cL[qc0 + 8 * n + 2 * t], l1 = cL[qc0 + 8 * n + 2 * t + 1];
      LCR_UNROLL
      for (int e = 0; e < 4; ++e) {
        float lrow = e & 1 ? l1 : l0;
        if constexpr (kBias && !kZInit) lrow += ck[e >> 1];
        float pr = fast_exp2(fmaf(sr[n][e], sl2, -lrow));
        if (!full && 8 * n + (e & 1) < thr[e >> 1]) pr = 0.f;
        sr[n][e] = pr;
      }
    }
    LCR_UNROLL
    for (int kk = 0; kk < QW / 16; ++kk) c_to_a(pf[kk], sr[2 * kk], sr[2 * kk + 1]);
    if constexpr (kSplit) {
      store_frags(s.P, pf);  // this warpgroup's columns of P^T, for dV after the barrier
    } else {
      wgmma_fence();
      LCR_UNROLL
      for (int kk = 0; kk < BM / 16; ++kk) LCR_UNROLL
      for (int hf = 0; hf < DVW / 64; ++hf)
        wgmma_rs<1>(&dv[8 * hf][0], pf[kk], desc_mn(dO, BM, 16 * kk, dv0 + 64 * hf), true);
      wgmma_commit();
    }
    wgmma_wait<kSplit ? 0 : 1>();  // dP^T (dV may still run)
    fence_regs<QW / 2>(&dp[0][0]);

    // dS^T = P^T (dP^T - delta), as fragments and into shared memory for dQ.
    LCR_UNROLL
    for (int n = 0; n < QW / 8; ++n) {
      const float d0 = cDel[qc0 + 8 * n + 2 * t], d1 = cDel[qc0 + 8 * n + 2 * t + 1];
      LCR_UNROLL
      for (int e = 0; e < 4; ++e) {
        dp[n][e] = sr[n][e] * (dp[n][e] - (e & 1 ? d1 : d0));
        if constexpr (kBias && !kZInit) dbk[e >> 1] -= dp[n][e];
      }
    }
    if constexpr (kZInit) {
      if (p.dbias_k) {  // (ALiBi alone has no key lane to differentiate: a uniform branch)
        LCR_UNROLL
        for (int n = 0; n < QW / 8; ++n) LCR_UNROLL
        for (int e = 0; e < 4; ++e) dbk[e >> 1] -= dp[n][e];
      }
    }
    LCR_UNROLL
    for (int kk = 0; kk < QW / 16; ++kk) c_to_a(sf[kk], dp[2 * kk], dp[2 * kk + 1]);
    if constexpr (!kSplit) {
      wgmma_fence();
      LCR_UNROLL
      for (int kk = 0; kk < BM / 16; ++kk) LCR_UNROLL
      for (int hf = 0; hf < DKW / 64; ++hf)
        wgmma_rs<1>(&dk[8 * hf][0], sf[kk], desc_mn(Q, BM, 16 * kk, dk0 + 64 * hf), true);
      wgmma_commit();
    }
    store_frags(dS, sf);
    fence_async_smem();                          // dS^T (kColSplit: and P^T), for the tensor cores
    if constexpr (kBulkDq) bulk_wait_read<0>();  // the staged dq tile is free after the barrier
    sync_cta();                                  // every warpgroup's dS^T rows (kColSplit: columns)
    float dq[Shape::kDqBlocks][32];
    wgmma_fence();
    if constexpr (kSplit) {  // dV += P^T dO, dK += dS^T Q: this warpgroup's columns, all queries
      LCR_UNROLL
      for (int kk = 0; kk < BM / 16; ++kk) LCR_UNROLL
      for (int hf = 0; hf < DVW / 64; ++hf)
        wgmma_ss<1>(&dv[8 * hf][0], desc_k(s.P, BN, 16 * kk),
                    desc_mn(dO, BM, 16 * kk, dv0 + 64 * hf), true);
      LCR_UNROLL
      for (int kk = 0; kk < BM / 16; ++kk) LCR_UNROLL
      for (int hf = 0; hf < DKW / 64; ++hf)
        wgmma_ss<1>(&dk[8 * hf][0], desc_k(dS, BN, 16 * kk), desc_mn(Q, BM, 16 * kk, dk0 + 64 * hf),
                    true);
    }
    issue_dq(dq, dS);
    wgmma_commit();
    if (more) store_stats(next_stats, (it + 1) % NS);
    // Every product of the step completes within it: one pending across the loop's back
    // edge makes ptxas serialise every wgmma of the kernel (C7514; reading dq under a
    // condition instead, C7518).
    wgmma_wait<0>();
    LCR_UNROLL
    for (int u = 0; u < Shape::kDqBlocks; ++u) fence_regs<32>(dq[u]);
    if constexpr (kBulkDq)
      stage_dq(dq), dq_h = h, dq_i0 = i0;
    else
      add_dq(dq, h, i0);
    // kBias: the end of a query head; its dbias_k column is complete (one writer per key row:
    // under kColSplit warpgroup 0, after adding warpgroup 1's sums over its query columns).
    if constexpr (kBias) {
      if (p.dbias_k && nh != h) {  // (the same branch in every thread of the CTA)
        float v[2] = {quad_sum(dbk[0]), quad_sum(dbk[1])};
        if constexpr (kSplit) {  // warpgroup 1's sums over its query columns, to warpgroup 0
          if (wg == 1 && t == 0) s.dbk[krow] = v[0], s.dbk[krow + 8] = v[1];
          sync_cta();
          if (wg == 0) v[0] += s.dbk[krow], v[1] += s.dbk[krow + 8];
        }
        LCR_UNROLL
        for (int r = 0; r < 2; ++r) {
          const int j = j0 + krow + 8 * r;
          if (t == 0 && j < a.Lk && (!kSplit || wg == 0)) {
            float* dst = p.dbias_k + (int64_t(b) * a.Lk + j) * a.H + h;
            *dst = p.accumulate ? *dst + v[r] : v[r];
          }
          dbk[r] = 0.f;
        }
      }
    }
    h = nh, qt = nq_t;
  }
  if constexpr (kBias) {  // nothing sees this tile: its bias gradient is zero
    if (p.dbias_k && n_steps == 0 && !p.accumulate)
      for (int x = tid(); x < nk * G; x += NT)
        p.dbias_k[(int64_t(b) * a.Lk + j0 + x / G) * a.H + hk * G + x % G] = 0.f;
  }
  if constexpr (kBulkDq) {  // the last step's dq; the engine is done before the CTA exits
    if (n_steps > 0) {
      fence_async_smem();
      sync_cta();
      issue_bulk_dq(dq_h, dq_i0);
    }
    bulk_wait<0>();
  }
  fence_regs<DKW / 2>(&dk[0][0]);
  fence_regs<DVW / 2>(&dv[0][0]);
  cp_async_wait<0>();

  // dK = scale * sum dS^T Q, dV = sum P^T dO for this thread's key rows.
  LCR_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int j = j0 + krow + 8 * r;
    if (j >= a.Lk) continue;
    float* dkrow = p.dk + (int64_t(b) * a.Lk + j) * k_ld + int64_t(hk) * a.D;
    float* dvrow = p.dv + (int64_t(b) * a.Lk + j) * v_ld + int64_t(hk) * a.Dv;
    LCR_UNROLL
    for (int n = 0; n < DKW / 8; ++n) {
      const int c = dk0 + 8 * n + 2 * t;
      if (c >= a.D) continue;
      float x0 = dk[n][2 * r] * a.scale, x1 = dk[n][2 * r + 1] * a.scale;
      if (p.accumulate) x0 += dkrow[c], x1 += dkrow[c + 1];
      store_f32x2(dkrow + c, x0, x1);
    }
    LCR_UNROLL
    for (int n = 0; n < DVW / 8; ++n) {
      const int c = dv0 + 8 * n + 2 * t;
      if (c >= a.Dv) continue;
      float x0 = dv[n][2 * r], x1 = dv[n][2 * r + 1];
      if (p.accumulate) x0 += dvrow[c], x1 += dvrow[c + 1];
      store_f32x2(dvrow + c, x0, x1);
    }
  }
}

// Key tiles (into p.n_tiles) and CTAs of a launch of one instantiation (both builds' launchers).
template <int DP, int DVP, int NWG, int BM>
inline int64_t wg_bwd_grid(KernelParams& p) {
  constexpr int BN = WgBwdShape<DP, DVP, NWG, BM>::BN;
  p.n_tiles = (p.a.Lk + BN - 1) / BN;
  return int64_t(p.n_tiles) * p.a.B * p.a.Hkv;
}

template <int DP, int DVP, int NWG, int BM, bool kBulkDq = false>
inline std::size_t wg_bwd_smem_bytes() {
  SmemCarver c;
  return WgBwdSmem<DP, DVP, NWG, BM, kBulkDq>::carve(c, nullptr);
}

// Whether a launch takes the kBulkDq form (the plain and the kBias paths): the shape allows it,
// its shared memory fits (227 KiB) and dq is 16-byte aligned with 16-byte rows (the tensor
// map's rule; the atomics need 8 bytes).
template <int DP, int DVP, int NWG, int BM>
inline bool wg_bwd_bulk_dq(const KernelParams& p) {
  return WgBwdShape<DP, DVP, NWG, BM>::kBulkDqShape &&
         wg_bwd_smem_bytes<DP, DVP, NWG, BM, true>() <= 227 * 1024 &&
         (reinterpret_cast<std::uintptr_t>(p.dq) & 15) == 0 && p.a.D % 4 == 0;
}

// kBulkDq's tensor map: dq [B][Lq][H][D] fp32 (dimension 0 = the head's D columns), boxes of 32
// columns x 1 head x BM rows x 1 batch row, 128-byte swizzled in shared memory.
template <int BM>
inline TensorMapF32Desc wg_bwd_dq_map(const KernelParams& p) {
  const SdpaArgs& a = p.a;
  TensorMapF32Desc d;
  d.base = p.dq;
  const uint64_t dim[4] = {uint64_t(a.D), uint64_t(a.H), uint64_t(a.Lq), uint64_t(a.B)};
  for (int i = 0; i < 4; ++i) d.dim[i] = dim[i];
  d.stride[0] = 4;
  for (int i = 1; i < 4; ++i) d.stride[i] = d.stride[i - 1] * dim[i - 1];
  d.box[0] = 32, d.box[1] = 1, d.box[2] = BM, d.box[3] = 1;
  d.swizzle128 = true;
  return d;
}

}  // namespace lcr::cuda::LCR_SDPAWG

#if !defined(LCR_CUDA_EMU)
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/sdpa_heuristics.hpp"

namespace lcr::cuda::detail {

// The launcher of configuration BwdWg (sdpa_heuristics.hpp) for the plain path and (kBias) the
// bias-lane / ALiBi path.
// dq through shared memory and tensor bulk reductions where wg_bwd_bulk_dq allows and the
// driver encodes the map, else atomics.
template <int DP, int DVP, int NWG, int BM, int MB, bool kKVRegs, bool kBias = false>
void launch_bwd_wg(KernelParams p, cudaStream_t s) {
  namespace K = LCR_SDPAWG;
  const int64_t grid = K::wg_bwd_grid<DP, DVP, NWG, BM>(p);
  if (grid == 0) return;
  TensorMap dq_map{};
  if constexpr (K::WgBwdShape<DP, DVP, NWG, BM>::kBulkDqShape) {
    if (K::wg_bwd_bulk_dq<DP, DVP, NWG, BM>(p) && cuda_tensor_map(&dq_map, K::wg_bwd_dq_map<BM>(p)))
      return launch_with_smem(K::sdpa_bwd_wg_kernel<DP, DVP, NWG, BM, MB, kKVRegs, kBias, true>,
                              grid, 128 * NWG, K::wg_bwd_smem_bytes<DP, DVP, NWG, BM, true>(), s, p,
                              dq_map);
  }
  launch_with_smem(K::sdpa_bwd_wg_kernel<DP, DVP, NWG, BM, MB, kKVRegs, kBias>, grid, 128 * NWG,
                   K::wg_bwd_smem_bytes<DP, DVP, NWG, BM>(), s, p, dq_map);
}

// Configuration BwdWg<NWG, BM, MB, kKVRegs> (sdpa_heuristics.hpp) on path kPath (the plain and
// kBias paths; the option path is mma.sync's).
template <int DP, int DVP, SdpaPath kPath, int NWG, int BM, int MB, bool kKVRegs>
constexpr SdpaLauncher launcher(BwdWg<NWG, BM, MB, kKVRegs>) {
  static_assert(kPath != SdpaPath::kOpts, "the wgmma backward has no option path");
  return &launch_bwd_wg<DP, DVP, NWG, BM, MB, kKVRegs, kPath == SdpaPath::kBias>;
}

}  // namespace lcr::cuda::detail
#endif
