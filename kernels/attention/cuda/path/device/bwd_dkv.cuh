#pragma once
// Backward: the keys' side, one CTA per (64-key tile j, KV head, batch): one warpgroup.
// A key tile meets the later query blocks twice over (params.cuh):
//   coarse: every query block in a later superchunk, through K^S (ks) and the carried
//           queries z^(s_j) (zc)  -> d K^S (dks)
//   fine:   the later query blocks of its own superchunk, through k~ (kf) and x^(j) (xf)
//           -> d k~ (dkf; the chain and block kernels add the rest)
// for every query head of the KV head's group. Per pair (transposed FlashAttention-2 form):
//   S^T = K X^T, P^T = exp(s - lse), dP^T = V dO^T, dS^T = P^T (dP^T - delta),
//   dV += P^T dO, dK += scale dS^T X, FoX key lane -= column sums of dS.
// dV and the FoX key lane are written (the block kernel adds the intra-block parts).
// The CTA is one warpgroup and every product is a wgmma (wgmma.cuh): S^T and dP^T with both
// operands in shared memory, dV and dK with P^T and dS^T from the registers S^T and dP^T
// were accumulated in (the m64 accumulator is the A fragment, as FlashAttention-3 does) and
// dO, X read MN-major from the same swizzled tiles. With mma.sync (each warp 16 keys) every
// warp would reload the whole X and dO tiles through ldmatrix per product: about two fifths of
// the backward's time at (1,16,16384,128) (docs/cuda.md, PaTH section).
#include "kernels/attention/cuda/device/wgmma.cuh"
#include "kernels/attention/cuda/path/device/params.cuh"
#include "kernels/attention/cuda/path/device/tile.cuh"

