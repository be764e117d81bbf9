#pragma once
// The forward scan, one CTA per (fine query block a of 64 rows; query head h; batch b): one
// warpgroup, every product a wgmma (wgmma.cuh). The block's carried queries x (bf16, a
// swizzled tile, rewritten in place by each transition), the output accumulator and the
// online-softmax state stay on chip. Starting from the intra-block state (prep.cuh) and
// x = q~:
//   fine steps c = a-1 .. first(s): keys of block c (k~); x <- P_c x (skipped at the first
//     block of superchunk 0, where nothing is left to the left).
//   coarse steps, superchunks u = s-1 .. 0: the R key tiles of u (K^S); x <- P^u x (u > 0).
// Per step: S = X K^T (both operands in shared memory), online softmax, O += P V (P from the
// registers S was accumulated in, V read MN-major); x P^T with P K-major. K/V tiles are
// double-buffered with cp.async; a transition's matrix is loaded while the step's keys are
// processed. Logits in log2 units (exp2), fp32 accumulation throughout. (wgmma, not mma.sync:
// with warps of 16 or 32 rows of 128-row tiles this scan would take most of the forward's time at
// (1,16,16384,128), docs/cuda.md.)
#include "kernels/attention/cuda/device/wgmma.cuh"
#include "kernels/attention/cuda/path/device/params.cuh"
#include "kernels/attention/cuda/path/device/tile.cuh"

namespace lcr::cuda::LCR_PATHK {

// One step of the scan of query block a: which 64 key rows, which transition after them.
struct ScanStep {
  const bf16* keys;   // key rows (kf or ks), head-major, consecutive
  int key0;           // first key position
  const bf16* trans;  // D x D transition applied after the step, or null
};

LCR_DEV ScanStep scan_step(const Params& p, int i, int a, int sg, int64_t bh_kv) {
  const int first = sg * p.R, D = p.D, nfine = a - first;
  ScanStep st;
  if (i < nfine) {
    const int c = a - 1 - i;
    st.keys = p.kf + (bh_kv * p.Lp + int64_t(c) * kBlk) * D;
    st.key0 = c * kBlk;
    st.trans = (c > first || sg > 0) ? p.pf + (bh_kv * p.nb + c) * D * D : nullptr;
  } else {
    const int u = i - nfine, sc = sg - 1 - u / p.R, key0 = sc * p.S() + (u % p.R) * kBlk;
    st.keys = p.ks + (bh_kv * p.Lp + key0) * D;
    st.key0 = key0;
    st.trans = (u % p.R == p.R - 1 && sc > 0) ? p.ps + (bh_kv * p.nS + sc) * D * D : nullptr;
  }
  return st;
}

// 112 KiB at D = 128: two CTAs per SM.
template <int D>
struct FwdSmem {
  bf16 *X, *KV, *P;  // Swz tiles: X [64 x D]; KV [2][K, V 64 x D]; P [D x D]
  static LCR_HD std::size_t carve(SmemCarver& c, FwdSmem* s) {
    FwdSmem t;
    t.X = c.take_1k<bf16>(kBlk * D);
    t.KV = c.take_1k<bf16>(4 * kBlk * D);
    t.P = c.take_1k<bf16>(D * D);
    if (s) *s = t;
    return c.off;
  }
  LCR_DEV bf16* k(int buf) const { return KV + buf * 2 * kBlk * D; }
  LCR_DEV bf16* v(int buf) const { return KV + (buf * 2 + 1) * kBlk * D; }
};

// Online-softmax state of a warp's 16 rows of the block: unnormalised output (the wgmma
// accumulator, [64 x D] over the warpgroup), row max (log2 units), this lane's share of the row
// sum, the rows' FoX query lanes.
template <int D>
struct RowState {
  float acc[D / 8][4], m2[2], lsum[2], fq[2];
};

// One step: logits of the block's rows against 64 keys (K, V Swz tiles, key positions
// key0..), online-softmax update, acc += P V. Ends with the products complete.
template <int D, int kMode>
LCR_DEV void scan_keys(const Params& p, const LogitOf<kMode>& logit, const bf16* X, const bf16* K,
                       const bf16* V, int key0, int b, int h, RowState<D>& st) {
  const int tq = lane() & 3;
  float sr[8][4];
  wgmma_fence();
  LCR_UNROLL
  for (int k0 = 0; k0 < D; k0 += 16)
    wgmma_ss<0>(&sr[0][0], desc_k(X, kBlk, k0), desc_k(K, kBlk, k0), k0 > 0);
  wgmma_commit();
  float fk[8][2];  // loaded while the product runs
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
  LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    float mx = st.m2[hh];
    LCR_UNROLL
    for (int nt = 0; nt < 8; ++nt) LCR_UNROLL
    for (int e = 0; e < 2; ++e) {
      const float x = logit(sr[nt][2 * hh + e], st.fq[hh], fk[nt][e]);
      sr[nt][2 * hh + e] = x;
      mx = fmaxf(mx, x);
    }
    mx = quad_max(mx);
    const float corr = fast_exp2(st.m2[hh] - mx);
    st.m2[hh] = mx;
    float l = st.lsum[hh] * corr;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      st.acc[nt][2 * hh] *= corr;
      st.acc[nt][2 * hh + 1] *= corr;
    }
    LCR_UNROLL
    for (int nt = 0; nt < 8; ++nt) LCR_UNROLL
    for (int e = 0; e < 2; ++e) {
      const float pr = fast_exp2(sr[nt][2 * hh + e] - mx);
      sr[nt][2 * hh + e] = pr;
      l += pr;
    }
    st.lsum[hh] = l;
  }
  uint32_t a[4][4];  // formed before the fence (bwd_dkv.cuh says why)
  LCR_UNROLL
  for (int kk = 0; kk < 4; ++kk) c_to_a(a[kk], sr[2 * kk], sr[2 * kk + 1]);
  wgmma_fence();
  LCR_UNROLL
  for (int kk = 0; kk < 4; ++kk) LCR_UNROLL
  for (int hf = 0; hf < D / 64; ++hf)
    wgmma_rs<1>(&st.acc[8 * hf][0], a[kk], desc_mn(V, kBlk, 16 * kk, 64 * hf), true);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs<D / 2>(&st.acc[0][0]);
}

