#pragma once
// Backward: the queries' side, one CTA per (fine query block a, query head, batch): one
// warpgroup of 64 rows, every product a wgmma (wgmma.cuh), like dkv. The adjoint of the scan
// runs left to right. With r^(u) =
// sum over the key tiles of segment u of dS K (dS = P (dP - delta), times the scale):
//   coarse, u = 0 .. s-1:   g^(u) = r^(u) + P^u^T g^(u-1)    (g^(-1) = 0; row form g P^u)
//   fine, c = first .. a-1:  g^(c) = r^(c) + P_c^T g^(c-1)     (g^(first-1) = g^(s-1))
//   d q~ = g^(a-1)  -> dqf
// Every g^(u-1) (u >= 1) and g^(c-1) is stored (gc, gf) for the transitions' gradients
// (outer.cuh: dP = sum over rows of g x^T). Segment u reads the carried queries z^(u) (zc),
// segment c reads x^(c) (xf). The FoX query lane's gradient is the row sum of dS (written
// here, the block kernel adds its part). Per key stage of 64: S = X K^T and dP = dO V^T with
// both operands in shared memory, dq += dS K with dS from the registers S was accumulated in
// and K read MN-major; per segment g P with P MN-major. With mma.sync (128-row tiles, warps of
// 16 or 32 rows) it would take about a third of the backward's time at (1,16,16384,128).
#include "kernels/attention/cuda/device/wgmma.cuh"
#include "kernels/attention/cuda/path/device/params.cuh"
#include "kernels/attention/cuda/path/device/tile.cuh"

