#pragma once
// Backward kernel of the CUDA SDPA, FlashAttention-2 style on mma.sync tensor cores.
//
// One CTA = one (key tile of BN = 16*NW rows, batch b, KV head hk); warp w owns keys
// 16w..16w+15 of the tile and keeps their dK [16 x D] and dV [16 x Dv] in fp32 registers
// while it walks every (query head of the GQA group, query tile of BM rows) that can see
// the tile (double-buffered Q / dO tiles via cp.async). Per step, with P recomputed from
// the final lse:
//   S^T = K Q^T, dP^T = V dO^T         [16 x BM] per warp, keys as rows so that
//   P^T and dS^T = P^T (dP^T - delta)  are already the A operand of the next products:
//   dV += P^T dO,  dK += dS^T Q        (bf16 operands, fp32 accumulators, no smem trip)
//   dS^T -> shared memory (bf16), then dQ += dS K over the whole tile, split over warps,
//   added to global fp32 dq with vector atomics (float2 red.add).
// kPipe: dS^T is double-buffered and step s's dQ runs at the start of step s + 1, after the
// barrier that step needs anyway, so the "dS^T complete" barrier of every step goes (one
// barrier per step instead of two; warps that finish their softmax early start the next
// step's products instead of waiting).
// dK, dV and dbias_k are owned by one CTA and written once (deterministic). dq, dbias_q
// and dbias_q_sums receive fp32 atomic adds from every key tile, so their last bits depend
// on the order the tiles finish; a separate dQ pass would be deterministic but recomputes
// S and dP (7 matrix products per tile pair instead of 5, ~40% more work): we chose speed.
// One source for two builds (device/simt.cuh): nvcc for the GPU, and host C++ with
// LCR_CUDA_EMU for the SIMT emulator (sdpa_mma_emu.cpp), in namespace LCR_SDPAMMA.
#include <algorithm>
#include <cmath>

#include "kernels/attention/cuda/sdpa_device.cuh"
#include "kernels/attention/cuda/sdpa_internal.hpp"

