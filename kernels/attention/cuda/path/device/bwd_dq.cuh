#pragma once
// Backward: the queries' side, one CTA per (128-row query tile, query head, batch), 8 warps
// of 16 rows or 4 of 32 (DqSmem). The adjoint of the scan runs left to right. With r^(u) =
// sum over the key tiles of segment u of dS K (dS = P (dP - delta), times the scale):
//   coarse, u = 0 .. s-1:   g^(u) = r^(u) + P^u^T g^(u-1)    (g^(-1) = 0; row form g P^u)
//   fine, c = first .. a-1:  g^(c) = r^(c) + P_c^T g^(c-1)     (g^(first-1) = g^(s-1))
//   d q~ = g^(a-1)  -> dqf
// Every g^(u-1) (u >= 1) and g^(c-1) is stored (gc, gf) for the transitions' gradients
// (outer.cuh: dP = sum over rows of g x^T). Segment u reads the carried queries z^(u) (zc),
// segment c reads x^(c) (xf); the last fine segment (c = a0) is a1's rows only. The FoX
// query lane's gradient is the row sum of dS (written here, the block kernel adds its part).
#include "kernels/attention/cuda/path/device/forward.cuh"

namespace lcr::cuda::LCR_PATHK {

struct DqSeg {
  bf16* gstore;       // g^(prev) destination (row 0 of the tile), or null
  const bf16* trans;  // P applied to g, or null
  const bf16* x;      // carried queries of the segment (row 0 of the tile)
  const bf16* keys;   // first key tile, head-major rows
  int key0, ntiles;
  bool a1_only;
};

LCR_DEV DqSeg dq_seg(const Params& p, int k, int t, int h, int b) {
  const int a0 = 2 * t, sg = a0 / p.R, first = sg * p.R, D = p.D, row0 = t * kTileRows;
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
    sgm.a1_only = false;
  } else {
    const int c = first + (k - sg);
    const int64_t xr = ((bh * p.R + (c - first)) * p.Lp + row0) * D;
    sgm.gstore = p.gf + xr;
    sgm.trans = (c > first || sg > 0) ? p.pf + (bh_kv * p.nb + c) * D * D : nullptr;
    sgm.x = p.xf + xr;
    sgm.keys = p.kf + (bh_kv * p.Lp + int64_t(c) * kBlk) * D;
    sgm.key0 = c * kBlk;
    sgm.ntiles = 1;
    sgm.a1_only = c == a0;
  }
  return sgm;
}

template <int D, int MT>
struct DqSmem {
  // At D = 128 with 32-row warps (kCompact) the keys are staged 32 at a time (a 32-row warp's
  // dq accumulator is 128 fp32 registers; S and dP of 32 keys take 64 more) and the segment's
  // transition in the K/V stages, free at a segment's start: 102 KiB, two CTAs per SM.
  static constexpr bool kCompact = D == 128 && MT == 2;
  static constexpr int kKeys = kCompact ? 32 : kBlk;  // keys per stage
  static constexpr int kStage = 2 * kKeys * pad(D);   // one stage: K [kKeys x pad(D)], then V
  static_assert(!kCompact || D * pad(D) <= 2 * kStage, "a transition must fit the K/V stages");
  bf16 *XG, *dO, *KV, *P;  // XG, dO: 128 x pad(D); KV: [2][kStage]; P: D x pad(D)
  static LCR_HD std::size_t carve(SmemCarver& c, DqSmem* s) {
    DqSmem t;
    t.XG = c.take<bf16>(kTileRows * pad(D));
    t.dO = c.take<bf16>(kTileRows * pad(D));
    t.KV = c.take<bf16>(2 * kStage);
    t.P = kCompact ? t.KV : c.take<bf16>(D * pad(D));
    if (s) *s = t;
    return c.off;
  }
  LCR_DEV bf16* k(int buf) const { return KV + buf * kStage; }
  LCR_DEV bf16* v(int buf) const { return KV + buf * kStage + kKeys * pad(D); }
};