namespace lcr::cuda::LCR_PATHK {

struct DqSeg {
  bf16* gstore;       // g^(prev) destination (row 0 of the block), or null
  const bf16* trans;  // P applied to g, or null
  const bf16* x;      // carried queries of the segment (row 0 of the block)
  const bf16* keys;   // first key tile, head-major rows
  int key0, ntiles;
};

// Segment k of query block a: the coarse ones u = 0 .. sg-1, then the fine ones c = first ..
// a-1 (nseg = sg + a - first).
LCR_DEV DqSeg dq_seg(const Params& p, int k, int a, int h, int b) {
  const int sg = a / p.R, first = sg * p.R, D = p.D, row0 = a * kBlk;
  const int64_t bh = int64_t(b) * p.H + h, bh_kv = int64_t(b) * p.Hkv + h / p.G();
  DqSeg sgm;
  if (k < sg) {
    const int u = k;
    const int64_t zr = (bh * p.zrows + p.zrow(u, row0)) * D;
    sgm.gstore = u >= 1 ? p.gc + zr : nullptr;
    sgm.trans = u >= 1 ? p.ps + (bh_kv * p.nS + u) * D * D : nullptr;
    sgm.x = p.zc + zr;
    sgm.keys = p.ks + (bh_kv * p.Lp + int64_t(u) * p.S()) * D;
    sgm.key0 = u * p.S();
    sgm.ntiles = p.R;
  } else {
    const int c = first + (k - sg);
    const int64_t xr = ((bh * p.R + (c - first)) * p.Lp + row0) * D;
    sgm.gstore = p.gf + xr;
    sgm.trans = (c > first || sg > 0) ? p.pf + (bh_kv * p.nb + c) * D * D : nullptr;
    sgm.x = p.xf + xr;
    sgm.keys = p.kf + (bh_kv * p.Lp + int64_t(c) * kBlk) * D;
    sgm.key0 = c * kBlk;
    sgm.ntiles = 1;
  }
  return sgm;
}

// 96 KiB at D = 128 (two CTAs per SM). The segment's transition P [D x D] is loaded into the
// key stages, which are free at a segment's start.
template <int D>
struct DqSmem {
  bf16 *XG, *dO, *KV, *P;  // Swz tiles (wgmma.cuh): XG, dO [64 x D]; KV [2][K, V 64 x D]; P
  static_assert(D * D <= 4 * kBlk * D, "a transition must fit the key stages");
  static LCR_HD std::size_t carve(SmemCarver& c, DqSmem* s) {
    DqSmem t;
    t.XG = c.take_1k<bf16>(kBlk * D);
    t.dO = c.take_1k<bf16>(kBlk * D);
    t.KV = c.take_1k<bf16>(4 * kBlk * D);
    t.P = t.KV;
    if (s) *s = t;
    return c.off;
  }
  LCR_DEV bf16* k(int buf) const { return KV + buf * 2 * kBlk * D; }
  LCR_DEV bf16* v(int buf) const { return KV + (buf * 2 + 1) * kBlk * D; }
};

// 64 keys for the block's 64 rows: S = X K^T, P, dP = dO V^T, dS = P (dP - delta),
// acc += scale dS K; rsum += row sums of dS. Ends with the products complete.
template <int D, int kMode>
LCR_DEV void dq_keys(const Params& p, const LogitOf<kMode>& logit, const bf16* XG, const bf16* dO,
                     const bf16* K, const bf16* V, int key0, int b, int h, const float (&lse2)[2],
                     const float (&dl)[2], const float (&fq)[2], float (&rsum)[2],
                     float (&acc)[D / 8][4]) {
  const int tq = lane() & 3;
  float sr[8][4], dp[8][4];
  wgmma_fence();
  LCR_UNROLL
  for (int k0 = 0; k0 < D; k0 += 16) {
    wgmma_ss<0>(&sr[0][0], desc_k(XG, kBlk, k0), desc_k(K, kBlk, k0), k0 > 0);
    wgmma_ss<0>(&dp[0][0], desc_k(dO, kBlk, k0), desc_k(V, kBlk, k0), k0 > 0);
  }
  wgmma_commit();
  float fk[8][2];  // loaded while the products run
  LCR_UNROLL
  for (int nt = 0; nt < 8; ++nt) LCR_UNROLL
  for (int e = 0; e < 2; ++e) {
    const int key = key0 + nt * 8 + 2 * tq + e;
    fk[nt][e] = LogitOf<kMode>::kMayFox && p.fox() && key < p.L
                    ? p.fox_k[(int64_t(b) * p.L + key) * p.H + h]
                    : 0.f;
  }
  wgmma_wait<0>();
  fence_regs<32>(&sr[0][0]);
  fence_regs<32>(&dp[0][0]);
  LCR_UNROLL
  for (int nt = 0; nt < 8; ++nt) LCR_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int hh = i >> 1;
    const float s2 = logit(sr[nt][i], fq[hh], fk[nt][i & 1]);
    const float ds = fast_exp2(s2 - lse2[hh]) * (dp[nt][i] - dl[hh]) * logit.dcap(s2);
    rsum[hh] += ds;
    sr[nt][i] = ds * p.scale;
  }
  uint32_t a[4][4];  // formed before the fence (bwd_dkv.cuh says why)
  LCR_UNROLL
  for (int kk = 0; kk < 4; ++kk) c_to_a(a[kk], sr[2 * kk], sr[2 * kk + 1]);
  wgmma_fence();
  LCR_UNROLL
  for (int kk = 0; kk < 4; ++kk) LCR_UNROLL
  for (int hf = 0; hf < D / 64; ++hf)
    wgmma_rs<1>(&acc[8 * hf][0], a[kk], desc_mn(K, kBlk, 16 * kk, 64 * hf), true);
  wgmma_commit();
  wgmma_wait<0>();  // before the stage is reloaded and a's registers reused
}

