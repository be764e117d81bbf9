#pragma once
// The forward scan, one CTA per (query tile of 128 rows = fine blocks a0 = 2t, a1 = 2t + 1;
// query head h; batch b). Each warp owns 16 MT rows and keeps its rows' carried queries x in
// its own shared buffers (bf16; two, or one rewritten in place: FwdSmem), the output
// accumulator and the online-softmax state in registers. Starting from the intra-block state
// (prep.cuh) and x = q~:
//   step 0 (a1's rows only): keys of block a0 (k~); then x <- P_a0 x for a1's rows.
//   fine steps c = a0-1 .. first(s): keys of block c (k~); x <- P_c x (skipped at the first
//     block of superchunk 0, where nothing is left to the left).
//   coarse steps, superchunks u = s-1 .. 0: the R key tiles of u (K^S); x <- P^u x (u > 0).
// K/V tiles are double-buffered with cp.async; a transition's matrix is loaded while the
// step's logits are computed (or, in the compact layout, after the step into its stage).
// Logits in log2 units (exp2), fp32 accumulation throughout.
#include "kernels/attention/cuda/path/device/params.cuh"
#include "kernels/attention/cuda/path/device/tile.cuh"

namespace lcr::cuda::LCR_PATHK {

constexpr int kTileRows = 128;  // query rows per CTA (two fine blocks)

// One step of the scan of a 128-row tile: which key rows, whose query rows, which transition.
// Fine steps take one 64-key block; coarse steps take KN keys (64 or 128) of a superchunk.
struct ScanStep {
  const bf16* keys;   // key rows (kf or ks), head-major, consecutive
  int key0;           // first key position
  bool coarse;        // KN keys (else 64)
  const bf16* trans;  // D x D transition applied after the step, or null
  bool a1_only;       // only the rows of block a1 take part (step 0)
};

LCR_DEV ScanStep scan_step(const Params& p, int i, int a0, int sg, int64_t bh_kv, int kn) {
  const int first = sg * p.R, D = p.D;
  const int nfine = a0 - first;
  ScanStep st;
  st.coarse = false;
  if (i == 0) {
    st.keys = p.kf + (bh_kv * p.Lp + int64_t(a0) * kBlk) * D;
    st.key0 = a0 * kBlk;
    st.trans = p.pf + (bh_kv * p.nb + a0) * D * D;
    st.a1_only = true;
  } else if (i <= nfine) {
    const int c = a0 - i;
    st.keys = p.kf + (bh_kv * p.Lp + int64_t(c) * kBlk) * D;
    st.key0 = c * kBlk;
    st.trans = (c > first || sg > 0) ? p.pf + (bh_kv * p.nb + c) * D * D : nullptr;
    st.a1_only = false;
  } else {
    const int per = p.R * kBlk / kn;  // steps per superchunk
    const int u = i - 1 - nfine, sc = sg - 1 - u / per, key0 = sc * p.S() + (u % per) * kn;
    st.keys = p.ks + (bh_kv * p.Lp + key0) * D;
    st.key0 = key0;
    st.coarse = true;
    st.trans = (u % per == per - 1 && sc > 0) ? p.ps + (bh_kv * p.nS + sc) * D * D : nullptr;
    st.a1_only = false;
  }
  return st;
}
LCR_DEV int scan_steps(const Params& p, int a0, int sg, int kn) {
  return 1 + (a0 - sg * p.R) + sg * (p.R * kBlk / kn);
}

template <int D, int MT, int KN>
struct FwdSmem {
  static constexpr int kWarps = kTileRows / (16 * MT);
  // At D = 128 with 32-row warps (four warps of up to 255 registers) two CTAs fit an SM's
  // registers but not, with two query buffers per warp and a transition tile of their own
  // (174 KB), its shared memory. There (kCompact) each warp keeps one query buffer, which the
  // transition rewrites in place, and the transition is staged in the K/V stage its step has
  // just finished with: 102 KiB, two CTAs per SM.
  static constexpr bool kCompact = D == 128 && MT == 2;
  static constexpr int kXBufs = kCompact ? 1 : 2;
  static constexpr int kStage = 2 * KN * pad(D);  // one stage: K [KN x pad(D)], then V
  static_assert(!kCompact || D * pad(D) <= kStage, "a transition must fit one K/V stage");
  bf16 *X, *KV, *P;  // X: [warp][kXBufs][16 MT x pad(D)], KV: [2][kStage], P: D x pad(D)
  static LCR_HD std::size_t carve(SmemCarver& c, FwdSmem* s) {
    FwdSmem t;
    t.X = c.take<bf16>(kWarps * kXBufs * 16 * MT * pad(D));
    t.KV = c.take<bf16>(2 * kStage);
    t.P = kCompact ? nullptr : c.take<bf16>(D * pad(D));
    if (s) *s = t;
    return c.off;
  }
  LCR_DEV bf16* x(int w, int buf) const { return X + (w * kXBufs + buf) * 16 * MT * pad(D); }
  LCR_DEV bf16* k(int buf) const { return KV + buf * kStage; }
  LCR_DEV bf16* v(int buf) const { return KV + buf * kStage + KN * pad(D); }
};

// X_out = X_in P^T for a warp's 16 MT rows (x <- P x per row), 32 output columns at a time.
template <int D, int MT>
LCR_DEV void warp_transition(const bf16* xin, bf16* xout, const bf16* P) {
  const int g = lane() >> 2, tq = lane() & 3;
  for (int nc = 0; nc < D; nc += 32) {
    float t[MT][4][4];
    LCR_UNROLL
    for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
    for (int j = 0; j < 4; ++j) LCR_UNROLL
    for (int i = 0; i < 4; ++i) t[mt][j][i] = 0.f;
    LCR_UNROLL
    for (int k0 = 0; k0 < D; k0 += 16) {
      uint32_t a[MT][4];
      LCR_UNROLL
      for (int mt = 0; mt < MT; ++mt) load_a(a[mt], op(xin, pad(D)), mt * 16, k0);
      LCR_UNROLL
      for (int np = 0; np < 2; ++np) {
        uint32_t bb[4];
        load_b(bb, op(P, pad(D), true), k0, nc + np * 16);
        LCR_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(t[mt][2 * np], a[mt], bb);
          mma_bf16(t[mt][2 * np + 1], a[mt], bb + 2);
        }
      }
    }
    LCR_UNROLL
    for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
    for (int j = 0; j < 4; ++j) LCR_UNROLL
    for (int hh = 0; hh < 2; ++hh) {
      const int r = mt * 16 + g + 8 * hh, c = nc + j * 8 + 2 * tq;
      *reinterpret_cast<uint32_t*>(xout + r * pad(D) + c) =
          pack_bf16(t[mt][j][2 * hh], t[mt][j][2 * hh + 1]);
    }
  }
}