// NK keys for a warp's 16 MT rows: S = X K^T, P, dP = dO V^T, dS = P (dP - delta),
// acc += scale dS K; rsum += row sums of dS.
template <int D, int MT, int NK, int kMode>
LCR_DEV void dq_keys(const Params& p, const LogitOf<kMode>& logit, const bf16* XG, const bf16* dO,
                     const bf16* K, const bf16* V, int r0, int key0, int b, int h,
                     const float (&lse2)[MT][2], const float (&dl)[MT][2], const float (&fq)[MT][2],
                     float (&rsum)[MT][2], float (&acc)[MT][D / 8][4]) {
  const int tq = lane() & 3;
  float sr[MT][NK / 8][4], dp[MT][NK / 8][4];
  LCR_UNROLL
  for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
  for (int nt = 0; nt < NK / 8; ++nt) LCR_UNROLL
  for (int i = 0; i < 4; ++i) sr[mt][nt][i] = dp[mt][nt][i] = 0.f;
  // S and dP in one k loop, or, where registers are short (32-row warps at D = 128 hold 128
  // accumulator registers already), one after the other: fewer operand fragments live at once.
  constexpr int kPasses = DqSmem<D, MT>::kCompact ? 2 : 1;
  LCR_UNROLL
  for (int pass = 0; pass < kPasses; ++pass) {
    const bool do_s = kPasses == 1 || pass == 0, do_p = kPasses == 1 || pass == 1;
    LCR_UNROLL
    for (int k0 = 0; k0 < D; k0 += 16) {
      uint32_t a[MT][4], ad[MT][4];
      LCR_UNROLL
      for (int mt = 0; mt < MT; ++mt) {
        if (do_s) load_a(a[mt], op(XG, pad(D)), r0 + mt * 16, k0);
        if (do_p) load_a(ad[mt], op(dO, pad(D)), r0 + mt * 16, k0);
      }
      LCR_UNROLL
      for (int np = 0; np < NK / 16; ++np) {
        uint32_t bb[4], bv[4];
        if (do_s) load_b(bb, op(K, pad(D), true), k0, np * 16);
        if (do_p) load_b(bv, op(V, pad(D), true), k0, np * 16);
        LCR_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
          if (do_s) mma_bf16(sr[mt][2 * np], a[mt], bb);
          if (do_s) mma_bf16(sr[mt][2 * np + 1], a[mt], bb + 2);
          if (do_p) mma_bf16(dp[mt][2 * np], ad[mt], bv);
          if (do_p) mma_bf16(dp[mt][2 * np + 1], ad[mt], bv + 2);
        }
      }
    }
  }
  float fk[NK / 8][2];
  LCR_UNROLL
  for (int nt = 0; nt < NK / 8; ++nt) LCR_UNROLL
  for (int e = 0; e < 2; ++e) {
    const int key = key0 + nt * 8 + 2 * tq + e;
    fk[nt][e] = LogitOf<kMode>::kMayFox && p.fox() && key < p.L
                    ? p.fox_k[(int64_t(b) * p.L + key) * p.H + h]
                    : 0.f;
  }
  LCR_UNROLL
  for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
  for (int nt = 0; nt < NK / 8; ++nt) LCR_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int hh = i >> 1;
    const float s2 = logit(sr[mt][nt][i], fq[mt][hh], fk[nt][i & 1]);
    const float ds = fast_exp2(s2 - lse2[mt][hh]) * (dp[mt][nt][i] - dl[mt][hh]) * logit.dcap(s2);
    rsum[mt][hh] += ds;
    sr[mt][nt][i] = ds * p.scale;
  }
  LCR_UNROLL
  for (int kk = 0; kk < NK / 16; ++kk) {
    uint32_t a[MT][4];
    LCR_UNROLL
    for (int mt = 0; mt < MT; ++mt) c_to_a(a[mt], sr[mt][2 * kk], sr[mt][2 * kk + 1]);
    LCR_UNROLL
    for (int np = 0; np < D / 16; ++np) {
      uint32_t bb[4];
      load_b(bb, op(K, pad(D)), kk * 16, np * 16);
      LCR_UNROLL
      for (int mt = 0; mt < MT; ++mt) {
        mma_bf16(acc[mt][2 * np], a[mt], bb);
        mma_bf16(acc[mt][2 * np + 1], a[mt], bb + 2);
      }
    }
  }
}