namespace lcr::cuda::LCR_SDPAMMA {

using ::lcr::cuda::detail::KernelParams;

// DQM: 16-row m-tiles per warp in the dQ product. With 2, a warp's dQ block is 32 rows x
// half the columns of DQM = 1's, so each K^T fragment read from shared memory feeds two
// m-tiles (fewer ldmatrix per mma; the backward is bound by shared-memory reads).
template <int DP, int DVP, int BM, int NW, bool kPipe = false, int DQM = 1>
struct BwdTraits {
  static constexpr int kThreads = NW * 32;
  static constexpr int BN = 16 * NW;
  static constexpr int kDqM = DQM;
  static constexpr int kRowBlocks = BM / (16 * DQM);  // dQ: row blocks of the query tile
  static constexpr int kColGroups = NW / kRowBlocks;  // dQ: column groups per row block
  static constexpr int kDqCols = DP / kColGroups;     // dQ columns per warp
  static_assert(BM % (16 * DQM) == 0 && NW % kRowBlocks == 0 && kDqCols % 16 == 0, "dQ warp split");
  static constexpr int kDsBuffers = kPipe ? 2 : 1;
  static constexpr size_t kSmemBf16 =
      BN * DP + BN * DVP + 2 * BM * (DP + DVP) + kDsBuffers * BN * BM;
  // fp32 per query of each stage: lse * log2 e, delta, the query bias lane (option path).
  static constexpr size_t kSmem = sizeof(__nv_bfloat16) * kSmemBf16 + sizeof(float) * 6 * BM;
};

// kBias (with kOpts = false): x = s scale + R_i - C_j (FoX's bias lanes and/or ALiBi, no
// softcap; sdpa_forward_kernel.cuh) and no dbias_q / dbias_q_sums. The row term joins the
// staged lse (x - lse = s scale - C_j - (lse - R_i)), the column term is one value per key
// row, so P costs one FADD per element more than the plain path and the tiling is the plain
// path's; dbias_k = -sum_i dS is summed as on the option path. Both terms are taken relative
// to c0 = C of the tile's first key for the step's head (the forward's reason: lse - R_i
// would cancel two numbers of FoX's size).
template <int DP, int DVP, int BM, int NW, bool kOpts, bool kPipe, int DQM, bool kBias>
LCR_KERNEL_THREADS(NW * 32)
void sdpa_bwd_kernel(const KernelParams p) {
  using T = BwdTraits<DP, DVP, BM, NW, kPipe, DQM>;
  constexpr int BN = T::BN, NTH = T::kThreads;
  LCR_SDPA_SMEM(smem_raw);
  __nv_bfloat16* sK = reinterpret_cast<__nv_bfloat16*>(smem_raw);       // [BN][DP]
  __nv_bfloat16* sV = sK + BN * DP;                                     // [BN][DVP]
  __nv_bfloat16* sQ = sV + BN * DVP;                                    // [2][BM][DP]
  __nv_bfloat16* sdO = sQ + 2 * BM * DP;                                // [2][BM][DVP]
  __nv_bfloat16* sdS = sdO + 2 * BM * DVP;                              // [1 or 2][BN][BM] (dS^T)
  float* sL = reinterpret_cast<float*>(sdS + T::kDsBuffers * BN * BM);  // [2][BM] lse log2 e
  float* sDel = sL + 2 * BM;                                            // [2][BM] delta
  float* sBq = sDel + 2 * BM;                                           // [2][BM] bias_q (kOpts)

  const SdpaArgs& a = p.a;
  const int tid = ::lcr::cuda::LCR_PATHK::tid(), warp = tid / 32, lane = tid % 32, g = lane / 4,
            t = lane % 4;
  const int G = a.H / a.Hkv;
  const int bh_count = a.B * a.Hkv;
  const int kt =
      int(unsigned(bid_x()) / unsigned(bh_count));  // key tile 0 sees the most queries: first
  const int bh = int(unsigned(bid_x()) % unsigned(bh_count)), b = bh / a.Hkv, hk = bh % a.Hkv;
  const int j0 = kt * BN, nk = imin(BN, a.Lk - j0);
  const int64_t dpos = a.q_pos0 - a.k_pos0;  // p_i - p_j = dpos + i - j

  // First query row that sees key j0: dpos + i - j0 >= 0.
  const int64_t istart64 = j0 - dpos;
  const int qt0 = istart64 <= 0 ? 0 : int(istart64 >= a.Lq ? (a.Lq + BM - 1) / BM : istart64 / BM);
  const int nqt = (a.Lq + BM - 1) / BM;
  const int per_head = nqt - qt0, n_steps = G * per_head;

  const int64_t q_ld = int64_t(a.H) * a.D, k_ld = int64_t(a.Hkv) * a.D;
  const int64_t v_ld = int64_t(a.Hkv) * a.Dv, o_ld = int64_t(a.H) * a.Dv;

  // kBias: the key lane of the tile's first key for query head h (0 without a key lane);
  // with ALiBi, c0 = bias_ref - slope p_j0, and the slope terms below are relative to p_j0.
  auto bias_ref = [&](int h) {
    return a.bias_k ? load_ro(a.bias_k + (int64_t(b) * a.Lk + j0) * a.H + h) : 0.f;
  };

  // Stage the Q / dO / lse / delta tile of (query head h, query tile qt) into buffer `st`.
  auto stage = [&](int h, int qt, int st) {
    const int i0 = qt * BM;
    const int nq = imin(BM, a.Lq - i0);
    load_tile<BM, DP, NTH>(sQ + st * BM * DP,
                           a.q + (int64_t(b) * a.Lq + i0) * q_ld + int64_t(h) * a.D, q_ld, nq, a.D,
                           tid);
    load_tile<BM, DVP, NTH>(sdO + st * BM * DVP,
                            p.dout + (int64_t(b) * a.Lq + i0) * o_ld + int64_t(h) * a.Dv, o_ld, nq,
                            a.Dv, tid);
    for (int r = tid; r < BM; r += NTH) {
      const int i = i0 + r;
      float l2 = INFINITY, del = 0.f;  // padding rows: P = 2^(x - inf) = 0
      if (i < a.Lq) {
        const float l = p.lse_in[(int64_t(b) * a.H + h) * a.Lq + i];
        l2 = l == -INFINITY ? INFINITY : l * kLog2e;  // a row that saw no key has P = 0
        if constexpr (kBias)  // R_i - c0 = (bias_q_i - c0) - slope (p_i - p_j0)
          if (l2 != INFINITY) {
            const float sl = a.alibi_slopes ? load_ro(a.alibi_slopes + h) : 0.f;
            const float bqi = a.bias_q ? a.bias_q[(int64_t(b) * a.Lq + i) * a.H + h] : 0.f;
            l2 -= fmaf(-sl, float(dpos + i - j0), bqi - bias_ref(h)) * kLog2e;
          }
        del = p.delta[(int64_t(b) * a.H + h) * a.Lq + i];
      }
      sL[st * BM + r] = l2;
      sDel[st * BM + r] = del;
      if constexpr (kOpts)  // one strided read per query instead of one per element
        if (a.bias_q)
          sBq[st * BM + r] = i < a.Lq ? a.bias_q[(int64_t(b) * a.Lq + i) * a.H + h] : 0.f;
    }
  };

  if (n_steps > 0) {
    load_tile<BN, DP, NTH>(sK, a.k + (int64_t(b) * a.Lk + j0) * k_ld + int64_t(hk) * a.D, k_ld, nk,
                           a.D, tid);
    load_tile<BN, DVP, NTH>(sV, a.v + (int64_t(b) * a.Lk + j0) * v_ld + int64_t(hk) * a.Dv, v_ld,
                            nk, a.Dv, tid);
    stage(hk * G, qt0, 0);
    cp_async_commit();
  }

  float dk[DP / 8][4], dv[DVP / 8][4];
  zero_acc(dk);
  zero_acc(dv);
  float dbk[2] = {0.f, 0.f};    // -sum_i dS over this thread's queries, keys g and g+8
  const int krow0 = warp * 16;  // this warp's first key row in the tile
  const float sl2 = a.scale * kLog2e;
  const float inv_cap = a.softcap > 0.f ? 1.f / a.softcap : 0.f;

  // ldmatrix lane addressing (sdpa_device.cuh): A operand rows lane%16 / chunk half lane/16;
  // B operand rows lane%8 + 8*(lane/16) / chunk half (lane/8)%2; transposed B operand rows
  // lane%8 + 8*((lane/8)%2) / chunk half lane/16; dS as transposed A operand (stored as
  // dS^T) rows lane%8 + 8*(lane/16) / chunk half (lane/8)%2.
  const uint32_t sK_addr = smem_addr(sK), sV_addr = smem_addr(sV), sQ_addr = smem_addr(sQ);
  const uint32_t sdO_addr = smem_addr(sdO), sdS_addr = smem_addr(sdS);
  const int rowA = lane & 15, cA = lane >> 4;
  const int rowB = (lane & 7) + ((lane >> 4) << 3), cB = (lane >> 3) & 1;
  const int rowT = (lane & 7) + ((lane >> 3) & 1) * 8, cT = lane >> 4;
  const uint32_t ka_off = Swz<DP>::thread_off(krow0 + rowA, cA);
  const uint32_t va_off = Swz<DVP>::thread_off(krow0 + rowA, cA);
  const uint32_t qb_off = Swz<DP>::thread_off(rowB, cB), qt_off = Swz<DP>::thread_off(rowT, cT);
  const uint32_t dob_off = Swz<DVP>::thread_off(rowB, cB);
  const uint32_t dot_off = Swz<DVP>::thread_off(rowT, cT);
  const uint32_t ds_off = Swz<BM>::thread_off(rowB, cB), kt_off = Swz<DP>::thread_off(rowT, cT);

  // dQ[BM x D] += dS K for the dS^T of buffer `ds` (query head h, query tile at row i0):
  // warp = (row block rb, column group cg).
  auto dq_step = [&](int ds, int h, int i0) {
    constexpr int M = T::kDqM, NC = T::kDqCols;
    const uint32_t cdS = sdS_addr + ds * BN * BM * 2;
    const int rb = warp % T::kRowBlocks, cg = warp / T::kRowBlocks;
    float dq[M][NC / 8][4];
    zero_acc(dq);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t af[M][4];
#pragma unroll
      for (int m = 0; m < M; ++m) ldsm_x4_t(af[m], Swz<BM>::at(cdS, ds_off, rb * M + m, kk * 16));
#pragma unroll
      for (int np = 0; np < NC / 16; ++np) {
        uint32_t bf[4];
        ldsm_x4_t(bf, Swz<DP>::at(sK_addr, kt_off, cg * (NC / 16) + np, kk * 16));
#pragma unroll
        for (int m = 0; m < M; ++m) {
          mma16816(dq[m][2 * np], af[m], bf[0], bf[1]);
          mma16816(dq[m][2 * np + 1], af[m], bf[2], bf[3]);
        }
      }
    }
    // One pointer per step (row g of the warp's first m-tile, this thread's first column);
    // rows 8 (2m + r) and columns n * 8 are fixed offsets from it. A complete tile at the
    // full width (all but the last query tile when D is 64 or 128) stores with no
    // per-element test. The per-element form below is kept for the 64-wide class without
    // kPipe, where this one made ptxas spill in the 128-query tiling and ran slower (it is
    // faster at D = 128); with kPipe this form spills less.
    const int r0 = i0 + rb * 16 * M + g;  // query row of (m, r) = (0, 0)
    if constexpr (DP >= 128 || kPipe) {
      float* dq0 = p.dq + (int64_t(b) * a.Lq + r0) * q_ld + int64_t(h) * a.D + cg * NC + 2 * t;
      const int64_t row8 = 8 * q_ld;
      auto add = [&](int m, int r, int n) {
        atomic_add2(dq0 + (2 * m + r) * row8 + n * 8, dq[m][n][2 * r] * a.scale,
                    dq[m][n][2 * r + 1] * a.scale);
      };
      if (a.D == DP && i0 + BM <= a.Lq) {
#pragma unroll
        for (int m = 0; m < M; ++m)
#pragma unroll
          for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int n = 0; n < NC / 8; ++n) add(m, r, n);
      } else {
#pragma unroll
        for (int m = 0; m < M; ++m)
#pragma unroll
          for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int n = 0; n < NC / 8; ++n)
              if (r0 + 16 * m + 8 * r < a.Lq && cg * NC + n * 8 + 2 * t < a.D) add(m, r, n);
      }
    } else {
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = r0 + 16 * m + 8 * r;
          if (i >= a.Lq) continue;
          float* dqrow = p.dq + (int64_t(b) * a.Lq + i) * q_ld + int64_t(h) * a.D;
#pragma unroll
          for (int n = 0; n < NC / 8; ++n) {
            const int c = cg * NC + n * 8 + 2 * t;
            if (c < a.D)
              atomic_add2(dqrow + c, dq[m][n][2 * r] * a.scale, dq[m][n][2 * r + 1] * a.scale);
          }
        }
    }
  };

  // Steps walk (query head of the group, query tile) with counters, not divisions.
  int h = hk * G, qt = qt0;
  int prev_h = h, prev_i0 = 0;  // kPipe: the step whose dQ is still to do
  for (int it = 0; it < n_steps; ++it) {
    const int st = it & 1, i0 = qt * BM;
    const bool head_done = qt == nqt - 1;  // the last tile of head h: next step, next head
    // Wait for this step's tiles; after the barrier every warp is done with step it-1
    // (its stage and, without kPipe, its dS^T reads), so the next step's copy can start.
    // Without kPipe two barriers per step (this one and "dS^T complete"); with it, this one
    // also completes step it-1's dS^T (buffer st ^ 1), whose dQ runs now.
    cp_async_wait<0>();
    sync_cta();
    if (it + 1 < n_steps) stage(head_done ? h + 1 : h, head_done ? qt0 : qt + 1, st ^ 1);
    cp_async_commit();
    if constexpr (kPipe)
      if (it > 0) dq_step(st ^ 1, prev_h, prev_i0);
    const uint32_t cQ = sQ_addr + st * BM * DP * 2, cdO = sdO_addr + st * BM * DVP * 2;
    const float* cL = sL + st * BM;
    const float* cDel = sDel + st * BM;
    const float* cBq = sBq + st * BM;
    __nv_bfloat16* sdS_w = sdS + (kPipe ? st * BN * BM : 0);  // this step's dS^T buffer

    // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys x BM queries.
    float s[BM / 8][4], dp[BM / 8][4];
    zero_acc(s);
    zero_acc(dp);
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      uint32_t af[4];
      ldsm_x4(af, Swz<DP>::at(sK_addr, ka_off, kk, 0));
#pragma unroll
      for (int np = 0; np < BM / 16; ++np) {
        uint32_t bf[4];
        ldsm_x4(bf, Swz<DP>::at(cQ, qb_off, kk, np * 16));
        mma16816(s[2 * np], af, bf[0], bf[1]);
        mma16816(s[2 * np + 1], af, bf[2], bf[3]);
      }
    }