// x <- P x in place for a warp's 16 MT rows (X = X P^T): each 16-row group's whole output
// (16 x D fp32, D / 2 registers per lane) is formed before any of it is written back.
template <int D, int MT>
LCR_DEV void warp_transition_in_place(bf16* x, const bf16* P) {
  const int g = lane() >> 2, tq = lane() & 3;
  LCR_NO_UNROLL
  for (int mt = 0; mt < MT; ++mt) {
    float t[D / 8][4];
    LCR_UNROLL
    for (int j = 0; j < D / 8; ++j) LCR_UNROLL
    for (int i = 0; i < 4; ++i) t[j][i] = 0.f;
    LCR_UNROLL
    for (int k0 = 0; k0 < D; k0 += 16) {
      uint32_t a[4];
      load_a(a, op(x, pad(D)), mt * 16, k0);
      LCR_UNROLL
      for (int np = 0; np < D / 16; ++np) {
        uint32_t bb[4];
        load_b(bb, op(P, pad(D), true), k0, np * 16);
        mma_bf16(t[2 * np], a, bb);
        mma_bf16(t[2 * np + 1], a, bb + 2);
      }
    }
    sync_warp();  // every lane's fragments of these rows are read before any is overwritten
    LCR_UNROLL
    for (int j = 0; j < D / 8; ++j) LCR_UNROLL
    for (int hh = 0; hh < 2; ++hh) {
      const int r = mt * 16 + g + 8 * hh, c = j * 8 + 2 * tq;
      *reinterpret_cast<uint32_t*>(x + r * pad(D) + c) = pack_bf16(t[j][2 * hh], t[j][2 * hh + 1]);
    }
  }
}

