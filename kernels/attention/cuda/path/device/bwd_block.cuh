#pragma once
// Backward, last kernel: everything inside one fine block, per (block m, KV head, batch),
// 256 threads, by recomputation (the reverse-mode rules of kernels/schemes/path/
// blocks_backward.cpp, in the same order). The UT transform (Gm, Lam, T, E) is prep's, kept in
// utg / utl / ute: recomputing it here twice (setup and UT backward, each a Gram product and
// ut_inverse's ~13 barriers) was on every CTA's critical path. In: d q~ (dqf, per query head), d k~
// (dkf, all levels summed), d P_m (dpf, all levels summed), the intra-block softmax (dO, lse,
// delta, FoX lanes). Out: dq, dk, dw (written, then accumulated), dv, the FoX lanes (added
// to what the scan kernels wrote), dbeta (written).
//
//   per query head:  M = lower(Q W^T), S = Q K^T - M E, G = scale dS
//     dV += P^T dO; dE -= M^T G; C = M T; dC = -dq~ W^T; dW -= C^T dq~; dT += M^T dC
//     dM = lower(-G E^T + dC T^T); dq = dq~ + G K + dM W; dW += dM^T Q; dK += G^T Q
//   keys:  dK += dk~; dE -= W dk~^T; dW -= E dk~; dT += dE Nk^T; dNk = sLower(T^T dE);
//          dW += dNk K; dK += dNk^T W
//   transition: Y = T^T W; dY = -W dP; dW -= Y dP^T; dT += W dY^T; dW += T dY
//   UT: dbeta_c += sum_r dT_rc Lam_rc; dLam = dT D; dA = sLower(-Lam^T dLam Lam^T);
//       dbeta_r += sum_c dA_rc Gm_rc; dGm = D dA; dW += (dGm + dGm^T) W
// Shared memory: the block's persistent tiles, plus one region reused phase by phase.
#include "kernels/attention/cuda/path/device/prep.cuh"