template <int D, int kMode>
LCR_KERNEL_BOUNDS(128, 1)
void forward_kernel(Params p) {
  check_smem_base();
  using Smem = FwdSmem<D>;
  Smem s;
  SmemCarver carver{smem_base()};
  Smem::carve(carver, &s);
  const int a = bid_x(), h = bid_y(), b = bid_z(), hk = h / p.G();
  const int sg = a / p.R, w = warp(), g = lane() >> 2, tq = lane() & 3, row0 = a * kBlk;
  const int64_t bh = int64_t(b) * p.H + h, bh_kv = int64_t(b) * p.Hkv + hk;
  const LogitOf<kMode> logit{p.scale, p.softcap};

  auto issue_kv = [&](const ScanStep& sp, int buf) {
    const int valid = p.L - sp.key0;
    const int64_t vrow = (int64_t(b) * p.L + sp.key0) * p.Hkv + hk;
    async_swz<kBlk, D, 128>(s.k(buf), sp.keys, D, kBlk);
    async_swz<kBlk, D, 128>(s.v(buf), valid > 0 ? p.v + vrow * D : p.v, int64_t(p.Hkv) * D, valid);
  };
  const int nsteps = a;  // a - first fine steps, then sg superchunks of R tiles: one per block
  if (nsteps > 0) issue_kv(scan_step(p, 0, a, sg, bh_kv), 0);
  cp_async_commit();

  // Carried queries x = q~ (fp32 -> bf16) into X.
  for (int e = tid(); e < kBlk * D / 2; e += nthreads()) {
    const int r = e / (D / 2), c = (e % (D / 2)) * 2;
    const float* src = p.qf + (bh * p.Lp + row0 + r) * D + c;
    *reinterpret_cast<uint32_t*>(s.X + swz(kBlk, r, c)) = pack_bf16(src[0], src[1]);
  }
  RowState<D> st;
  LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int row = row0 + w * 16 + g + 8 * hh;
    st.m2[hh] = p.m_part[bh * p.Lp + row] * kLog2e;
    st.lsum[hh] = tq == 0 ? p.l_part[bh * p.Lp + row] : 0.f;
    st.fq[hh] = p.fox() && row < p.L ? p.fox_q[(int64_t(b) * p.L + row) * p.H + h] : 0.f;
    const float* src = p.o_part + (bh * p.Lp + row) * D;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      st.acc[nt][2 * hh] = src[nt * 8 + 2 * tq];
      st.acc[nt][2 * hh + 1] = src[nt * 8 + 2 * tq + 1];
    }
  }

  // Stage i & 1 holds step i's keys; step i + 1's are loaded into the other stage while step
  // i runs, and the transition after step i (its own tile) in a group of its own, committed
  // first, so waiting for it leaves the next keys in flight.
  for (int i = 0; i < nsteps; ++i) {
    const ScanStep sp = scan_step(p, i, a, sg, bh_kv);
    cp_async_wait<0>();
    fence_async_smem();  // the landed tiles and x's stores, for the tensor cores (wgmma.cuh)
    sync_cta();
    if (sp.trans) async_swz<D, D, 128>(s.P, sp.trans, D, D);
    cp_async_commit();
    if (i + 1 < nsteps) issue_kv(scan_step(p, i + 1, a, sg, bh_kv), (i + 1) & 1);
    cp_async_commit();
    scan_keys<D, kMode>(p, logit, s.X, s.k(i & 1), s.v(i & 1), sp.key0, b, h, st);
    if (sp.trans) {  // X <- X P^T (x <- P x per row), in place
      cp_async_wait<1>();
      fence_async_smem();
      sync_cta();
      float t[D / 8][4];
      wgmma_times<D, true>(&t[0][0], s.X, s.P);
      sync_cta();  // every warp's share of the product has read X
      LCR_UNROLL
      for (int nt = 0; nt < D / 8; ++nt) LCR_UNROLL
      for (int hh = 0; hh < 2; ++hh) {
        const int r = w * 16 + g + 8 * hh, c = nt * 8 + 2 * tq;
        *reinterpret_cast<uint32_t*>(s.X + swz(kBlk, r, c)) =
            pack_bf16(t[nt][2 * hh], t[nt][2 * hh + 1]);
      }
    }
  }
  cp_async_wait<0>();

  LCR_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int row = row0 + w * 16 + g + 8 * hh;
    const float l = quad_sum(st.lsum[hh]);
    if (row >= p.L) continue;
    const float inv = 1.f / l;
    bf16* dst = p.o + ((int64_t(b) * p.L + row) * p.H + h) * D;
    LCR_UNROLL
    for (int nt = 0; nt < D / 8; ++nt)
      *reinterpret_cast<uint32_t*>(dst + nt * 8 + 2 * tq) =
          pack_bf16(st.acc[nt][2 * hh] * inv, st.acc[nt][2 * hh + 1] * inv);
    if (tq == 0) p.lse[bh * p.L + row] = (st.m2[hh] + fast_log2(l)) * kLn2;
  }
}

}  // namespace lcr::cuda::LCR_PATHK