#pragma unroll
    for (int kk = 0; kk < DVP / 16; ++kk) {
      uint32_t af[4];
      ldsm_x4(af, Swz<DVP>::at(sV_addr, va_off, kk, 0));
#pragma unroll
      for (int np = 0; np < BM / 16; ++np) {
        uint32_t bf[4];
        ldsm_x4(bf, Swz<DVP>::at(cdO, dob_off, kk, np * 16));
        mma16816(dp[2 * np], af, bf[0], bf[1]);
        mma16816(dp[2 * np + 1], af, bf[2], bf[3]);
      }
    }

    // P^T = 2^(x log2e - lse log2e) and dS^T = P^T (dP^T - delta) [* dsoftcap]; element
    // (key row, query col) = (krow0 + g + 8*(e/2), n*8 + 2t + e%2).
    // Visibility of (key row r, query column qc): qc >= thr[r], one int32 per key row
    // folding causality (dpos + i - j >= 0) and j < Lk (thr = BM + 1: never); only tiles
    // that straddle the diagonal or the sequence end test it.
    const bool full = (j0 + BN <= a.Lk) && (dpos + i0 - (j0 + BN - 1) >= 0);
    int thr[2] = {0, 0};
    if (!full)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int j = j0 + krow0 + g + 8 * r;
        const int64_t first = j - dpos - i0;  // first visible query column
        thr[r] = (j >= a.Lk ? BM + 1 : int(first < 0 ? 0 : (first > BM ? BM : first))) - 2 * t;
      }
    float slope = 0.f, bk[2] = {0.f, 0.f}, rel[2] = {0.f, 0.f};
    if constexpr (kOpts || kBias) {
      if (a.alibi_slopes) slope = load_ro(a.alibi_slopes + h);
      const float c0 = kBias ? bias_ref(h) : 0.f;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int j = j0 + krow0 + g + 8 * r;
        rel[r] = float(dpos + i0 - j);  // p_i - p_j at query column 0
        const float bkj =
            a.bias_k && j < a.Lk ? load_ro(a.bias_k + (int64_t(b) * a.Lk + j) * a.H + h) : 0.f;
        // kBias: C_j - c0 = (bias_k_j - c0) - slope (j - j0) in log2 units, added to the
        // staged lse
        bk[r] = kBias ? fmaf(-slope, float(j - j0), bkj - c0) * kLog2e : bkj;
      }
    }
    float dbq[BM / 8][2];