template <int D, int MT, int kMode>
LCR_KERNEL_BOUNDS(256 / MT, (DqSmem<D, MT>::kCompact ? 2 : 1))
void dq_kernel(Params p) {
  using Smem = DqSmem<D, MT>;
  constexpr int NW = 8 / MT, RW = 16 * MT, NT = 256 / MT, NK = Smem::kKeys;  // NT: threads
  Smem s;
  SmemCarver carver{smem_base()};
  Smem::carve(carver, &s);
  const int t = bid_x(), h = bid_y(), b = bid_z(), hk = h / p.G();
  const int w = warp(), g = lane() >> 2, tq = lane() & 3, row0 = t * kTileRows, r0 = w * RW;
  const int a0 = 2 * t, sg = a0 / p.R, nseg = sg + (a0 - sg * p.R) + 1;
  const int64_t bh = int64_t(b) * p.H + h;
  const LogitOf<kMode> logit{p.scale, p.softcap};

  const int nvalid = p.L - row0 < kTileRows ? p.L - row0 : kTileRows;
  async_rows<kTileRows, D, NT>(s.dO, pad(D), p.dout + ((int64_t(b) * p.L + row0) * p.H + h) * D,
                               int64_t(p.H) * D, nvalid);
  cp_async_commit();
  float lse2[MT][2], dl[MT][2], fq[MT][2], rsum[MT][2];
  LCR_UNROLL
  for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int row = row0 + r0 + mt * 16 + g + 8 * hh;
    lse2[mt][hh] = row < p.L ? p.lse_in[bh * p.L + row] * kLog2e : INFINITY;
    dl[mt][hh] = p.delta[bh * p.Lp + row];
    fq[mt][hh] = p.fox() && row < p.L ? p.fox_q[(int64_t(b) * p.L + row) * p.H + h] : 0.f;
    rsum[mt][hh] = 0.f;
  }
  float acc[MT][D / 8][4];
  LCR_UNROLL
  for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
  for (int nt = 0; nt < D / 8; ++nt) LCR_UNROLL
  for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;

  for (int k = 0; k < nseg; ++k) {
    const DqSeg sgm = dq_seg(p, k, t, h, b);
    const bool active = !sgm.a1_only || w >= NW / 2;
    cp_async_wait<0>();
    sync_cta();                  // the previous segment's readers of XG, K, V are done
    if (sgm.gstore && active) {  // g^(prev) -> XG (as the A operand of g P) and to memory
      LCR_UNROLL
      for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
      for (int nt = 0; nt < D / 8; ++nt) LCR_UNROLL
      for (int hh = 0; hh < 2; ++hh) {
        const int r = r0 + mt * 16 + g + 8 * hh, c = nt * 8 + 2 * tq;
        const uint32_t v = pack_bf16(acc[mt][nt][2 * hh], acc[mt][nt][2 * hh + 1]);
        *reinterpret_cast<uint32_t*>(s.XG + r * pad(D) + c) = v;
        *reinterpret_cast<uint32_t*>(sgm.gstore + int64_t(r) * D + c) = v;
      }
    }
    if (sgm.trans) {
      async_rows<D, D, NT>(s.P, pad(D), sgm.trans, D, D);
      cp_async_commit();
      cp_async_wait<0>();
      sync_cta();
      if (active) {
        LCR_UNROLL
        for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
        for (int nt = 0; nt < D / 8; ++nt) LCR_UNROLL
        for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
        LCR_UNROLL
        for (int k0 = 0; k0 < D; k0 += 16) {
          uint32_t a[MT][4];
          LCR_UNROLL
          for (int mt = 0; mt < MT; ++mt) load_a(a[mt], op(s.XG, pad(D)), r0 + mt * 16, k0);
          LCR_UNROLL
          for (int np = 0; np < D / 16; ++np) {
            uint32_t bb[4];
            load_b(bb, op(s.P, pad(D)), k0, np * 16);
            LCR_UNROLL
            for (int mt = 0; mt < MT; ++mt) {
              mma_bf16(acc[mt][2 * np], a[mt], bb);
              mma_bf16(acc[mt][2 * np + 1], a[mt], bb + 2);
            }
          }
        }
      }
    }
    sync_cta();  // XG (and, compact, the stages holding P) are reloaded below
    // The segment's keys in stages of NK: K rows consecutive (head-major), values straight
    // from v [B, L, Hkv, D]; only the a1-only segment can reach past L.
    auto load_kv = [&](int jj, int buf) {
      const int key0 = sgm.key0 + jj * NK;
      const int valid = p.L - key0 < NK ? p.L - key0 : NK;
      const int64_t vrow = (int64_t(b) * p.L + key0) * p.Hkv + hk;
      async_rows<NK, D, NT>(s.k(buf), pad(D), sgm.keys + int64_t(jj) * NK * D, D, NK);
      async_rows<NK, D, NT>(s.v(buf), pad(D), valid > 0 ? p.v + vrow * D : p.v, int64_t(p.Hkv) * D,
                            valid);
    };
    async_rows<kTileRows, D, NT>(s.XG, pad(D), sgm.x, D, kTileRows);
    load_kv(0, 0);
    cp_async_commit();
    const int nsub = sgm.ntiles * (kBlk / NK);
    for (int jj = 0; jj < nsub; ++jj) {
      cp_async_wait<0>();
      sync_cta();
      if (jj + 1 < nsub) load_kv(jj + 1, (jj + 1) & 1);
      cp_async_commit();
      if (!active) continue;
      dq_keys<D, MT, NK, kMode>(p, logit, s.XG, s.dO, s.k(jj & 1), s.v(jj & 1), r0,
                                sgm.key0 + jj * NK, b, h, lse2, dl, fq, rsum, acc);
    }
  }

  LCR_UNROLL
  for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int row = row0 + r0 + mt * 16 + g + 8 * hh;
    float* dst = p.dqf + (bh * p.Lp + row) * D;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      dst[nt * 8 + 2 * tq] = acc[mt][nt][2 * hh];
      dst[nt * 8 + 2 * tq + 1] = acc[mt][nt][2 * hh + 1];
    }
    const float r = quad_sum(rsum[mt][hh]);
    if (p.fox() && tq == 0 && row < p.L) p.dfox_q[(int64_t(b) * p.L + row) * p.H + h] = r;
  }
}

}  // namespace lcr::cuda::LCR_PATHK