namespace lcr::cuda::LCR_PATHK {

template <int D>
struct DkvSmem {
  bf16 *K, *V, *X, *dO;   // Swz tiles (wgmma.cuh): K, V [64 x D]; X, dO [2][64 x D]
  float *lse2, *dl, *fq;  // [2][64] per query row of the staged block
  float* dfk;             // [G][64] FoX key-lane gradient per head
  static LCR_HD std::size_t carve(SmemCarver& c, DkvSmem* s, int G) {
    DkvSmem t;
    t.K = c.take_1k<bf16>(kBlk * D);
    t.V = c.take_1k<bf16>(kBlk * D);
    t.X = c.take_1k<bf16>(2 * kBlk * D);
    t.dO = c.take_1k<bf16>(2 * kBlk * D);
    t.lse2 = c.take<float>(2 * kBlk);
    t.dl = c.take<float>(2 * kBlk);
    t.fq = c.take<float>(2 * kBlk);
    t.dfk = c.take<float>(G * kBlk);
    if (s) *s = t;
    return c.off;
  }
};

template <int D, int kMode>
LCR_KERNEL_BOUNDS(128, 1)
void dkv_kernel(Params p) {
  check_smem_base();
  DkvSmem<D> s;
  SmemCarver carver{smem_base()};
  DkvSmem<D>::carve(carver, &s, p.G());
  const int j = bid_x(), hk = bid_y(), b = bid_z(), G = p.G();
  const int w = warp(), g = lane() >> 2, tq = lane() & 3, key0 = j * kBlk;
  const int sj = j / p.R, first = sj * p.R, last = (first + p.R < p.nb ? first + p.R : p.nb) - 1;
  const int nbv = (p.L + kBlk - 1) / kBlk;  // query blocks with real rows
  const int64_t bh_kv = int64_t(b) * p.Hkv + hk;
  const LogitOf<kMode> logit{p.scale, p.softcap};
  const int nq_c = nbv - (sj + 1) * p.R > 0 ? nbv - (sj + 1) * p.R : 0;
  const int lastq = last < nbv - 1 ? last : nbv - 1;
  const int nq_f = lastq - j > 0 ? lastq - j : 0;

  for (int e = tid(); e < G * kBlk; e += nthreads()) s.dfk[e] = 0.f;
  const int kvalid = p.L - key0 < kBlk ? p.L - key0 : kBlk;
  const int64_t vrow = (int64_t(b) * p.L + key0) * p.Hkv + hk;
  async_swz<kBlk, D, 128>(s.V, kvalid > 0 ? p.v + vrow * D : p.v, int64_t(p.Hkv) * D, kvalid);

  // Stages query block qb of head h (level coarse or fine) into buffer buf.
  auto stage = [&](bool coarse, int gi, int qb, int buf) {
    const int h = hk * G + gi, q0 = qb * kBlk;
    const int64_t bh = int64_t(b) * p.H + h;
    const bf16* x = coarse ? p.zc + (bh * p.zrows + p.zrow(sj, q0)) * D
                           : p.xf + ((bh * p.R + (j - first)) * p.Lp + q0) * D;
    async_swz<kBlk, D, 128>(s.X + buf * kBlk * D, x, D, kBlk);
    const int qvalid = p.L - q0 < kBlk ? p.L - q0 : kBlk;
    async_swz<kBlk, D, 128>(s.dO + buf * kBlk * D, p.dout + ((int64_t(b) * p.L + q0) * p.H + h) * D,
                            int64_t(p.H) * D, qvalid);
  };
  // The staged block's per-row values (thread r < 64: row r): loaded into registers when the
  // block's tiles are issued, stored to shared memory after the current step's products, so
  // the loads' latency hides behind them (stored at once, they held warps 0-1 back a round
  // trip every step, and the step's barrier held everyone with them).
  struct RowVals {
    float lse2, dl, fq;
  };
  auto row_vals = [&](int gi, int qb) {
    const int h = hk * G + gi, q0 = qb * kBlk, r = tid();
    const int64_t bh = int64_t(b) * p.H + h;
    const bool ok = q0 + r < p.L;
    return RowVals{ok ? load_ro(p.lse_in + bh * p.L + q0 + r) * kLog2e : INFINITY,
                   load_ro(p.delta + bh * p.Lp + q0 + r),
                   ok && p.fox() ? load_ro(p.fox_q + (int64_t(b) * p.L + q0 + r) * p.H + h) : 0.f};
  };
  auto store_rows = [&](const RowVals& v, int buf) {
    s.lse2[buf * kBlk + tid()] = v.lse2;
    s.dl[buf * kBlk + tid()] = v.dl;
    s.fq[buf * kBlk + tid()] = v.fq;
  };

  float dv[D / 8][4] = {}, dk[D / 8][4];
  LCR_UNROLL
  for (int level = 0; level < 2; ++level) {
    const bool coarse = level == 0;
    const int nq = coarse ? nq_c : nq_f, n = G * nq, qbase = coarse ? (sj + 1) * p.R : j + 1;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) LCR_UNROLL
    for (int i = 0; i < 4; ++i) dk[nt][i] = 0.f;
    sync_cta();  // the previous level's readers of K are done
    const bf16* keys = (coarse ? p.ks : p.kf) + (bh_kv * p.Lp + key0) * D;
    async_swz<kBlk, D, 128>(s.K, keys, D, kBlk);
    if (n > 0) stage(coarse, 0, qbase, 0);
    if (n > 0 && tid() < kBlk) store_rows(row_vals(0, qbase), 0);
    cp_async_commit();
    for (int i = 0; i < n; ++i) {
      cp_async_wait<0>();
      fence_async_smem();  // the landed tiles, for the tensor cores (wgmma.cuh)
      sync_cta();
      const bool next = i + 1 < n, rows = next && tid() < kBlk;
      RowVals nv{};
      if (next) stage(coarse, (i + 1) / nq, qbase + (i + 1) % nq, (i + 1) & 1);
      if (rows) nv = row_vals((i + 1) / nq, qbase + (i + 1) % nq);
      cp_async_commit();
      const int gi = i / nq, h = hk * G + gi, buf = i & 1;
      const bf16* X = s.X + buf * kBlk * D;
      const bf16* dO = s.dO + buf * kBlk * D;
      const float* lse2 = s.lse2 + buf * kBlk;
      const float* dl = s.dl + buf * kBlk;
      const float* fq = s.fq + buf * kBlk;
      // S^T = K X^T, dP^T = V dO^T: [64 keys x 64 rows] each, this warp's 16 keys.
      float st[8][4], dpt[8][4];
      wgmma_fence();
      LCR_UNROLL
      for (int k0 = 0; k0 < D; k0 += 16) {
        wgmma_ss<0>(&st[0][0], desc_k(s.K, kBlk, k0), desc_k(X, kBlk, k0), k0 > 0);
        wgmma_ss<0>(&dpt[0][0], desc_k(s.V, kBlk, k0), desc_k(dO, kBlk, k0), k0 > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs<32>(&st[0][0]);
      fence_regs<32>(&dpt[0][0]);
      float fk[2], csum[2] = {0.f, 0.f};
      LCR_UNROLL
      for (int hh = 0; hh < 2; ++hh) {
        const int key = key0 + w * 16 + g + 8 * hh;
        fk[hh] = LogitOf<kMode>::kMayFox && p.fox() && key < p.L
                     ? p.fox_k[(int64_t(b) * p.L + key) * p.H + h]
                     : 0.f;
      }
      LCR_UNROLL
      for (int nt = 0; nt < 8; ++nt) LCR_UNROLL
      for (int i2 = 0; i2 < 4; ++i2) {
        const int hh = i2 >> 1, n2 = nt * 8 + 2 * tq + (i2 & 1);
        const float s2 = logit(st[nt][i2], fq[n2], fk[hh]);
        const float pr = fast_exp2(s2 - lse2[n2]);
        const float ds = pr * (dpt[nt][i2] - dl[n2]) * logit.dcap(s2);
        st[nt][i2] = pr;
        dpt[nt][i2] = ds * p.scale;
        csum[hh] += ds;
      }
      // dV += P^T dO, dK += dS^T X (scaled above): K = the block's 64 rows, N = D.
      // The fragments are all formed before the fence: a register written after it would
      // make ptxas insert a wait of its own before the wgmma that reads it.
      uint32_t ap[4][4], as[4][4];
      LCR_UNROLL
      for (int kk = 0; kk < 4; ++kk) {
        c_to_a(ap[kk], st[2 * kk], st[2 * kk + 1]);
        c_to_a(as[kk], dpt[2 * kk], dpt[2 * kk + 1]);
      }
      wgmma_fence();
      LCR_UNROLL
      for (int kk = 0; kk < 4; ++kk) LCR_UNROLL
      for (int hf = 0; hf < D / 64; ++hf) {
        wgmma_rs<1>(&dv[8 * hf][0], ap[kk], desc_mn(dO, kBlk, 16 * kk, 64 * hf), true);
        wgmma_rs<1>(&dk[8 * hf][0], as[kk], desc_mn(X, kBlk, 16 * kk, 64 * hf), true);
      }
      wgmma_commit();
      LCR_UNROLL
      for (int hh = 0; hh < 2; ++hh) {
        const float c = quad_sum(csum[hh]);
        if (tq == 0) s.dfk[gi * kBlk + w * 16 + g + 8 * hh] -= c;
      }
      if (rows) store_rows(nv, (i + 1) & 1);  // buffer (i + 1) & 1 is read after the next barrier
      // Before the next barrier lets the loads overwrite this step's X and dO, and before the
      // registers of ap / as are reused.
      wgmma_wait<0>();
    }
    fence_regs<D / 2>(&dk[0][0]);
    float* dst = (coarse ? p.dks : p.dkf) + (bh_kv * p.Lp + key0) * D;
    LCR_UNROLL
    for (int hh = 0; hh < 2; ++hh) {
      const int r = w * 16 + g + 8 * hh;
      LCR_UNROLL
      for (int nt = 0; nt < D / 8; ++nt) {
        dst[int64_t(r) * D + nt * 8 + 2 * tq] = dk[nt][2 * hh];
        dst[int64_t(r) * D + nt * 8 + 2 * tq + 1] = dk[nt][2 * hh + 1];
      }
    }
  }
  sync_cta();  // dfk complete
  fence_regs<D / 2>(&dv[0][0]);
  LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int r = w * 16 + g + 8 * hh, key = key0 + r;
    if (key >= p.L) continue;
    float* dst = p.dv + ((int64_t(b) * p.L + key) * p.Hkv + hk) * D;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      dst[nt * 8 + 2 * tq] = dv[nt][2 * hh];
      dst[nt * 8 + 2 * tq + 1] = dv[nt][2 * hh + 1];
    }
  }
  for (int e = tid(); e < G * kBlk && p.fox(); e += nthreads()) {
    const int gi = e / kBlk, r = e % kBlk, key = key0 + r;
    if (key < p.L) p.dfox_k[(int64_t(b) * p.L + key) * p.H + hk * G + gi] = s.dfk[e];
  }
}

}  // namespace lcr::cuda::LCR_PATHK