#pragma unroll
    for (int n = 0; n < BM / 8; ++n) dbq[n][0] = dbq[n][1] = 0.f;
    // Plain path on a tile every (key, query) pair sees, most of a long causal sequence's
    // tiles: no visibility test (two instructions per element less).
    const bool fast = !kOpts && full;
    if (fast)
#pragma unroll
      for (int n = 0; n < BM / 8; ++n) {
        const float2 l2 = *reinterpret_cast<const float2*>(cL + n * 8 + 2 * t);
        const float2 dl = *reinterpret_cast<const float2*>(cDel + n * 8 + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float lse2 = (e & 1 ? l2.y : l2.x) + (kBias ? bk[e >> 1] : 0.f);
          const float pr = fast_exp2(fmaf(s[n][e], sl2, -lse2));
          dp[n][e] = pr * (dp[n][e] - (e & 1 ? dl.y : dl.x));
          s[n][e] = pr;
          if constexpr (kBias) dbk[e >> 1] -= dp[n][e];
        }
      }
    else
#pragma unroll
      for (int n = 0; n < BM / 8; ++n) {
        const float2 l2 = *reinterpret_cast<const float2*>(cL + n * 8 + 2 * t);
        const float2 dl = *reinterpret_cast<const float2*>(cDel + n * 8 + 2 * t);
        // dbias_q_sums: this thread's shares of A, C, D (sdpa.hpp) for query columns c = 0, 1.
        float rsum[3][2] = {{0.f, 0.f}, {0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = e & 1, r = e >> 1, qc = n * 8 + 2 * t + c;
          float pr, dcap = 1.f;
          if constexpr (kOpts) {
            // The forward's order: bias lanes' difference first, then ALiBi.
            float x = fmaf(s[n][e], a.scale, (a.bias_q ? cBq[qc] : 0.f) - bk[r]);
            if (a.alibi_slopes) x -= slope * (rel[r] + float(qc));
            if (a.softcap > 0.f) {
              const float th = tanhf(x * inv_cap);
              x = a.softcap * th;
              dcap = 1.f - th * th;
            }
            pr = fast_exp2(fmaf(x, kLog2e, -(c ? l2.y : l2.x)));
          } else {
            pr = fast_exp2(fmaf(s[n][e], sl2, -((c ? l2.y : l2.x) + (kBias ? bk[r] : 0.f))));
          }
          if (!full && n * 8 + c < thr[r]) pr = 0.f;
          const float del = c ? dl.y : dl.x;
          const float ds = pr * (dp[n][e] - del) * dcap;
          if constexpr (kOpts) {
            if (p.dbias_q_sums) {  // from the fp32 P and dP, before dp becomes dS
              const float pc = pr * dcap;
              rsum[0][c] = fmaf(pc, dp[n][e], rsum[0][c]);
              rsum[1][c] += pc;
              rsum[2][c] = fmaf(pr, dp[n][e], rsum[2][c]);
            }
          }
          s[n][e] = pr;
          dp[n][e] = ds;
          if constexpr (kOpts || kBias) dbk[e >> 1] -= ds;
          if constexpr (kOpts) dbq[n][e & 1] += ds;
        }
        if constexpr (kOpts) {
          if (p.dbias_q_sums) {
            // Sum over the warp's 16 keys (g), then one atomic per sum and query per warp.
            const int64_t plane = int64_t(a.B) * a.Lq * a.H;
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              const int i = i0 + n * 8 + 2 * t + c;
#pragma unroll
              for (int k = 0; k < 3; ++k) {
                const float v = sum_over_rows(rsum[k][c]);
                if (g == 0 && i < a.Lq)
                  atomic_add(p.dbias_q_sums + k * plane + (int64_t(b) * a.Lq + i) * a.H + h, v);
              }
            }
          }
        }
      }

      // dV += P^T dO and dK += dS^T Q (the k index of both products is the query).
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t pf[4], sf[4];
      pf[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
      pf[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
      pf[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pf[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      sf[0] = pack_bf16(dp[2 * kk][0], dp[2 * kk][1]);
      sf[1] = pack_bf16(dp[2 * kk][2], dp[2 * kk][3]);
      sf[2] = pack_bf16(dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
      sf[3] = pack_bf16(dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
#pragma unroll
      for (int np = 0; np < DVP / 16; ++np) {
        uint32_t bf[4];
        ldsm_x4_t(bf, Swz<DVP>::at(cdO, dot_off, np, kk * 16));
        mma16816(dv[2 * np], pf, bf[0], bf[1]);
        mma16816(dv[2 * np + 1], pf, bf[2], bf[3]);
      }
#pragma unroll
      for (int np = 0; np < DP / 16; ++np) {
        uint32_t bf[4];
        ldsm_x4_t(bf, Swz<DP>::at(cQ, qt_off, np, kk * 16));
        mma16816(dk[2 * np], sf, bf[0], bf[1]);
        mma16816(dk[2 * np + 1], sf, bf[2], bf[3]);
      }
      // dS^T rows of this warp -> shared memory for the dQ product.
      *reinterpret_cast<uint32_t*>(sdS_w + Swz<BM>::offset(krow0 + g, 2 * kk) + 2 * t) = sf[0];
      *reinterpret_cast<uint32_t*>(sdS_w + Swz<BM>::offset(krow0 + g + 8, 2 * kk) + 2 * t) = sf[1];
      *reinterpret_cast<uint32_t*>(sdS_w + Swz<BM>::offset(krow0 + g, 2 * kk + 1) + 2 * t) = sf[2];
      *reinterpret_cast<uint32_t*>(sdS_w + Swz<BM>::offset(krow0 + g + 8, 2 * kk + 1) + 2 * t) =
          sf[3];
    }

    if constexpr (kOpts) {
      if (p.dbias_q) {
        // Sum over the warp's 16 keys (g), then one atomic per query per warp.
#pragma unroll
        for (int n = 0; n < BM / 8; ++n)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const float v = sum_over_rows(dbq[n][c]);
            const int i = i0 + n * 8 + 2 * t + c;
            if (g == 0 && i < a.Lq) atomic_add(p.dbias_q + (int64_t(b) * a.Lq + i) * a.H + h, v);
          }
      }
    }
    if constexpr (!kPipe) {
      sync_cta();  // dS^T complete
      dq_step(0, h, i0);
    }

    // End of a query head: its dbias_k column is complete.
    if constexpr (kOpts || kBias) {
      if (p.dbias_k && head_done) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float v = dbk[r];
          v += shfl_xor(v, 1);
          v += shfl_xor(v, 2);
          const int j = j0 + krow0 + g + 8 * r;
          if (t == 0 && j < a.Lk) {
            float* dst = p.dbias_k + (int64_t(b) * a.Lk + j) * a.H + h;
            *dst = p.accumulate ? *dst + v : v;
          }
          dbk[r] = 0.f;
        }
      }
    }
    prev_h = h, prev_i0 = i0;
    h += head_done, qt = head_done ? qt0 : qt + 1;
  }
  cp_async_wait<0>();
  if constexpr (kPipe)
    if (n_steps > 0) {
      sync_cta();  // the last step's dS^T complete
      dq_step((n_steps - 1) & 1, prev_h, prev_i0);
    }

  // dK = scale * sum dS^T Q, dV = sum P^T dO for this warp's 16 keys.
  if (p.dbias_k && n_steps == 0) {  // nothing sees this tile: its bias gradient is zero
    for (int x = tid; x < nk * G; x += NTH) {
      float* dst = p.dbias_k + (int64_t(b) * a.Lk + j0 + x / G) * a.H + hk * G + x % G;
      if (!p.accumulate) *dst = 0.f;
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = j0 + krow0 + g + 8 * r;
    if (j >= a.Lk) continue;
    float* dkrow = p.dk + (int64_t(b) * a.Lk + j) * k_ld + int64_t(hk) * a.D;
    float* dvrow = p.dv + (int64_t(b) * a.Lk + j) * v_ld + int64_t(hk) * a.Dv;
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) {
      const int c = n * 8 + 2 * t;
      if (c >= a.D) continue;
      float2 x = make_float2(dk[n][2 * r] * a.scale, dk[n][2 * r + 1] * a.scale);
      float2* dst = reinterpret_cast<float2*>(dkrow + c);
      if (p.accumulate) x.x += dst->x, x.y += dst->y;
      *dst = x;
    }
#pragma unroll
    for (int n = 0; n < DVP / 8; ++n) {
      const int c = n * 8 + 2 * t;
      if (c >= a.Dv) continue;
      float2 x = make_float2(dv[n][2 * r], dv[n][2 * r + 1]);
      float2* dst = reinterpret_cast<float2*>(dvrow + c);
      if (p.accumulate) x.x += dst->x, x.y += dst->y;
      *dst = x;
    }
  }
}

}  // namespace lcr::cuda::LCR_SDPAMMA

