#pragma once
// Per fine block (b, KV head hk, block m), 256 threads: the block quantities of params.cuh
// (kernels/schemes/path/blocks.hpp has the same formulas for the Kokkos path):
//   T  = Lam D (ut.cuh)                 Nk = strictLower(W K^T)     E = T Nk
//   k~ = K - E^T W   -> kf              P  = I - W^T (T^T W) -> pf
// and, per query head h of the KV head's group (when with_queries):
//   M  = lower(Q W^T)                   q~ = Q - (M T) W -> qf
//   intra-block logits S = Q K^T - M E, causal softmax -> o_part (P V, unnormalised),
//   m_part, l_part (when with_softmax: the forward; the backward recomputes its own).
// Then, per superchunk (chain_forward): Suf_m = P_{m+1} ... P_last, K^S = k~ Suf_m -> ks,
// P^s = P_first Suf_first -> ps (and every Suf_m -> suf for the backward).
#include "kernels/attention/cuda/path/device/params.cuh"
#include "kernels/attention/cuda/path/device/tile.cuh"
#include "kernels/attention/cuda/path/device/ut.cuh"

namespace lcr::cuda::LCR_PATHK {

// 112 KiB at D = 128 (two CTAs per SM; one region per tensor would take 158 KB and allow
// one): every tile whose life ends before another's begins shares its storage.
//   W, Q           64 x pad(D) bf16
//   KV             K through the keys' phase and each head's logits, then V (forward: loaded
//                  while the softmax runs; K is loaded again for the next head of a group)
//   R1             64 x pad(D) bf16: Wlo (Gram) -> Nk -> Y -> per head P (probabilities) -> C
//   G              64 x kFld fp32: Gm -> Lam (ut_inverse in place) -> per head S (logits)
//   T, E, M        64 x pad(64) bf16
template <int D>
struct PrepSmem {
  bf16 *W, *KV, *Q, *R1, *T, *E, *M;
  float *G, *beta, *fq, *fk;
  static LCR_HD std::size_t carve(SmemCarver& c, PrepSmem* s) {
    PrepSmem t;
    t.W = c.take<bf16>(kBlk * pad(D));
    t.KV = c.take<bf16>(kBlk * pad(D));
    t.Q = c.take<bf16>(kBlk * pad(D));
    t.R1 = c.take<bf16>(kBlk * pad(D));  // holds a 64 x pad(64) tile too: D >= 64
    t.G = c.take<float>(kBlk * kFld);
    t.T = c.take<bf16>(kBlk * pad(kBlk));
    t.E = c.take<bf16>(kBlk * pad(kBlk));
    t.M = c.take<bf16>(kBlk * pad(kBlk));
    t.beta = c.take<float>(kBlk);
    t.fq = c.take<float>(kBlk);
    t.fk = c.take<float>(kBlk);
    if (s) *s = t;
    return c.off;
  }
};

// The tiles of one fine block that load_block_and_ut fills (shared memory).
struct BlockTiles {
  bf16 *W, *K, *T, *E, *tmp;  // W, K: 64 x pad(D); T, E, tmp: 64 x pad(64)
  bf16* Wlo;                  // 64 x pad(D): w - W (gram_lower_split), dead on return
  float *Gm, *Lam, *beta;     // Gm, Lam: 64 x kFld (may be one array); beta: 64
};                            // tmp may alias Wlo

// Offset of block m's 64 x 64 entries in utg, utl and ute (params.cuh).
LCR_DEV int64_t ut_block(const Params& p, int b, int hk, int m) {
  return ((int64_t(b) * p.Hkv + hk) * p.nb + m) * kBlk * kBlk;
}

// Starts the block's k into K (cp.async, committed) and loads its w as bf16 W (and, when Wlo
// is given, the remainder Wlo) and beta; rows >= nvalid are zero. Returns after a barrier.
template <int D>
LCR_DEV void load_block_rows(const Params& p, bf16* W, bf16* Wlo, bf16* K, float* beta, int b,
                             int hk, int s0, int nvalid) {
  const int64_t row0 = (int64_t(b) * p.L + s0) * p.Hkv + hk;  // [B, L, Hkv] row of (b, s0, hk)
  async_rows<kBlk, D, 256>(K, pad(D), nvalid > 0 ? p.k + row0 * D : p.k, int64_t(p.Hkv) * D,
                           nvalid);
  cp_async_commit();
  // w in 16-byte read-only loads, all of a thread's issued before its shared stores.
  constexpr int kQuads = kBlk * D / 4, kPer = kQuads / 256;
  static_assert(kQuads % 256 == 0, "256 threads");
  F4 wq[kPer];
  LCR_UNROLL
  for (int u = 0; u < kPer; ++u) {
    const int e = tid() + u * 256, r = e / (D / 4), c = (e % (D / 4)) * 4;
    wq[u] =
        r < nvalid ? load_ro4(p.w + (row0 + int64_t(r) * p.Hkv) * D + c) : F4{0.f, 0.f, 0.f, 0.f};
  }
  LCR_UNROLL
  for (int u = 0; u < kPer; ++u) {
    const int e = tid() + u * 256, r = e / (D / 4), c = (e % (D / 4)) * 4;
    uint32_t* wb = reinterpret_cast<uint32_t*>(W + r * pad(D) + c);
    wb[0] = pack_bf16(wq[u].x, wq[u].y);
    wb[1] = pack_bf16(wq[u].z, wq[u].w);
    if (!Wlo) continue;
    uint32_t* wl = reinterpret_cast<uint32_t*>(Wlo + r * pad(D) + c);
    wl[0] = pack_bf16_lo(wq[u].x, wq[u].y);
    wl[1] = pack_bf16_lo(wq[u].z, wq[u].w);
  }
  for (int r = tid(); r < kBlk; r += nthreads())
    beta[r] = r < nvalid ? p.beta[row0 + int64_t(r) * p.Hkv] : 0.f;
  cp_async_wait<0>();
  sync_cta();
}

// Loads the block's w (as bf16 W and its remainder Wlo), beta and k; computes Gm, Lam, T
// and E (tmp holds Nk = strictLower(W K^T) on return). Rows >= nvalid are zero. In the
// backward (p.utl given) Gm, Lam and E are kept for block_backward as well.
template <int D>
LCR_DEV void load_block_and_ut(const Params& p, const BlockTiles& s, int b, int hk, int s0,
                               int nvalid) {
  load_block_rows<D>(p, s.W, s.Wlo, s.K, s.beta, b, hk, s0, nvalid);
  const int64_t ub = ut_block(p, b, hk, s0 / kBlk);
  gram_lower_split<D>(s.W, s.Wlo, s.Gm);
  if (p.utg) {  // before ut_inverse, which may write Lam over Gm
    for (int e = tid(); e < kBlk * kBlk; e += nthreads())
      p.utg[ub + e] = s.Gm[(e / kBlk) * kFld + e % kBlk];
    sync_cta();
  }
  ut_inverse(s.Gm, s.beta, s.Lam);
  for (int e = tid(); e < kBlk * kBlk; e += nthreads()) {
    const int r = e / kBlk, c = e % kBlk;
    s.T[r * pad(kBlk) + c] = __float2bfloat16(s.Lam[r * kFld + c] * s.beta[c]);
    if (p.utl) p.utl[ub + e] = s.Lam[r * kFld + c];
  }
  sync_cta();
  // Nk = strictLower(W K^T), E = T Nk.
  cta_gemm(kBlk, kBlk, D, op(s.W, pad(D)), op(s.K, pad(D), true), [&](int r, int c, float v) {
    s.tmp[r * pad(kBlk) + c] = __float2bfloat16(c < r ? v : 0.f);
  });
  cta_gemm(kBlk, kBlk, kBlk, op(s.T, pad(kBlk)), op(s.tmp, pad(kBlk)), StoreBf16{s.E, pad(kBlk)});
  if (p.ute) {
    for (int e = tid(); e < kBlk * kBlk; e += nthreads())
      p.ute[ub + e] = s.E[(e / kBlk) * pad(kBlk) + e % kBlk];
  }
}

// block_backward's start: W, K and beta as load_block_and_ut has them, T and E from what prep
// kept at ub = ut_block(...) (the same values: T = Lam D rounded the same way, E copied).
template <int D>
LCR_DEV void load_block_kept(const Params& p, int64_t ub, bf16* W, bf16* K, bf16* T, bf16* E,
                             float* beta, int b, int hk, int s0, int nvalid) {
  constexpr int kPer = kBlk * kBlk / 4 / 256;  // quads of Lam per thread
  F4 lam[kPer];                                // in flight while W and K load
  LCR_UNROLL
  for (int u = 0; u < kPer; ++u) lam[u] = load_ro4(p.utl + ub + 4 * (tid() + 256 * u));
  async_rows<kBlk, kBlk, 256>(E, pad(kBlk), p.ute + ub, kBlk, kBlk);
  load_block_rows<D>(p, W, nullptr, K, beta, b, hk, s0, nvalid);  // E lands with K
  LCR_UNROLL
  for (int u = 0; u < kPer; ++u) {
    const int e = 4 * (tid() + 256 * u), r = e / kBlk, c = e % kBlk;
    uint32_t* t = reinterpret_cast<uint32_t*>(T + r * pad(kBlk) + c);
    t[0] = pack_bf16(lam[u].x * beta[c], lam[u].y * beta[c + 1]);
    t[1] = pack_bf16(lam[u].z * beta[c + 2], lam[u].w * beta[c + 3]);
  }
  sync_cta();
}

template <int D>
LCR_KERNEL_BOUNDS(256, 2)
void prep_kernel(Params p, bool with_softmax) {
  PrepSmem<D> s;
  SmemCarver carver{smem_base()};
  PrepSmem<D>::carve(carver, &s);
  const int m = bid_x(), hk = bid_y(), b = bid_z(), s0 = m * kBlk;
  const int nvalid = p.L - s0 < 0 ? 0 : (p.L - s0 < kBlk ? p.L - s0 : kBlk);
  const int64_t kvrow0 = (int64_t(b) * p.L + s0) * p.Hkv + hk;  // [B, L, Hkv] row of (b, s0, hk)
  load_block_and_ut<D>(p, BlockTiles{s.W, s.KV, s.T, s.E, s.R1, s.R1, s.G, s.G, s.beta}, b, hk, s0,
                       nvalid);

  // k~ = K - E^T W
  bf16* kf = p.kf + ((int64_t(b) * p.Hkv + hk) * p.Lp + s0) * D;
  cta_gemm(kBlk, D, kBlk, op(s.E, pad(kBlk), true), op(s.W, pad(D)),
           [&](int r, int c, float v0, float v1) {
             const bf16* k = s.KV + r * pad(D) + c;
             store_bf16x2(kf + r * D + c, to_f(k[0]) - v0, to_f(k[1]) - v1);
           });
  // P = I - W^T Y, Y = T^T W (Y in R1: Nk is dead since E)
  bf16* Y = s.R1;
  cta_gemm(kBlk, D, kBlk, op(s.T, pad(kBlk), true), op(s.W, pad(D)), StoreBf16{Y, pad(D)});
  bf16* pm = p.pf + ((int64_t(b) * p.Hkv + hk) * p.nb + m) * D * D;
  cta_gemm(D, D, kBlk, op(s.W, pad(D), true), op(Y, pad(D)), [&](int r, int c, float v0, float v1) {
    store_bf16x2(pm + r * D + c, (r == c ? 1.f : 0.f) - v0, (r == c + 1 ? 1.f : 0.f) - v1);
  });

  const Logit logit{p.scale, p.softcap};
  bf16* Pr = s.R1;  // the probabilities, then C = M T (64 x pad(64))
  for (int gi = 0; gi < p.G(); ++gi) {
    const int h = hk * p.G() + gi;
    const int64_t qrow0 = (int64_t(b) * p.L + s0) * p.H + h;
    if (with_softmax && gi > 0)  // the previous head's V took K's place
      async_rows<kBlk, D, 256>(s.KV, pad(D), nvalid > 0 ? p.k + kvrow0 * D : p.k,
                               int64_t(p.Hkv) * D, nvalid);
    async_rows<kBlk, D, 256>(s.Q, pad(D), nvalid > 0 ? p.q + qrow0 * D : p.q, int64_t(p.H) * D,
                             nvalid);
    cp_async_commit();
    for (int r = tid(); r < kBlk && with_softmax; r += nthreads()) {
      const bool ok = r < nvalid && p.fox();
      s.fq[r] = ok ? p.fox_q[qrow0 + int64_t(r) * p.H] : 0.f;
      s.fk[r] = ok ? p.fox_k[qrow0 + int64_t(r) * p.H] : 0.f;
    }
    cp_async_wait<0>();
    sync_cta();
    // M = lower(Q W^T)
    cta_gemm(kBlk, kBlk, D, op(s.Q, pad(D)), op(s.W, pad(D), true), [&](int r, int c, float v) {
      s.M[r * pad(kBlk) + c] = __float2bfloat16(c <= r ? v : 0.f);
    });
    const int64_t hrow0 = (int64_t(b) * p.H + h) * p.Lp + s0;  // [B, H, Lp] row
    if (with_softmax) {
      // S = Q K^T - M E (raw, unscaled) into G (Lam is dead since T).
      float* S = s.G;
      const Term terms[2] = {{op(s.Q, pad(D)), op(s.KV, pad(D), true), D, 1.f},
                             {op(s.M, pad(kBlk)), op(s.E, pad(kBlk)), kBlk, -1.f}};
      cta_gemm(kBlk, kBlk, terms, [&](int r, int c, float v) { S[r * kFld + c] = v; });
      // K is read for the last time above (cta_gemm ends with a barrier): V into its place,
      // landing while the softmax runs.
      async_rows<kBlk, D, 256>(s.KV, pad(D), nvalid > 0 ? p.v + kvrow0 * D : p.v,
                               int64_t(p.Hkv) * D, nvalid);
      cp_async_commit();
      // Causal softmax, 4 threads per row.
      const int r = tid() >> 2, qq = tid() & 3;
      float mx = -INFINITY;
      for (int c = qq; c <= r; c += 4) mx = fmaxf(mx, logit(S[r * kFld + c], s.fq[r], s.fk[c]));
      mx = quad_max(mx);
      float sum = 0.f;
      for (int c = qq; c < kBlk; c += 4) {
        const float pr = c <= r ? fast_exp2(logit(S[r * kFld + c], s.fq[r], s.fk[c]) - mx) : 0.f;
        sum += pr;
        Pr[r * pad(kBlk) + c] = __float2bfloat16(pr);
      }
      sum = quad_sum(sum);
      if (qq == 0) {
        p.m_part[hrow0 + r] = mx * kLn2;
        p.l_part[hrow0 + r] = sum;
      }
      cp_async_wait<0>();
      sync_cta();
      float* op_ = p.o_part + hrow0 * D;
      cta_gemm(kBlk, D, kBlk, op(Pr, pad(kBlk)), op(s.KV, pad(D)),
               [&](int rr, int c, float v0, float v1) { store_f32x2(op_ + rr * D + c, v0, v1); });
    }
    // q~ = Q - C W, C = M T (C in R1: the probabilities are dead since P V)
    cta_gemm(kBlk, kBlk, kBlk, op(s.M, pad(kBlk)), op(s.T, pad(kBlk)), StoreBf16{Pr, pad(kBlk)});
    float* qf = p.qf + hrow0 * D;
    cta_gemm(kBlk, D, kBlk, op(Pr, pad(kBlk)), op(s.W, pad(D)),
             [&](int rr, int c, float v0, float v1) {
               const bf16* q = s.Q + rr * pad(D) + c;
               store_f32x2(qf + rr * D + c, to_f(q[0]) - v0, to_f(q[1]) - v1);
             });
  }
}

// Per superchunk (b, hk, s), 256 threads: Suf walks from the last block to the first,
// K^S_m = k~_m Suf_m (row form of Suf_m^T k~), Suf_{m-1} = P_m Suf_m; P^s = Suf_{first-1}.
template <int D>
struct ChainSmem {
  bf16 *suf0, *suf1, *P, *K;
  static LCR_HD std::size_t carve(SmemCarver& c, ChainSmem* s) {
    ChainSmem t;
    t.suf0 = c.take<bf16>(D * pad(D));
    t.suf1 = c.take<bf16>(D * pad(D));
    t.P = c.take<bf16>(D * pad(D));
    t.K = c.take<bf16>(kBlk * pad(D));
    if (s) *s = t;
    return c.off;
  }
};

template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void chain_kernel(Params p, bool store_suf) {
  ChainSmem<D> s;
  SmemCarver carver{smem_base()};
  ChainSmem<D>::carve(carver, &s);
  const int sc = bid_x(), hk = bid_y(), b = bid_z();
  const int first = sc * p.R, last = (first + p.R < p.nb ? first + p.R : p.nb) - 1;
  const int64_t bh = int64_t(b) * p.Hkv + hk;
  bf16* cur = s.suf0;
  bf16* nxt = s.suf1;
  for (int e = tid(); e < D * D; e += nthreads())
    cur[(e / D) * pad(D) + e % D] = __float2bfloat16(e / D == e % D ? 1.f : 0.f);
  for (int m = last; m >= first; --m) {
    async_rows<kBlk, D, 256>(s.K, pad(D), p.kf + (bh * p.Lp + int64_t(m) * kBlk) * D, D, kBlk);
    async_rows<D, D, 256>(s.P, pad(D), p.pf + (bh * p.nb + m) * D * D, D, D);
    cp_async_commit();
    cp_async_wait<0>();
    sync_cta();
    if (store_suf) {
      bf16* out = p.suf + (bh * p.nb + m) * D * D;
      for (int e = tid(); e < D * D; e += nthreads()) out[e] = cur[(e / D) * pad(D) + e % D];
    }
    bf16* ks = p.ks + (bh * p.Lp + int64_t(m) * kBlk) * D;
    cta_gemm(kBlk, D, D, op(s.K, pad(D)), op(cur, pad(D)),
             [&](int r, int c, float v0, float v1) { store_bf16x2(ks + r * D + c, v0, v1); });
    cta_gemm(D, D, D, op(s.P, pad(D)), op(cur, pad(D)), StoreBf16{nxt, pad(D)});
    bf16* t = cur;
    cur = nxt;
    nxt = t;
  }
  bf16* out = p.ps + (bh * p.nS + sc) * D * D;
  for (int e = tid(); e < D * D; e += nthreads()) out[e] = cur[(e / D) * pad(D) + e % D];
}

}  // namespace lcr::cuda::LCR_PATHK