namespace lcr::cuda::LCR_PATHK {

template <int D>
struct BlockBwdSmem {
  bf16 *W, *K, *T, *E;
  float *dT, *dE, *beta, *dbt, *fq, *fk, *lse2, *dl, *rs, *cs;
  unsigned char* U;
  // Phase views inside U.
  struct Head {
    bf16 *V, *Q, *dO, *X, *M, *P, *G, *C, *dC, *dM;
    float* S;  // shares storage with C and dC
  };
  struct Keys {
    bf16 *X, *dE, *Nk, *dNk;
  };
  struct Trans {
    bf16 *dP, *Y, *dY;
  };
  struct Ut {
    float *Gm, *Lam, *Z, *dA;
    bf16* dGm;
  };
  static LCR_HD Head head(unsigned char* u, std::size_t* bytes) {
    SmemCarver c{u};
    Head t;
    t.V = c.take<bf16>(kBlk * pad(D));
    t.Q = c.take<bf16>(kBlk * pad(D));
    t.dO = c.take<bf16>(kBlk * pad(D));
    t.dM = t.dO;  // dO is dead once dV is done
    t.X = c.take<bf16>(kBlk * pad(D));
    t.M = c.take<bf16>(kBlk * pad(kBlk));
    t.P = c.take<bf16>(kBlk * pad(kBlk));
    t.G = c.take<bf16>(kBlk * pad(kBlk));
    const std::size_t sf = kBlk * kFld * sizeof(float), cc = 2 * kBlk * pad(kBlk) * sizeof(bf16);
    unsigned char* shared = c.take<unsigned char>(sf > cc ? sf : cc);
    t.S = reinterpret_cast<float*>(shared);  // dead once G exists
    t.C = reinterpret_cast<bf16*>(shared);
    t.dC = t.C ? t.C + kBlk * pad(kBlk) : nullptr;
    if (bytes) *bytes = c.off;
    return t;
  }
  static LCR_HD Keys keys(unsigned char* u, std::size_t* bytes) {
    SmemCarver c{u};
    Keys t;
    t.X = c.take<bf16>(kBlk * pad(D));
    t.dE = c.take<bf16>(kBlk * pad(kBlk));
    t.Nk = c.take<bf16>(kBlk * pad(kBlk));
    t.dNk = c.take<bf16>(kBlk * pad(kBlk));
    if (bytes) *bytes = c.off;
    return t;
  }
  static LCR_HD Trans trans(unsigned char* u, std::size_t* bytes) {
    SmemCarver c{u};
    Trans t;
    t.dP = c.take<bf16>(D * pad(D));
    t.Y = c.take<bf16>(kBlk * pad(D));
    t.dY = c.take<bf16>(kBlk * pad(D));
    if (bytes) *bytes = c.off;
    return t;
  }
  static LCR_HD Ut ut(unsigned char* u, std::size_t* bytes) {
    SmemCarver c{u};
    Ut t;
    t.Gm = c.take<float>(kBlk * kFld);
    t.Lam = c.take<float>(kBlk * kFld);
    t.Z = c.take<float>(kBlk * kFld);
    t.dA = c.take<float>(kBlk * kFld);
    t.dGm = c.take<bf16>(kBlk * pad(kBlk));
    if (bytes) *bytes = c.off;
    return t;
  }
  static LCR_HD std::size_t carve(SmemCarver& c, BlockBwdSmem* s) {
    BlockBwdSmem t;
    t.W = c.take<bf16>(kBlk * pad(D));
    t.K = c.take<bf16>(kBlk * pad(D));
    t.T = c.take<bf16>(kBlk * pad(kBlk));
    t.E = c.take<bf16>(kBlk * pad(kBlk));
    t.dT = c.take<float>(kBlk * kFld);
    t.dE = c.take<float>(kBlk * kFld);
    float* small = c.take<float>(8 * kBlk);
    t.beta = small;
    t.dbt = small ? small + kBlk : nullptr;
    t.fq = small ? small + 2 * kBlk : nullptr;
    t.fk = small ? small + 3 * kBlk : nullptr;
    t.lse2 = small ? small + 4 * kBlk : nullptr;
    t.dl = small ? small + 5 * kBlk : nullptr;
    t.rs = small ? small + 6 * kBlk : nullptr;
    t.cs = small ? small + 7 * kBlk : nullptr;
    std::size_t u = 0, x;
    head(nullptr, &x), u = x > u ? x : u;
    keys(nullptr, &x), u = x > u ? x : u;
    trans(nullptr, &x), u = x > u ? x : u;
    ut(nullptr, &x), u = x > u ? x : u;
    t.U = c.take<unsigned char>(u);
    if (s) *s = t;
    return c.off;
  }
};

template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void block_backward_kernel(Params p) {
  using Smem = BlockBwdSmem<D>;
  Smem s;
  SmemCarver carver{smem_base()};
  Smem::carve(carver, &s);
  const int m = bid_x(), hk = bid_y(), b = bid_z(), s0 = m * kBlk, G = p.G();
  const int nvalid = p.L - s0 < 0 ? 0 : (p.L - s0 < kBlk ? p.L - s0 : kBlk);
  const int64_t bh_kv = int64_t(b) * p.Hkv + hk;
  const int64_t kv_row0 = (int64_t(b) * p.L + s0) * p.Hkv + hk;  // [B, L, Hkv] row of s0
  const Logit logit{p.scale, p.softcap};
  // Accumulating epilogues into the fp32 outputs (rows of this block that exist). Reductions
  // (red.global.add), not load-add-store: a `+=` on global memory is a load the next store
  // may alias, so the compiler runs the epilogue's elements one round trip after another
  // (ncu: long-scoreboard stalls then dominate the kernel). The block owns these
  // rows and a given element always comes from the same thread (every product into them is
  // kBlk x D, cta_gemm's fixed thread mapping), so the sums stay in program order.
  // Epilogues of the (c, c + 1) pairs (cta_gemm): one 8-byte reduction each; the first
  // product into dk and dw (the first head's) stores instead, so nothing zeroes them first
  // (a barrier separates every two products: the later reductions see the stores).
  auto put = [&](float* base, bool first, int r, int c, float v0, float v1) {
    if (r >= nvalid) return;
    float* at = base + (kv_row0 + int64_t(r) * p.Hkv) * D + c;
    if (first)
      store_f32x2(at, v0, v1);
    else
      atomic_add2(at, v0, v1);
  };
  auto add_dw = [&](int r, int c, float v0, float v1) { put(p.dw, false, r, c, v0, v1); };
  auto add_dk = [&](int r, int c, float v0, float v1) { put(p.dk, false, r, c, v0, v1); };

  // A head's tiles and row values into the head region (Q, V, dO by cp.async, committed).
  const auto hd = Smem::head(s.U, nullptr);
  auto load_head = [&](int gi) {
    const int h = hk * G + gi;
    const int64_t bh = int64_t(b) * p.H + h, q_row0 = (int64_t(b) * p.L + s0) * p.H + h;
    async_tile(hd.V, pad(D), nvalid > 0 ? p.v + kv_row0 * D : p.v, int64_t(p.Hkv) * D, kBlk, D,
               nvalid);
    async_tile(hd.Q, pad(D), nvalid > 0 ? p.q + q_row0 * D : p.q, int64_t(p.H) * D, kBlk, D,
               nvalid);
    async_tile(hd.dO, pad(D), nvalid > 0 ? p.dout + q_row0 * D : p.dout, int64_t(p.H) * D, kBlk, D,
               nvalid);
    cp_async_commit();
    convert_tile(hd.X, pad(D), p.dqf + (bh * p.Lp + s0) * D, D, kBlk, D, kBlk);
    for (int r = tid(); r < kBlk; r += nthreads()) {
      const bool ok = r < nvalid;
      s.lse2[r] = ok ? p.lse_in[bh * p.L + s0 + r] * kLog2e : INFINITY;
      s.dl[r] = p.delta[bh * p.Lp + s0 + r];
      s.fq[r] = ok && p.fox() ? p.fox_q[q_row0 + int64_t(r) * p.H] : 0.f;
      s.fk[r] = ok && p.fox() ? p.fox_k[q_row0 + int64_t(r) * p.H] : 0.f;
      s.rs[r] = s.cs[r] = 0.f;
    }
  };

  // ---- setup: W, K, beta, T, E (and the zeroed accumulators); the first head's loads go
  // first, so their latency overlaps the setup's (the setup does not touch the head region).
  load_head(0);
  const int64_t ub = ut_block(p, b, hk, m);
  {
    load_block_kept<D>(p, ub, s.W, s.K, s.T, s.E, s.beta, b, hk, s0, nvalid);
    for (int e = tid(); e < kBlk * kFld; e += nthreads()) s.dT[e] = s.dE[e] = 0.f;
    for (int r = tid(); r < kBlk; r += nthreads()) s.dbt[r] = 0.f;
  }

  // ---- per query head
  for (int gi = 0; gi < G; ++gi) {
    const int h = hk * G + gi;
    const int64_t bh = int64_t(b) * p.H + h, q_row0 = (int64_t(b) * p.L + s0) * p.H + h;
    const float* dqf = p.dqf + (bh * p.Lp + s0) * D;
    if (gi > 0) {
      sync_cta();  // the previous head is done with the region
      load_head(gi);
    }
    cp_async_wait<0>();
    sync_cta();
    // M = lower(Q W^T)
    cta_gemm(kBlk, kBlk, D, op(hd.Q, pad(D)), op(s.W, pad(D), true), [&](int r, int c, float v) {
      hd.M[r * pad(kBlk) + c] = __float2bfloat16(c <= r ? v : 0.f);
    });
    // S = Q K^T - M E -> final logits (log2 units) and probabilities
    {
      const Term t[2] = {{op(hd.Q, pad(D)), op(s.K, pad(D), true), D, 1.f},
                         {op(hd.M, pad(kBlk)), op(s.E, pad(kBlk)), kBlk, -1.f}};
      cta_gemm(kBlk, kBlk, t, [&](int r, int c, float v) {
        const float s2 = logit(v, s.fq[r], s.fk[c]);
        hd.S[r * kFld + c] = s2;
        hd.P[r * pad(kBlk) + c] = __float2bfloat16(c <= r ? fast_exp2(s2 - s.lse2[r]) : 0.f);
      });
    }
    // dP = dO V^T -> G = scale dS, FoX row / column sums
    cta_gemm(kBlk, kBlk, D, op(hd.dO, pad(D)), op(hd.V, pad(D), true), [&](int r, int c, float v) {
      float ds = 0.f;
      if (c <= r) {
        const float s2 = hd.S[r * kFld + c];
        ds = fast_exp2(s2 - s.lse2[r]) * (v - s.dl[r]) * logit.dcap(s2);
        if (p.fox()) {  // the FoX lanes' row and column sums (shared-memory atomics)
          atomic_add(&s.rs[r], ds);
          atomic_add(&s.cs[c], ds);
        }
      }
      hd.G[r * pad(kBlk) + c] = __float2bfloat16(ds * p.scale);
    });
    // dV += P^T dO
    cta_gemm(kBlk, D, kBlk, op(hd.P, pad(kBlk), true), op(hd.dO, pad(D)),
             [&](int r, int c, float v0, float v1) {
               if (r < nvalid) atomic_add2(&p.dv[(kv_row0 + int64_t(r) * p.Hkv) * D + c], v0, v1);
             });
    // dE -= M^T G
    cta_gemm(kBlk, kBlk, kBlk, op(hd.M, pad(kBlk), true), op(hd.G, pad(kBlk)),
             [&](int r, int c, float v) { s.dE[r * kFld + c] -= v; });
    // C = M T, dC = -dq~ W^T (both over S, dead now)
    cta_gemm(kBlk, kBlk, kBlk, op(hd.M, pad(kBlk)), op(s.T, pad(kBlk)), StoreBf16{hd.C, pad(kBlk)});
    cta_gemm(kBlk, kBlk, D, op(hd.X, pad(D)), op(s.W, pad(D), true),
             [&](int r, int c, float v) { hd.dC[r * pad(kBlk) + c] = __float2bfloat16(-v); });
    // dT += M^T dC (dW -= C^T dq~ joins dW += dM^T Q below)
    cta_gemm(kBlk, kBlk, kBlk, op(hd.M, pad(kBlk), true), op(hd.dC, pad(kBlk)),
             [&](int r, int c, float v) { s.dT[r * kFld + c] += v; });
    // dM = lower(-G E^T + dC T^T) (over dO, dead now)
    {
      const Term t[2] = {{op(hd.G, pad(kBlk)), op(s.E, pad(kBlk), true), kBlk, -1.f},
                         {op(hd.dC, pad(kBlk)), op(s.T, pad(kBlk), true), kBlk, 1.f}};
      cta_gemm(kBlk, kBlk, t, [&](int r, int c, float v) {
        hd.dM[r * pad(kBlk) + c] = __float2bfloat16(c <= r ? v : 0.f);
      });
    }
    // dq = dq~ + G K + dM W
    {
      const Term t[2] = {{op(hd.G, pad(kBlk)), op(s.K, pad(D)), kBlk, 1.f},
                         {op(hd.dM, pad(kBlk)), op(s.W, pad(D)), kBlk, 1.f}};
      cta_gemm(kBlk, D, t, [&](int r, int c, float v0, float v1) {
        if (r < nvalid)
          store_f32x2(p.dq + (q_row0 + int64_t(r) * p.H) * D + c, load_ro(dqf + r * D + c) + v0,
                      load_ro(dqf + r * D + c + 1) + v1);
      });
    }
    // dW += dM^T Q - C^T dq~ (one reduction per element); dK += G^T Q
    {
      const Term t[2] = {{op(hd.dM, pad(kBlk), true), op(hd.Q, pad(D)), kBlk, 1.f},
                         {op(hd.C, pad(kBlk), true), op(hd.X, pad(D)), kBlk, -1.f}};
      cta_gemm(kBlk, D, t,
               [&](int r, int c, float v0, float v1) { put(p.dw, gi == 0, r, c, v0, v1); });
    }
    cta_gemm(kBlk, D, kBlk, op(hd.G, pad(kBlk), true), op(hd.Q, pad(D)),
             [&](int r, int c, float v0, float v1) { put(p.dk, gi == 0, r, c, v0, v1); });
    for (int r = tid(); r < nvalid && p.fox(); r += nthreads()) {
      p.dfox_q[q_row0 + int64_t(r) * p.H] += s.rs[r];
      p.dfox_k[q_row0 + int64_t(r) * p.H] -= s.cs[r];
    }
  }

  // ---- keys: k~ = K - E^T W, E = T Nk, Nk = sLower(W K^T)
  {
    sync_cta();
    const auto ky = Smem::keys(s.U, nullptr);
    const float* dkf = p.dkf + (bh_kv * p.Lp + s0) * D;
    convert_tile(ky.X, pad(D), dkf, D, kBlk, D, kBlk);
    sync_cta();
    cta_gemm(kBlk, kBlk, D, op(s.W, pad(D)), op(ky.X, pad(D), true),
             [&](int r, int c, float v) { s.dE[r * kFld + c] -= v; });
    cta_gemm(kBlk, kBlk, D, op(s.W, pad(D)), op(s.K, pad(D), true), [&](int r, int c, float v) {
      ky.Nk[r * pad(kBlk) + c] = __float2bfloat16(c < r ? v : 0.f);
    });
    for (int e = tid(); e < kBlk * kBlk; e += nthreads())
      ky.dE[(e / kBlk) * pad(kBlk) + e % kBlk] =
          __float2bfloat16(s.dE[(e / kBlk) * kFld + e % kBlk]);
    sync_cta();
    cta_gemm(kBlk, kBlk, kBlk, op(ky.dE, pad(kBlk)), op(ky.Nk, pad(kBlk), true),
             [&](int r, int c, float v) { s.dT[r * kFld + c] += v; });
    cta_gemm(kBlk, kBlk, kBlk, op(s.T, pad(kBlk), true), op(ky.dE, pad(kBlk)),
             [&](int r, int c, float v) {
               ky.dNk[r * pad(kBlk) + c] = __float2bfloat16(c < r ? v : 0.f);
             });
    // dW += dNk K - E dk~; dK += dNk^T W + dk~ (dk~ from fp32 dkf): one reduction each
    {
      const Term t[2] = {{op(ky.dNk, pad(kBlk)), op(s.K, pad(D)), kBlk, 1.f},
                         {op(s.E, pad(kBlk)), op(ky.X, pad(D)), kBlk, -1.f}};
      cta_gemm(kBlk, D, t, add_dw);
    }
    cta_gemm(kBlk, D, kBlk, op(ky.dNk, pad(kBlk), true), op(s.W, pad(D)),
             [&](int r, int c, float v0, float v1) {
               add_dk(r, c, v0 + load_ro(dkf + r * D + c), v1 + load_ro(dkf + r * D + c + 1));
             });
  }

  // ---- transition: P = I - W^T Y, Y = T^T W
  {
    const auto tr = Smem::trans(s.U, nullptr);
    convert_tile(tr.dP, pad(D), p.dpf + (bh_kv * p.nb + m) * D * D, D, D, D, D);
    sync_cta();
    cta_gemm(kBlk, D, kBlk, op(s.T, pad(kBlk), true), op(s.W, pad(D)), StoreBf16{tr.Y, pad(D)});
    cta_gemm(kBlk, D, D, op(s.W, pad(D)), op(tr.dP, pad(D)),
             [&](int r, int c, float v) { tr.dY[r * pad(D) + c] = __float2bfloat16(-v); });
    cta_gemm(kBlk, kBlk, D, op(s.W, pad(D)), op(tr.dY, pad(D), true),
             [&](int r, int c, float v) { s.dT[r * kFld + c] += v; });
    // dW += T dY - Y dP^T (one reduction per element)
    {
      const Term t[2] = {{op(s.T, pad(kBlk)), op(tr.dY, pad(D)), kBlk, 1.f},
                         {op(tr.Y, pad(D)), op(tr.dP, pad(D), true), D, -1.f}};
      cta_gemm(kBlk, D, t, add_dw);
    }
  }

  // ---- UT transform: T = Lam D, Lam = (I + sLower(D Gm))^-1 (fp32, prep's)
  {
    const auto ut = Smem::ut(s.U, nullptr);
    constexpr int kPer = kBlk * kBlk / 4 / 256;  // quads per thread and tile, all in flight
    F4 gm[kPer], lam[kPer];
    LCR_UNROLL
    for (int u = 0; u < kPer; ++u) {
      gm[u] = load_ro4(p.utg + ub + 4 * (tid() + 256 * u));
      lam[u] = load_ro4(p.utl + ub + 4 * (tid() + 256 * u));
    }
    LCR_UNROLL
    for (int u = 0; u < kPer; ++u) {
      const int e = 4 * (tid() + 256 * u), r = e / kBlk, c = e % kBlk;
      float* g = ut.Gm + r * kFld + c;
      float* l = ut.Lam + r * kFld + c;
      g[0] = gm[u].x, g[1] = gm[u].y, g[2] = gm[u].z, g[3] = gm[u].w;
      l[0] = lam[u].x, l[1] = lam[u].y, l[2] = lam[u].z, l[3] = lam[u].w;
    }
    sync_cta();
    // Four threads per column / row (lanes 4i..4i+3 of one warp), summed by shuffles: one
    // thread per column left 192 of the 256 idle through a 64-long chain of shared loads.
    static_assert(kBlk * 4 == 256, "four threads per row of the block (256 threads)");
    const int rc = tid() / 4, part = tid() % 4;
    {
      float sum = 0.f;
      for (int r = rc + part; r < kBlk; r += 4) sum += s.dT[r * kFld + rc] * ut.Lam[r * kFld + rc];
      sum += shfl_xor(sum, 1);
      sum += shfl_xor(sum, 2);
      if (part == 0) s.dbt[rc] += sum;
    }
    sync_cta();
    for (int e = tid(); e < kBlk * kBlk; e += nthreads())
      s.dT[(e / kBlk) * kFld + e % kBlk] *= s.beta[e % kBlk];  // dLam = dT D
    sync_cta();
    simt_gemm64(ut.Lam, true, s.dT, false, ut.Z, 1.f);    // Lam^T dLam
    simt_gemm64(ut.Z, false, ut.Lam, true, ut.dA, -1.f);  // dA = -Lam^T dLam Lam^T
    {
      const int r = rc;
      float sum = 0.f;
      for (int c = part; c < kBlk; c += 4) {
        const float da = c < r ? ut.dA[r * kFld + c] : 0.f;
        sum += da * ut.Gm[r * kFld + c];
        ut.dGm[r * pad(kBlk) + c] = __float2bfloat16(s.beta[r] * da);
      }
      sum += shfl_xor(sum, 1);
      sum += shfl_xor(sum, 2);
      if (part == 0) s.dbt[r] += sum;
    }
    sync_cta();
    const Term t[2] = {{op(ut.dGm, pad(kBlk)), op(s.W, pad(D)), kBlk, 1.f},
                       {op(ut.dGm, pad(kBlk), true), op(s.W, pad(D)), kBlk, 1.f}};
    cta_gemm(kBlk, D, t, add_dw);
    for (int r = tid(); r < nvalid; r += nthreads())
      p.dbeta[kv_row0 + int64_t(r) * p.Hkv] = s.dbt[r];
  }
}

}  // namespace lcr::cuda::LCR_PATHK