template <int D, int kMode>
LCR_KERNEL_BOUNDS(128, 1)
void dq_kernel(Params p) {
  check_smem_base();
  using Smem = DqSmem<D>;
  Smem s;
  SmemCarver carver{smem_base()};
  Smem::carve(carver, &s);
  const int a = bid_x(), h = bid_y(), b = bid_z(), hk = h / p.G();
  const int w = warp(), g = lane() >> 2, tq = lane() & 3, row0 = a * kBlk;
  const int sg = a / p.R, nseg = sg + (a - sg * p.R);
  const int64_t bh = int64_t(b) * p.H + h;
  const LogitOf<kMode> logit{p.scale, p.softcap};

  const int nvalid = p.L - row0 < kBlk ? p.L - row0 : kBlk;
  async_swz<kBlk, D, 128>(s.dO, p.dout + ((int64_t(b) * p.L + row0) * p.H + h) * D,
                          int64_t(p.H) * D, nvalid);
  cp_async_commit();
  float lse2[2], dl[2], fq[2], rsum[2];
  LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int row = row0 + w * 16 + g + 8 * hh;
    lse2[hh] = row < p.L ? p.lse_in[bh * p.L + row] * kLog2e : INFINITY;
    dl[hh] = p.delta[bh * p.Lp + row];
    fq[hh] = p.fox() && row < p.L ? p.fox_q[(int64_t(b) * p.L + row) * p.H + h] : 0.f;
    rsum[hh] = 0.f;
  }
  float acc[D / 8][4];
  LCR_UNROLL
  for (int nt = 0; nt < D / 8; ++nt) LCR_UNROLL
  for (int i = 0; i < 4; ++i) acc[nt][i] = 0.f;

  for (int k = 0; k < nseg; ++k) {
    const DqSeg sgm = dq_seg(p, k, a, h, b);
    cp_async_wait<0>();
    sync_cta();        // the previous segment's readers of XG, K, V are done
    if (sgm.gstore) {  // g^(prev) -> XG (as the A operand of g P) and to memory
      LCR_UNROLL
      for (int nt = 0; nt < D / 8; ++nt) LCR_UNROLL
      for (int hh = 0; hh < 2; ++hh) {
        const int r = w * 16 + g + 8 * hh, c = nt * 8 + 2 * tq;
        const uint32_t v = pack_bf16(acc[nt][2 * hh], acc[nt][2 * hh + 1]);
        *reinterpret_cast<uint32_t*>(s.XG + swz(kBlk, r, c)) = v;
        *reinterpret_cast<uint32_t*>(sgm.gstore + int64_t(r) * D + c) = v;
      }
    }
    if (sgm.trans) {  // acc = g P
      async_swz<D, D, 128>(s.P, sgm.trans, D, D);
      cp_async_commit();
      cp_async_wait<0>();
      fence_async_smem();  // P and the g rows this thread stored, for the tensor cores
      sync_cta();
      wgmma_times<D, false>(&acc[0][0], s.XG, s.P);
    }
    sync_cta();  // XG and the stages holding P are reloaded below
    // The segment's keys in stages of 64: K rows consecutive (head-major), values straight
    // from v [B, L, Hkv, D]. A key past L only meets padded rows (a block of padding after
    // L): zero values, and those rows' probabilities are 0 (lse = inf).
    auto load_kv = [&](int jj, int buf) {
      const int key0 = sgm.key0 + jj * kBlk;
      const int valid = p.L - key0 < kBlk ? p.L - key0 : kBlk;
      const int64_t vrow = (int64_t(b) * p.L + key0) * p.Hkv + hk;
      async_swz<kBlk, D, 128>(s.k(buf), sgm.keys + int64_t(jj) * kBlk * D, D, kBlk);
      async_swz<kBlk, D, 128>(s.v(buf), valid > 0 ? p.v + vrow * D : p.v, int64_t(p.Hkv) * D,
                              valid);
    };
    async_swz<kBlk, D, 128>(s.XG, sgm.x, D, kBlk);
    load_kv(0, 0);
    cp_async_commit();
    for (int jj = 0; jj < sgm.ntiles; ++jj) {
      cp_async_wait<0>();
      fence_async_smem();
      sync_cta();
      if (jj + 1 < sgm.ntiles) load_kv(jj + 1, (jj + 1) & 1);
      cp_async_commit();
      dq_keys<D, kMode>(p, logit, s.XG, s.dO, s.k(jj & 1), s.v(jj & 1), sgm.key0 + jj * kBlk, b, h,
                        lse2, dl, fq, rsum, acc);
    }
    fence_regs<D / 2>(&acc[0][0]);
  }

  LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int row = row0 + w * 16 + g + 8 * hh;
    float* dst = p.dqf + (bh * p.Lp + row) * D;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt)
      store_f32x2(dst + nt * 8 + 2 * tq, acc[nt][2 * hh], acc[nt][2 * hh + 1]);
    const float r = quad_sum(rsum[hh]);
    if (p.fox() && tq == 0 && row < p.L) p.dfox_q[(int64_t(b) * p.L + row) * p.H + h] = r;
  }
}

}  // namespace lcr::cuda::LCR_PATHK