// Online-softmax state of a warp's 16 MT rows: unnormalised output, row max (log2 units),
// this lane's share of the row sum, the rows' FoX query lanes.
template <int D, int MT>
struct RowState {
  float acc[MT][D / 8][4], m2[MT][2], lsum[MT][2], fq[MT][2];
};

// One step for a warp: logits of its rows against NK keys (K, V in shared memory, key
// positions key0..), online-softmax update, acc += P V.
template <int D, int MT, int NK, int kMode>
LCR_DEV void scan_keys(const Params& p, const LogitOf<kMode>& logit, const bf16* X, const bf16* K,
                       const bf16* V, int key0, int b, int h, RowState<D, MT>& st) {
  const int tq = lane() & 3;
  float sr[MT][NK / 8][4];
  LCR_UNROLL
  for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
  for (int nt = 0; nt < NK / 8; ++nt) LCR_UNROLL
  for (int i = 0; i < 4; ++i) sr[mt][nt][i] = 0.f;
  LCR_UNROLL
  for (int k0 = 0; k0 < D; k0 += 16) {
    uint32_t a[MT][4];
    LCR_UNROLL
    for (int mt = 0; mt < MT; ++mt) load_a(a[mt], op(X, pad(D)), mt * 16, k0);
    LCR_UNROLL
    for (int np = 0; np < NK / 16; ++np) {
      uint32_t bb[4];
      load_b(bb, op(K, pad(D), true), k0, np * 16);
      LCR_UNROLL
      for (int mt = 0; mt < MT; ++mt) {
        mma_bf16(sr[mt][2 * np], a[mt], bb);
        mma_bf16(sr[mt][2 * np + 1], a[mt], bb + 2);
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
  for (int hh = 0; hh < 2; ++hh) {
    float mx = st.m2[mt][hh];
    LCR_UNROLL
    for (int nt = 0; nt < NK / 8; ++nt) LCR_UNROLL
    for (int e = 0; e < 2; ++e) {
      const float x = logit(sr[mt][nt][2 * hh + e], st.fq[mt][hh], fk[nt][e]);
      sr[mt][nt][2 * hh + e] = x;
      mx = fmaxf(mx, x);
    }
    mx = quad_max(mx);
    const float corr = fast_exp2(st.m2[mt][hh] - mx);
    st.m2[mt][hh] = mx;
    float l = st.lsum[mt][hh] * corr;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      st.acc[mt][nt][2 * hh] *= corr;
      st.acc[mt][nt][2 * hh + 1] *= corr;
    }
    LCR_UNROLL
    for (int nt = 0; nt < NK / 8; ++nt) LCR_UNROLL
    for (int e = 0; e < 2; ++e) {
      const float pr = fast_exp2(sr[mt][nt][2 * hh + e] - mx);
      sr[mt][nt][2 * hh + e] = pr;
      l += pr;
    }
    st.lsum[mt][hh] = l;
  }
  LCR_UNROLL
  for (int kk = 0; kk < NK / 16; ++kk) {
    uint32_t a[MT][4];
    LCR_UNROLL
    for (int mt = 0; mt < MT; ++mt) c_to_a(a[mt], sr[mt][2 * kk], sr[mt][2 * kk + 1]);
    LCR_UNROLL
    for (int np = 0; np < D / 16; ++np) {
      uint32_t bb[4];
      load_b(bb, op(V, pad(D)), kk * 16, np * 16);
      LCR_UNROLL
      for (int mt = 0; mt < MT; ++mt) {
        mma_bf16(st.acc[mt][2 * np], a[mt], bb);
        mma_bf16(st.acc[mt][2 * np + 1], a[mt], bb + 2);
      }
    }
  }
}

// A step's NK keys for a warp, in softmax sub-steps of kScanSub<D, MT, NK> keys: at D = 128
// a 32-row warp holds O [32 x 128] in 128 fp32 registers, and the logits of 64 keys (64 more)
// pushed it into local memory (80-byte spills, ptxas); 32 keys at a time keep S in 32. The
// online softmax is exact over any split of the keys, so only P's bf16 rounding (relative to
// a running max that may be smaller) moves.
template <int D, int MT, int NK>
constexpr int kScanSub = (D >= 128 && MT == 2 && NK > 32) ? 32 : NK;

template <int D, int MT, int NK, int kMode>
LCR_DEV void scan_tile(const Params& p, const LogitOf<kMode>& logit, const bf16* X, const bf16* K,
                       const bf16* V, int key0, int b, int h, RowState<D, MT>& st) {
  constexpr int kSub = kScanSub<D, MT, NK>;
  if constexpr (kSub == NK) {
    scan_keys<D, MT, NK>(p, logit, X, K, V, key0, b, h, st);
  } else {
    LCR_NO_UNROLL
    for (int j = 0; j < NK; j += kSub)
      scan_keys<D, MT, kSub>(p, logit, X, K + j * pad(D), V + j * pad(D), key0 + j, b, h, st);
  }
}

template <int D, int MT, int KN, int kMode>
LCR_KERNEL_BOUNDS(256 / MT, (FwdSmem<D, MT, KN>::kCompact ? 2 : 1))
void forward_kernel(Params p) {
  using Smem = FwdSmem<D, MT, KN>;
  constexpr int NW = Smem::kWarps, RW = 16 * MT;
  Smem s;
  SmemCarver carver{smem_base()};
  Smem::carve(carver, &s);
  const int t = bid_x(), h = bid_y(), b = bid_z(), hk = h / p.G();
  const int a0 = 2 * t, sg = a0 / p.R, w = warp(), g = lane() >> 2, tq = lane() & 3;
  const int64_t bh = int64_t(b) * p.H + h, bh_kv = int64_t(b) * p.Hkv + hk;
  const int row_base = t * kTileRows + w * RW;  // first row of this warp
  const LogitOf<kMode> logit{p.scale, p.softcap};

  // Carried queries x = q~ (fp32 -> bf16) into each warp's buffer 0.
  for (int e = tid(); e < kTileRows * D / 2; e += nthreads()) {
    const int r = e / (D / 2), c = (e % (D / 2)) * 2;
    const float* src = p.qf + (bh * p.Lp + t * kTileRows + r) * D + c;
    *reinterpret_cast<uint32_t*>(s.x(r / RW, 0) + (r % RW) * pad(D) + c) =
        pack_bf16(src[0], src[1]);
  }
  RowState<D, MT> st;
  LCR_UNROLL
  for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int row = row_base + mt * 16 + g + 8 * hh;
    st.m2[mt][hh] = p.m_part[bh * p.Lp + row] * kLog2e;
    st.lsum[mt][hh] = tq == 0 ? p.l_part[bh * p.Lp + row] : 0.f;
    st.fq[mt][hh] = p.fox() && row < p.L ? p.fox_q[(int64_t(b) * p.L + row) * p.H + h] : 0.f;
    const float* src = p.o_part + (bh * p.Lp + row) * D;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      st.acc[mt][nt][2 * hh] = src[nt * 8 + 2 * tq];
      st.acc[mt][nt][2 * hh + 1] = src[nt * 8 + 2 * tq + 1];
    }
  }

  constexpr int NT = 256 / MT;
  auto issue_kv = [&](const ScanStep& sp, int buf) {
    bf16* K = s.k(buf);
    bf16* V = s.v(buf);
    const int valid = p.L - sp.key0;
    const int64_t vrow = (int64_t(b) * p.L + sp.key0) * p.Hkv + hk;
    const bf16* vsrc = valid > 0 ? p.v + vrow * D : p.v;
    if (sp.coarse) {
      async_rows<KN, D, NT>(K, pad(D), sp.keys, D, KN);
      async_rows<KN, D, NT>(V, pad(D), vsrc, int64_t(p.Hkv) * D, valid);
    } else {
      async_rows<kBlk, D, NT>(K, pad(D), sp.keys, D, kBlk);
      async_rows<kBlk, D, NT>(V, pad(D), vsrc, int64_t(p.Hkv) * D, valid);
    }
  };

  // Stage i & 1 holds step i's keys; step i + 1's are loaded into the other stage while step
  // i runs. The transition after step i is loaded beside them (own tile), or, compact, into
  // stage i & 1 once every warp is done with its keys (that load is not overlapped; the SM's
  // other CTA runs meanwhile).
  const int nsteps = scan_steps(p, a0, sg, KN);
  int cur = 0;
  issue_kv(scan_step(p, 0, a0, sg, bh_kv, KN), 0);
  cp_async_commit();
  for (int i = 0; i < nsteps; ++i) {
    const ScanStep sp = scan_step(p, i, a0, sg, bh_kv, KN);
    cp_async_wait<0>();
    sync_cta();
    if (i + 1 < nsteps) issue_kv(scan_step(p, i + 1, a0, sg, bh_kv, KN), (i + 1) & 1);
    if (!Smem::kCompact && sp.trans) async_rows<D, D, NT>(s.P, pad(D), sp.trans, D, D);
    cp_async_commit();
    const bool active = !sp.a1_only || w >= NW / 2;
    if (active) {
      if (sp.coarse)
        scan_tile<D, MT, KN>(p, logit, s.x(w, cur), s.k(i & 1), s.v(i & 1), sp.key0, b, h, st);
      else
        scan_tile<D, MT, kBlk>(p, logit, s.x(w, cur), s.k(i & 1), s.v(i & 1), sp.key0, b, h, st);
    }
    if (sp.trans) {
      if constexpr (Smem::kCompact) {
        sync_cta();
        async_rows<D, D, NT>(s.k(i & 1), pad(D), sp.trans, D, D);
        cp_async_commit();
      }
      cp_async_wait<0>();
      sync_cta();
      if (active) {
        if constexpr (Smem::kCompact) {
          warp_transition_in_place<D, MT>(s.x(w, 0), s.k(i & 1));
        } else {
          warp_transition<D, MT>(s.x(w, cur), s.x(w, cur ^ 1), s.P);
          cur ^= 1;
        }
      }
    }
  }

  LCR_UNROLL
  for (int mt = 0; mt < MT; ++mt) LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int row = row_base + mt * 16 + g + 8 * hh;
    const float l = quad_sum(st.lsum[mt][hh]);
    if (row >= p.L) continue;
    const float inv = 1.f / l;
    bf16* dst = p.o + ((int64_t(b) * p.L + row) * p.H + h) * D;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt)
      *reinterpret_cast<uint32_t*>(dst + nt * 8 + 2 * tq) =
          pack_bf16(st.acc[mt][nt][2 * hh] * inv, st.acc[mt][nt][2 * hh + 1] * inv);
    if (tq == 0) p.lse[bh * p.L + row] = (st.m2[mt][hh] + fast_log2(l)) * kLn2;
  }
}

}  // namespace lcr::cuda::LCR_PATHK
