#pragma once
// Backward: gradients of the transitions and of the superchunk chain.
//
// outer_kernel: dP = sum over query rows of g x^T, with x the query a transition was applied
// to and g the adjoint of its result (both stored by the carry and dq kernels):
//   coarse: dP^u  = sum over rows in superchunks > u of  gc[u] zc[u]^T   (u >= 1)
//   fine:   dP_c  = sum over rows of blocks c+1 .. last(s) of gf[c] xf[c]^T
// summed over the query heads of a KV head (fp32 atomics into dps / dpf, zeroed first). One
// CTA per (chunk of rows, u or c, b * H); 8 warps share the D x D output.
//
// chain_backward_kernel: the adjoint of chain_kernel (prep.cuh), per (b, KV head, superchunk):
//   Suf_{m-1} = P_m Suf_m, K^S_m = k~_m Suf_m, P^s = Suf_{first-1}, so walking m = first..last
//   with dSuf_{first-1} = dP^s:
//     dP_m  += dSuf_{m-1} Suf_m^T          dk~_m += dK^S_m Suf_m^T
//     dSuf_m = P_m^T dSuf_{m-1} + k~_m^T dK^S_m
#include "kernels/attention/cuda/path/device/tile.cuh"

namespace lcr::cuda::LCR_PATHK {

constexpr int kOuterChunk = 4096;  // rows per CTA of outer_kernel

template <int D>
struct OuterSmem {
  bf16 *A, *Bm;  // [2][64 x pad(D)] each
  static LCR_HD std::size_t carve(SmemCarver& c, OuterSmem* s) {
    OuterSmem t;
    t.A = c.take<bf16>(2 * kBlk * pad(D));
    t.Bm = c.take<bf16>(2 * kBlk * pad(D));
    if (s) *s = t;
    return c.off;
  }
};

template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void outer_kernel(Params p, bool coarse) {
  OuterSmem<D> s;
  SmemCarver carver{smem_base()};
  OuterSmem<D>::carve(carver, &s);
  const int bh = bid_z(), b = bh / p.H, h = bh % p.H, hk = h / p.G();
  const int64_t bh_kv = int64_t(b) * p.Hkv + hk;
  const bf16 *ga, *xb;
  float* out;
  int64_t n;
  if (coarse) {
    const int u = bid_y() + 1, r0 = bid_x() * kOuterChunk;
    n = p.Lp - int64_t(u + 1) * p.S() - r0;
    if (n <= 0) return;
    if (n > kOuterChunk) n = kOuterChunk;
    const int64_t row = int64_t(bh) * p.zrows + p.zslot(u) + r0;
    ga = p.gc + row * D;
    xb = p.zc + row * D;
    out = p.dps + (bh_kv * p.nS + u) * D * D;
  } else {
    const int c = bid_x(), first = c / p.R * p.R;
    const int last = (first + p.R < p.nb ? first + p.R : p.nb) - 1;
    n = int64_t(last - c) * kBlk;
    if (n <= 0) return;
    const int64_t row = (int64_t(bh) * p.R + (c - first)) * p.Lp + int64_t(c + 1) * kBlk;
    ga = p.gf + row * D;
    xb = p.xf + row * D;
    out = p.dpf + (bh_kv * p.nb + c) * D * D;
  }
  // Each warp owns a (16 MW) x (16 NW) block of the D x D sum (32 x 64 at D = 128): per k step
  // MW + NW fragment loads for 2 MW NW products (16 x 16 tiles taken one by one, each loading
  // its own A and B fragment, left the kernel on shared-memory loads, one per product).
  constexpr int kTiles = (D / 16) * (D / 16), kPerWarp = kTiles / 8;
  constexpr int MW = D == 128 ? 2 : 1, NW = kPerWarp / MW, RG = D / (16 * MW);  // RG row groups
  static_assert(RG * (D / (16 * NW)) == 8, "8 warps tile the D x D sum");
  const int wm0 = (warp() % RG) * 16 * MW, wn0 = (warp() / RG) * 16 * NW;
  float acc[MW][NW][2][4] = {};
  const int nch = int((n + kBlk - 1) / kBlk);
  auto issue = [&](int ch, int buf) {
    const int valid = n - int64_t(ch) * kBlk < kBlk ? int(n - int64_t(ch) * kBlk) : kBlk;
    async_rows<kBlk, D, 256>(s.A + buf * kBlk * pad(D), pad(D), ga + int64_t(ch) * kBlk * D, D,
                             valid);
    async_rows<kBlk, D, 256>(s.Bm + buf * kBlk * pad(D), pad(D), xb + int64_t(ch) * kBlk * D, D,
                             valid);
  };
  issue(0, 0);
  cp_async_commit();
  for (int ch = 0; ch < nch; ++ch) {
    cp_async_wait<0>();
    sync_cta();
    if (ch + 1 < nch) issue(ch + 1, (ch + 1) & 1);
    cp_async_commit();
    const bf16* A = s.A + (ch & 1) * kBlk * pad(D);
    const bf16* Bm = s.Bm + (ch & 1) * kBlk * pad(D);
    LCR_UNROLL
    for (int k0 = 0; k0 < kBlk; k0 += 16) {
      uint32_t a[MW][4];
      LCR_UNROLL
      for (int mi = 0; mi < MW; ++mi) load_a(a[mi], op(A, pad(D), true), wm0 + mi * 16, k0);
      LCR_UNROLL
      for (int ni = 0; ni < NW; ++ni) {
        uint32_t bb[4];
        load_b(bb, op(Bm, pad(D)), k0, wn0 + ni * 16);
        LCR_UNROLL
        for (int mi = 0; mi < MW; ++mi) {
          mma_bf16(acc[mi][ni][0], a[mi], bb);
          mma_bf16(acc[mi][ni][1], a[mi], bb + 2);
        }
      }
    }
  }
  const int g = lane() >> 2, tq = lane() & 3;
  LCR_UNROLL
  for (int mi = 0; mi < MW; ++mi) LCR_UNROLL
  for (int ni = 0; ni < NW; ++ni) {
    const int m0 = wm0 + mi * 16, n0 = wn0 + ni * 16;
    LCR_UNROLL
    for (int jn = 0; jn < 2; ++jn) LCR_UNROLL
    for (int hh = 0; hh < 2; ++hh)
      atomic_add2(out + (m0 + g + hh * 8) * D + n0 + jn * 8 + 2 * tq, acc[mi][ni][jn][2 * hh],
                  acc[mi][ni][jn][2 * hh + 1]);
  }
}

template <int D>
struct ChainBwdSmem {
  bf16 *suf, *P, *dsuf0, *dsuf1, *K, *dK;
  static LCR_HD std::size_t carve(SmemCarver& c, ChainBwdSmem* s) {
    ChainBwdSmem t;
    t.suf = c.take<bf16>(D * pad(D));
    t.P = c.take<bf16>(D * pad(D));
    t.dsuf0 = c.take<bf16>(D * pad(D));
    t.dsuf1 = c.take<bf16>(D * pad(D));
    t.K = c.take<bf16>(kBlk * pad(D));
    t.dK = c.take<bf16>(kBlk * pad(D));
    if (s) *s = t;
    return c.off;
  }
};

template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void chain_backward_kernel(Params p) {
  ChainBwdSmem<D> s;
  SmemCarver carver{smem_base()};
  ChainBwdSmem<D>::carve(carver, &s);
  const int sc = bid_x(), hk = bid_y(), b = bid_z();
  const int first = sc * p.R, last = (first + p.R < p.nb ? first + p.R : p.nb) - 1;
  const int64_t bh = int64_t(b) * p.Hkv + hk;
  bf16* cur = s.dsuf0;
  bf16* nxt = s.dsuf1;
  convert_tile(cur, pad(D), p.dps + (bh * p.nS + sc) * D * D, D, D, D, D);
  for (int m = first; m <= last; ++m) {
    sync_cta();  // the previous step's readers are done
    async_rows<D, D, 256>(s.suf, pad(D), p.suf + (bh * p.nb + m) * D * D, D, D);
    async_rows<D, D, 256>(s.P, pad(D), p.pf + (bh * p.nb + m) * D * D, D, D);
    async_rows<kBlk, D, 256>(s.K, pad(D), p.kf + (bh * p.Lp + int64_t(m) * kBlk) * D, D, kBlk);
    cp_async_commit();
    float* dks = p.dks + (bh * p.Lp + int64_t(m) * kBlk) * D;
    convert_tile(s.dK, pad(D), dks, D, kBlk, D, kBlk);
    cp_async_wait<0>();
    sync_cta();
    float* dpm = p.dpf + (bh * p.nb + m) * D * D;
    cta_gemm(D, D, D, op(cur, pad(D)), op(s.suf, pad(D), true),
             [&](int r, int c, float v0, float v1) { atomic_add2(&dpm[r * D + c], v0, v1); });
    float* dkf = p.dkf + (bh * p.Lp + int64_t(m) * kBlk) * D;
    cta_gemm(kBlk, D, D, op(s.dK, pad(D)), op(s.suf, pad(D), true),
             [&](int r, int c, float v0, float v1) { atomic_add2(&dkf[r * D + c], v0, v1); });
    const Term terms[2] = {{op(s.P, pad(D), true), op(cur, pad(D)), D, 1.f},
                           {op(s.K, pad(D), true), op(s.dK, pad(D)), kBlk, 1.f}};
    cta_gemm(D, D, terms, StoreBf16{nxt, pad(D)});
    bf16* t = cur;
    cur = nxt;
    nxt = t;
  }
}

}  // namespace lcr::cuda::LCR_PATHK