#if !defined(LCR_CUDA_EMU)
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/sdpa_heuristics.hpp"

namespace lcr::cuda::detail {

template <int DP, int DVP, int BM, int NW, bool kOpts, bool kPipe = false, int DQM = 1,
          bool kBias = false>
void launch_bwd(KernelParams p, cudaStream_t s) {
  using T = LCR_SDPAMMA::BwdTraits<DP, DVP, BM, NW, kPipe, DQM>;
  p.n_tiles = (p.a.Lk + T::BN - 1) / T::BN;
  const int64_t grid = int64_t(p.n_tiles) * p.a.B * p.a.Hkv;
  if (grid == 0) return;
  static_assert(!(kOpts && kBias), "kBias is the bias-lanes-only form of the plain path");
  launch_with_smem(LCR_SDPAMMA::sdpa_bwd_kernel<DP, DVP, BM, NW, kOpts, kPipe, DQM, kBias>, grid,
                   T::kThreads, T::kSmem, s, p);
}

// Configuration BwdMma<BM, NW, kPipe, DQM> (sdpa_heuristics.hpp) on path kPath.
template <int DP, int DVP, SdpaPath kPath, int BM, int NW, bool kPipe, int DQM>
constexpr SdpaLauncher launcher(BwdMma<BM, NW, kPipe, DQM>) {
  return &launch_bwd<DP, DVP, BM, NW, kPath == SdpaPath::kOpts, kPipe, DQM,
                     kPath == SdpaPath::kBias>;
}

}  // namespace lcr::cuda::detail
#endif
