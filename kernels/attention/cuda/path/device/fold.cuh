#pragma once
// A span's boundary quantities for the context-parallel ring (path.hpp: Folds / FoldGrads;
// DESIGN.md section 5), from what prep computes per fine block m (P_m in pf, q~ in qf, k~ in
// kf):
//   Pre_m = P_0 ... P_{m-1},   Suf_m = P_{m+1} ... P_{nb-1},   P = P_0 ... P_{nb-1}
//   q_fold_i = Pre_m q~_i   (query i of block m folded to the span's left end)
//   k_fold_j = Suf_m^T k~_j (key j of block m folded to the span's right end)
// The products run on the tensor cores with fp32-like accuracy (Split below: each matrix as a
// bf16 hi + lo pair, three bf16 MMAs per product, ~2^-16 relative): they are chains of up to
// nb factors, and plain bf16 storage between factors would add its rounding (2^-9) nb times.
// Two levels keep the sequential depth at rg + nb / rg (rg, the group size, about sqrt(nb)):
//   lp_m / ls_m = exclusive prefix / suffix products inside block m's group g (fold_local),
//   gg_g = the group's product, gp_g / gs_g = exclusive prefix / suffix of the gg (fold_group),
//   Pre_m = gp_g lp_m, Suf_m = ls_m gs_g (fold_combine).
// Backward: the same chains in reverse mode. d q_fold and d k_fold give d q~ and d k~ (added
// to dqf / dkf) and dPre_m, dSuf_m; those run back through the two levels into dP_m (added to
// dpf), which block_backward turns into dq, dk, dw, dbeta with the attention's own share.
//
// Matrices are D x D fp32, row-major, dense in global memory ([B, Hkv, count, D, D]); in shared
// memory Splits with leading dimension D + 8 (ldmatrix rows in distinct banks), fp32
// accumulators with D + 1.
#include "kernels/attention/cuda/path/device/tile.cuh"

namespace lcr::cuda::LCR_PATHK {

// A matrix held in shared memory as two bf16 tiles, x = hi + lo: hi is x rounded to bf16 and
// lo the rounded remainder, so hi + lo keeps 16 significant bits (relative error <= 2^-17 per
// element). Products of such matrices on the tensor cores (split_gemm) are then accurate to
// about 2^-16 relative, fp32-like for chains of a few dozen factors, where a plain bf16
// product would add 2^-9 per factor. Leading dimension pad(D) (tile.cuh).
struct Split {
  bf16 *hi, *lo;
  int ld;
  LCR_DEV void set(int r, int c, float v) const {
    const bf16 h = __float2bfloat16(v);
    hi[r * ld + c] = h;
    lo[r * ld + c] = __float2bfloat16(v - to_f(h));
  }
  LCR_DEV float get(int r, int c) const { return to_f(hi[r * ld + c]) + to_f(lo[r * ld + c]); }
};
template <int D>
LCR_HD Split take_split(SmemCarver& c, int rows) {
  Split s;
  s.ld = pad(D);
  s.hi = c.take<bf16>(std::size_t(rows) * pad(D));
  s.lo = c.take<bf16>(std::size_t(rows) * pad(D));
  return s;
}

// C[M x N] = op(A) op(B) (op: transposed when ta / tb) as hi hi + hi lo + lo hi on the tensor
// cores with fp32 accumulation (lo lo is below 2^-16 relative); epi(r, c, v) and the closing
// barrier as cta_gemm's. M, N, K multiples of 16.
template <class Epi>
LCR_DEV void split_gemm(int M, int N, int K, Split A, bool ta, Split B, bool tb, Epi&& epi) {
  const Term t[3] = {{op(A.hi, A.ld, ta), op(B.hi, B.ld, tb), K, 1.f},
                     {op(A.hi, A.ld, ta), op(B.lo, B.ld, tb), K, 1.f},
                     {op(A.lo, A.ld, ta), op(B.hi, B.ld, tb), K, 1.f}};
  cta_gemm(M, N, t, epi);
}

// rows x D from global memory (fp32 or bf16, row stride `stride`; rows >= valid are zero) into
// a Split; the identity; a D x D Split to dense global fp32. Element e belongs to thread
// e % nthreads() in all three, so one thread's set then get needs no barrier.
template <int D, class T>
LCR_DEV void load_split(Split s, const T* src, int64_t stride, int rows, int valid) {
  for (int e = tid(); e < rows * D; e += nthreads()) {
    const int r = e / D, c = e % D;
    float v = 0.f;
    if (r < valid) {
      if constexpr (sizeof(T) == 2)
        v = to_f(src[r * stride + c]);
      else
        v = src[r * stride + c];
    }
    s.set(r, c, v);
  }
}
template <int D, class T>
LCR_DEV void load_split(Split s, const T* src) {  // a dense D x D matrix
  load_split<D>(s, src, D, D, D);
}
template <int D>
LCR_DEV void identity_split(Split s) {
  for (int e = tid(); e < D * D; e += nthreads()) s.set(e / D, e % D, e / D == e % D ? 1.f : 0.f);
}
template <int D>
LCR_DEV void store_split(float* dst, Split s) {
  for (int e = tid(); e < D * D; e += nthreads()) dst[e] = s.get(e / D, e % D);
}

// fp32 accumulators in shared memory, D x (D + 1) (no bank conflicts on the column walk).
template <int D>
constexpr int kAccLd = D + 1;
template <int D>
LCR_DEV void zero_acc(float* acc) {
  for (int e = tid(); e < D * D; e += nthreads()) acc[(e / D) * kAccLd<D> + e % D] = 0.f;
}
template <int D>
LCR_DEV void store_acc(float* dst, const float* acc) {
  for (int e = tid(); e < D * D; e += nthreads()) dst[e] = acc[(e / D) * kAccLd<D> + e % D];
}

// Matrix i of a [B, Hkv, count, D, D] array for (b, hk).
template <int D, class T>
LCR_DEV T* mat_at(T* base, const Params& p, int b, int hk, int count, int i) {
  return base + ((int64_t(b) * p.Hkv + hk) * count + i) * D * D;
}

// Exclusive prefix and suffix products of X(0) ... X(n-1) (load(i, split) fills X(i)):
// pre(i) = X(0) ... X(i-1) and suf(i) = X(i+1) ... X(n-1) to global memory; the total
// X(0) ... X(n-1) to total. cur, nxt, x: D x D Splits (cur and nxt swap each step).
template <int D, class Load>
LCR_DEV void chain_products(int n, Load load, float* pre, float* suf, float* total, Split cur,
                            Split nxt, Split x) {
  identity_split<D>(cur);
  for (int i = 0; i < n; ++i) {
    store_split<D>(pre + int64_t(i) * D * D, cur);
    load(i, x);
    sync_cta();
    split_gemm(D, D, D, cur, false, x, false, [&](int r, int c, float v) { nxt.set(r, c, v); });
    const Split t = cur;
    cur = nxt, nxt = t;
  }
  store_split<D>(total, cur);
  identity_split<D>(cur);  // same threads, same elements as the store
  for (int i = n - 1; i >= 0; --i) {
    store_split<D>(suf + int64_t(i) * D * D, cur);
    load(i, x);
    sync_cta();
    split_gemm(D, D, D, x, false, cur, false, [&](int r, int c, float v) { nxt.set(r, c, v); });
    const Split t = cur;
    cur = nxt, nxt = t;
  }
}

// Reverse mode of chain_products: given d pre(i), d suf(i) (dense global, null = zero) and
// d total, calls add_dx(i, r, c, v) with every contribution to d X(i) (two per element:
// the prefix pass, then the suffix pass). acc, t, x: D x D Splits (acc and t swap).
template <int D, class Load, class AddDx>
LCR_DEV void chain_products_backward(int n, Load load, const float* pre, const float* dpre,
                                     const float* suf, const float* dsuf, const float* dtotal,
                                     AddDx add_dx, Split acc, Split t, Split x) {
  constexpr int DD = D * D;
  // Prefix: pre(i+1) = pre(i) X(i), total = pre(n). acc = d pre(i+1) going down.
  load_split<D>(acc, dtotal);
  for (int i = n - 1; i >= 0; --i) {
    load(i, x);
    load_split<D>(t, pre + int64_t(i) * DD);
    sync_cta();
    split_gemm(D, D, D, t, true, acc, false, [&](int r, int c, float v) { add_dx(i, r, c, v); });
    const float* dp = dpre ? dpre + int64_t(i) * DD : nullptr;
    split_gemm(D, D, D, acc, false, x, true,
               [&](int r, int c, float v) { t.set(r, c, v + (dp ? dp[r * D + c] : 0.f)); });
    const Split u = acc;
    acc = t, t = u;
  }
  // Suffix: suf(i-1) = X(i) suf(i), suf(n-1) = I. acc = d suf(i-1) going up.
  if (dsuf == nullptr) return;
  load_split<D>(acc, dsuf);
  for (int i = 1; i < n; ++i) {
    load(i, x);
    load_split<D>(t, suf + int64_t(i) * DD);
    sync_cta();
    split_gemm(D, D, D, acc, false, t, true, [&](int r, int c, float v) { add_dx(i, r, c, v); });
    const float* ds = dsuf + int64_t(i) * DD;
    split_gemm(D, D, D, x, true, acc, false,
               [&](int r, int c, float v) { t.set(r, c, v + ds[r * D + c]); });
    const Split u = acc;
    acc = t, t = u;
  }
}

template <int D>
struct FoldSmem {  // three D x D Splits
  Split a, b, c;
  static LCR_HD std::size_t carve(SmemCarver& cv, FoldSmem* s) {
    FoldSmem t;
    t.a = take_split<D>(cv, D);
    t.b = take_split<D>(cv, D);
    t.c = take_split<D>(cv, D);
    if (s) *s = t;
    return cv.off;
  }
  static LCR_DEV FoldSmem here() {  // the running block's
    FoldSmem s;
    SmemCarver c{smem_base()};
    carve(c, &s);
    return s;
  }
};

template <int D>
struct FoldAccSmem {  // two D x D Splits and an fp32 accumulator
  Split a, b;
  float* acc;
  static LCR_HD std::size_t carve(SmemCarver& cv, FoldAccSmem* s) {
    FoldAccSmem t;
    t.a = take_split<D>(cv, D);
    t.b = take_split<D>(cv, D);
    t.acc = cv.take<float>(std::size_t(D) * kAccLd<D>);
    if (s) *s = t;
    return cv.off;
  }
  static LCR_DEV FoldAccSmem here() {
    FoldAccSmem s;
    SmemCarver c{smem_base()};
    carve(c, &s);
    return s;
  }
};

// Loads of the chains' factors into a Split: a group's block transitions P_m (bf16 pf, from
// block m0) or the group products gg (fp32).
template <int D>
struct BlockFactors {
  const Params& p;
  int b, hk, m0;
  LCR_DEV void operator()(int i, Split x) const {
    load_split<D>(x, mat_at<D>(p.pf, p, b, hk, p.nb, m0 + i));
  }
};
template <int D>
struct GroupFactors {
  const Params& p;
  int b, hk;
  LCR_DEV void operator()(int i, Split x) const {
    load_split<D>(x, mat_at<D>(p.fgg, p, b, hk, p.ng, i));
  }
};

LCR_DEV int group_first(const Params& p, int g) { return g * p.rg; }
LCR_DEV int group_size(const Params& p, int g) {
  const int f = g * p.rg;
  return f + p.rg < p.nb ? p.rg : p.nb - f;
}

// Per (group g, KV head, batch): lp, ls of the group's blocks and the group product gg_g.
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_local_kernel(Params p) {
  const FoldSmem<D> s = FoldSmem<D>::here();
  const int g = bid_x(), hk = bid_y(), b = bid_z(), m0 = group_first(p, g);
  const BlockFactors<D> load{p, b, hk, m0};
  chain_products<D>(group_size(p, g), load, mat_at<D>(p.flp, p, b, hk, p.nb, m0),
                    mat_at<D>(p.fls, p, b, hk, p.nb, m0), mat_at<D>(p.fgg, p, b, hk, p.ng, g), s.a,
                    s.b, s.c);
}

// Per (KV head, batch): gp, gs over the groups and the span's transition P.
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_group_kernel(Params p) {
  const FoldSmem<D> s = FoldSmem<D>::here();
  const int hk = bid_y(), b = bid_z();
  const GroupFactors<D> load{p, b, hk};
  chain_products<D>(p.ng, load, mat_at<D>(p.fgp, p, b, hk, p.ng, 0),
                    mat_at<D>(p.fgs, p, b, hk, p.ng, 0), mat_at<D>(p.fold_p, p, b, hk, 1, 0), s.a,
                    s.b, s.c);
}

// Per (block m, KV head, batch): Pre_m = gp_g lp_m, Suf_m = ls_m gs_g.
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_combine_kernel(Params p) {
  const FoldSmem<D> s = FoldSmem<D>::here();
  const int m = bid_x(), hk = bid_y(), b = bid_z(), g = m / p.rg;
  float* pre = mat_at<D>(p.fpre, p, b, hk, p.nb, m);
  float* suf = mat_at<D>(p.fsuf, p, b, hk, p.nb, m);
  load_split<D>(s.a, mat_at<D>(p.fgp, p, b, hk, p.ng, g));
  load_split<D>(s.b, mat_at<D>(p.flp, p, b, hk, p.nb, m));
  sync_cta();
  split_gemm(D, D, D, s.a, false, s.b, false, [&](int r, int c, float v) { pre[r * D + c] = v; });
  load_split<D>(s.a, mat_at<D>(p.fls, p, b, hk, p.nb, m));
  load_split<D>(s.b, mat_at<D>(p.fgs, p, b, hk, p.ng, g));
  sync_cta();
  split_gemm(D, D, D, s.a, false, s.b, false, [&](int r, int c, float v) { suf[r * D + c] = v; });
}

// Per (block m, head y, batch), y < H a query head, else KV head y - H:
//   q_fold rows = qf rows Pre_m^T (row form of Pre_m q~), k_fold rows = kf rows Suf_m.
// s.a holds the 64 rows, s.b the matrix.
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_apply_kernel(Params p) {
  const FoldSmem<D> s = FoldSmem<D>::here();
  const int m = bid_x(), y = bid_y(), b = bid_z(), s0 = m * kBlk;
  if (y < p.H) {
    const int h = y, hk = h / p.G();
    load_split<D>(s.a, p.qf + ((int64_t(b) * p.H + h) * p.Lp + s0) * D, D, kBlk, kBlk);
    load_split<D>(s.b, mat_at<D>(p.fpre, p, b, hk, p.nb, m));
    sync_cta();
    split_gemm(kBlk, D, D, s.a, false, s.b, true, [&](int r, int c, float v) {
      if (s0 + r < p.L) p.fold_q[((int64_t(b) * p.L + s0 + r) * p.H + h) * D + c] = v;
    });
  } else {
    const int hk = y - p.H;
    load_split<D>(s.a, p.kf + ((int64_t(b) * p.Hkv + hk) * p.Lp + s0) * D, D, kBlk, kBlk);
    load_split<D>(s.b, mat_at<D>(p.fsuf, p, b, hk, p.nb, m));
    sync_cta();
    split_gemm(kBlk, D, D, s.a, false, s.b, false, [&](int r, int c, float v) {
      if (s0 + r < p.L)
        p.fold_k[((int64_t(b) * p.L + s0 + r) * p.Hkv + hk) * D + c] = __float2bfloat16(v);
    });
  }
}

template <int D>
struct FoldApplyBwdSmem {
  Split g, x, m;  // g, x: 64 rows; m: D x D
  float* acc;     // D x (D + 1)
  static LCR_HD std::size_t carve(SmemCarver& c, FoldApplyBwdSmem* s) {
    FoldApplyBwdSmem t;
    t.g = take_split<D>(c, kBlk);
    t.x = take_split<D>(c, kBlk);
    t.m = take_split<D>(c, D);
    t.acc = c.take<float>(std::size_t(D) * kAccLd<D>);
    if (s) *s = t;
    return c.off;
  }
};

// Per (block m, KV head, batch), given d q_fold and d k_fold (either may be null):
//   dqf rows += d q_fold rows Pre_m,  dPre_m = sum over the group's heads of dq_fold^T qf
//   dkf rows += d k_fold rows Suf_m^T, dSuf_m = kf^T dk_fold
// dPre_m and dSuf_m overwrite Pre_m and Suf_m (fpre, fsuf), dead after this.
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_apply_backward_kernel(Params p) {
  FoldApplyBwdSmem<D> s;
  SmemCarver carver{smem_base()};
  FoldApplyBwdSmem<D>::carve(carver, &s);
  constexpr int ld = kAccLd<D>;
  const int m = bid_x(), hk = bid_y(), b = bid_z(), s0 = m * kBlk;
  const int valid = p.L - s0 < kBlk ? p.L - s0 : kBlk;  // rows of d q_fold / d k_fold
  float* pre = mat_at<D>(p.fpre, p, b, hk, p.nb, m);
  float* suf = mat_at<D>(p.fsuf, p, b, hk, p.nb, m);
  zero_acc<D>(s.acc);
  if (p.dfold_q) load_split<D>(s.m, pre);
  for (int gi = 0; gi < p.G() && p.dfold_q; ++gi) {
    const int h = hk * p.G() + gi;
    load_split<D>(s.g, p.dfold_q + ((int64_t(b) * p.L + s0) * p.H + h) * D, int64_t(p.H) * D, kBlk,
                  valid);
    load_split<D>(s.x, p.qf + ((int64_t(b) * p.H + h) * p.Lp + s0) * D, D, kBlk, kBlk);
    sync_cta();
    float* dqf = p.dqf + ((int64_t(b) * p.H + h) * p.Lp + s0) * D;
    split_gemm(kBlk, D, D, s.g, false, s.m, false,
               [&](int r, int c, float v) { atomic_add(&dqf[r * D + c], v); });
    split_gemm(D, D, kBlk, s.g, true, s.x, false,
               [&](int r, int c, float v) { s.acc[r * ld + c] += v; });
  }
  store_acc<D>(pre, s.acc);
  if (p.dfold_k) {
    load_split<D>(s.m, suf);
    load_split<D>(s.g, p.dfold_k + ((int64_t(b) * p.L + s0) * p.Hkv + hk) * D, int64_t(p.Hkv) * D,
                  kBlk, valid);
    load_split<D>(s.x, p.kf + ((int64_t(b) * p.Hkv + hk) * p.Lp + s0) * D, D, kBlk, kBlk);
    sync_cta();
    float* dkf = p.dkf + ((int64_t(b) * p.Hkv + hk) * p.Lp + s0) * D;
    split_gemm(kBlk, D, D, s.g, false, s.m, true,
               [&](int r, int c, float v) { atomic_add(&dkf[r * D + c], v); });
    split_gemm(D, D, kBlk, s.x, true, s.g, false,
               [&](int r, int c, float v) { suf[r * D + c] = v; });
  } else {
    for (int e = tid(); e < D * D; e += nthreads()) suf[e] = 0.f;
  }
}

// Per (group g, KV head, batch): from dPre_m (in fpre) and dSuf_m (in fsuf) of the group's
// blocks, d lp_m = gp_g^T dPre_m (into fpre), d ls_m = dSuf_m gs_g^T (into fsuf), and
// d gp_g = sum dPre_m lp_m^T, d gs_g = sum ls_m^T dSuf_m (fdgp, fdgs). Four passes over the
// group's blocks (the sums first: they read dPre_m / dSuf_m before those are overwritten).
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_combine_backward_kernel(Params p) {
  const FoldAccSmem<D> s = FoldAccSmem<D>::here();
  constexpr int ld = kAccLd<D>;
  const int g = bid_x(), hk = bid_y(), b = bid_z(), m0 = group_first(p, g);
  const int m1 = m0 + group_size(p, g);
  for (int side = 0; side < 2; ++side) {  // 0: the prefix side, 1: the suffix side
    float* dmat = side == 0 ? p.fpre : p.fsuf;
    const float* part = side == 0 ? p.flp : p.fls;
    zero_acc<D>(s.acc);
    for (int m = m0; m < m1; ++m) {
      load_split<D>(s.a, mat_at<D>(dmat, p, b, hk, p.nb, m));
      load_split<D>(s.b, mat_at<D>(part, p, b, hk, p.nb, m));
      sync_cta();
      if (side == 0)  // d gp += dPre_m lp_m^T
        split_gemm(D, D, D, s.a, false, s.b, true,
                   [&](int r, int c, float v) { s.acc[r * ld + c] += v; });
      else  // d gs += ls_m^T dSuf_m
        split_gemm(D, D, D, s.b, true, s.a, false,
                   [&](int r, int c, float v) { s.acc[r * ld + c] += v; });
    }
    store_acc<D>(mat_at<D>(side == 0 ? p.fdgp : p.fdgs, p, b, hk, p.ng, g), s.acc);
    load_split<D>(s.b, mat_at<D>(side == 0 ? p.fgp : p.fgs, p, b, hk, p.ng, g));
    for (int m = m0; m < m1; ++m) {
      float* dm = mat_at<D>(dmat, p, b, hk, p.nb, m);
      load_split<D>(s.a, dm);
      sync_cta();
      if (side == 0)  // d lp_m = gp^T dPre_m
        split_gemm(D, D, D, s.b, true, s.a, false,
                   [&](int r, int c, float v) { dm[r * D + c] = v; });
      else  // d ls_m = dSuf_m gs^T
        split_gemm(D, D, D, s.a, false, s.b, true,
                   [&](int r, int c, float v) { dm[r * D + c] = v; });
    }
  }
}

// Per (KV head, batch): d gg_g from d gp, d gs and d P (fdgg, overwritten).
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_group_backward_kernel(Params p) {
  const FoldSmem<D> s = FoldSmem<D>::here();
  const int hk = bid_y(), b = bid_z();
  float* dgg = mat_at<D>(p.fdgg, p, b, hk, p.ng, 0);
  for (int e = tid(); e < p.ng * D * D; e += nthreads()) dgg[e] = 0.f;
  sync_cta();
  const GroupFactors<D> load{p, b, hk};
  auto add = [&](int i, int r, int c, float v) { dgg[(int64_t(i) * D + r) * D + c] += v; };
  const float* dp = p.dfold_p ? mat_at<D>(p.dfold_p, p, b, hk, 1, 0) : nullptr;
  if (dp == nullptr) {  // a zero d P: start the prefix pass from zeros held in dgg's last slot
    dp = dgg;           // (all zero here; the pass writes slot i only after reading dp)
  }
  chain_products_backward<D>(p.ng, load, mat_at<D>(p.fgp, p, b, hk, p.ng, 0),
                             mat_at<D>(p.fdgp, p, b, hk, p.ng, 0),
                             mat_at<D>(p.fgs, p, b, hk, p.ng, 0),
                             mat_at<D>(p.fdgs, p, b, hk, p.ng, 0), dp, add, s.a, s.b, s.c);
}

// Per (group g, KV head, batch): dP_m of the group's blocks from d lp, d ls and d gg_g,
// added to dpf.
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_local_backward_kernel(Params p) {
  const FoldSmem<D> s = FoldSmem<D>::here();
  const int g = bid_x(), hk = bid_y(), b = bid_z(), m0 = group_first(p, g);
  const BlockFactors<D> load{p, b, hk, m0};
  float* dpf = mat_at<D>(p.dpf, p, b, hk, p.nb, m0);
  auto add = [&](int i, int r, int c, float v) {
    atomic_add(&dpf[(int64_t(i) * D + r) * D + c], v);
  };
  chain_products_backward<D>(group_size(p, g), load, mat_at<D>(p.flp, p, b, hk, p.nb, m0),
                             mat_at<D>(p.fpre, p, b, hk, p.nb, m0),
                             mat_at<D>(p.fls, p, b, hk, p.nb, m0),
                             mat_at<D>(p.fsuf, p, b, hk, p.nb, m0),
                             mat_at<D>(p.fdgg, p, b, hk, p.ng, g), add, s.a, s.b, s.c);
}

// ---- The ring's side (path.hpp: carry, carry_backward, mat_products) ----
// Arguments of the carry kernels: y = M q per query head, M [B, Hkv, D, D] per KV head.
struct RingCarryArgs {
  int B = 0, L = 0, H = 0, Hkv = 0;
  const float* M = nullptr;   // [B, Hkv, D, D]
  const float* q = nullptr;   // [B, L, H, D]
  bf16* y = nullptr;          // [B, L, H, D]   (carry)
  const float* dy = nullptr;  // [B, L, H, D]   (carry_backward)
  float* dq = nullptr;        // [B, L, H, D]   added to
  float* dM = nullptr;        // [B, Hkv, D, D] added to (atomics across row tiles)
};

// The carry on the tensor cores (bf16 operands, fp32 accumulation): y is stored in bf16 and
// the backward's gradients feed bf16 attention gradients, so rounding M, q~ and dy to bf16
// once adds errors of the size those roundings already have. Each CTA takes kCarryTiles
// tiles of 64 rows (one load of M, one atomic add of dM per CTA).
constexpr int kCarryTiles = 4;

template <int D>
struct RingCarrySmem {
  bf16 *m, *x, *z;  // M: D x pad(D); x, z: 64 x pad(D) rows
  float* acc;       // backward: dM partial, D x (D + 1)
  static LCR_HD std::size_t carve(SmemCarver& c, RingCarrySmem* s, bool backward) {
    RingCarrySmem t;
    t.m = c.take<bf16>(std::size_t(D) * pad(D));
    t.x = c.take<bf16>(std::size_t(kBlk) * pad(D));
    t.z = backward ? c.take<bf16>(std::size_t(kBlk) * pad(D)) : nullptr;
    t.acc = backward ? c.take<float>(std::size_t(D) * kAccLd<D>) : nullptr;
    if (s) *s = t;
    return c.off;
  }
};

// Rows r0.. (64, zero past L) of head h of a [B, L, H, D] fp32 tensor, as bf16 into dst.
template <int D>
LCR_DEV void load_head_rows(bf16* dst, const float* x, int b, int L, int H, int h, int r0) {
  const int valid = L - r0 < kBlk ? L - r0 : kBlk;
  convert_tile(dst, pad(D), x + ((int64_t(b) * L + r0) * H + h) * D, int64_t(H) * D, kBlk, D,
               valid > 0 ? valid : 0);
}

// Per (kCarryTiles x 64 rows, query head, batch): y rows = q rows M^T.
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void ring_carry_kernel(RingCarryArgs a) {
  RingCarrySmem<D> s;
  SmemCarver carver{smem_base()};
  RingCarrySmem<D>::carve(carver, &s, false);
  const int h = bid_y(), b = bid_z(), hk = h / (a.H / a.Hkv);
  convert_tile(s.m, pad(D), a.M + (int64_t(b) * a.Hkv + hk) * D * D, D, D, D, D);
  for (int t = 0; t < kCarryTiles; ++t) {
    const int r0 = (bid_x() * kCarryTiles + t) * kBlk;
    if (r0 >= a.L) break;
    load_head_rows<D>(s.x, a.q, b, a.L, a.H, h, r0);
    sync_cta();
    cta_gemm(kBlk, D, D, op(s.x, pad(D)), op(s.m, pad(D), true), [&](int r, int c, float v) {
      if (r0 + r < a.L) a.y[((int64_t(b) * a.L + r0 + r) * a.H + h) * D + c] = __float2bfloat16(v);
    });
  }
}

// Per (kCarryTiles x 64 rows, KV head, batch): dq rows += dy rows M; dM += sum over the rows
// and the group's heads of dy^T q.
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void ring_carry_backward_kernel(RingCarryArgs a) {
  RingCarrySmem<D> s;
  SmemCarver carver{smem_base()};
  RingCarrySmem<D>::carve(carver, &s, true);
  constexpr int ld = kAccLd<D>;
  const int hk = bid_y(), b = bid_z(), G = a.H / a.Hkv;
  convert_tile(s.m, pad(D), a.M + (int64_t(b) * a.Hkv + hk) * D * D, D, D, D, D);
  for (int e = tid(); e < D * D; e += nthreads()) s.acc[(e / D) * ld + e % D] = 0.f;
  for (int t = 0; t < kCarryTiles; ++t) {
    const int r0 = (bid_x() * kCarryTiles + t) * kBlk;
    if (r0 >= a.L) break;
    for (int gi = 0; gi < G; ++gi) {
      const int h = hk * G + gi;
      load_head_rows<D>(s.x, a.dy, b, a.L, a.H, h, r0);
      load_head_rows<D>(s.z, a.q, b, a.L, a.H, h, r0);
      sync_cta();
      cta_gemm(kBlk, D, D, op(s.x, pad(D)), op(s.m, pad(D)), [&](int r, int c, float v) {
        if (r0 + r < a.L) atomic_add(&a.dq[((int64_t(b) * a.L + r0 + r) * a.H + h) * D + c], v);
      });
      cta_gemm(D, D, kBlk, op(s.x, pad(D), true), op(s.z, pad(D)),
               [&](int r, int c, float v) { s.acc[r * ld + c] += v; });
    }
  }
  float* dM = a.dM + (int64_t(b) * a.Hkv + hk) * D * D;
  for (int e = tid(); e < D * D; e += nthreads()) atomic_add(dM + e, s.acc[(e / D) * ld + e % D]);
}

// Per matrix i of a batch: C_i = op(A_i) op(B_i) (accumulate: C_i += ...); dense D x D fp32.
struct MatProductArgs {
  const float* A = nullptr;
  const float* B = nullptr;
  float* C = nullptr;
  bool ta = false, tb = false, accumulate = false;
};

template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void mat_product_kernel(MatProductArgs a) {
  const FoldSmem<D> s = FoldSmem<D>::here();
  const int64_t off = int64_t(bid_x()) * D * D;
  float* C = a.C + off;
  load_split<D>(s.a, a.A + off);
  load_split<D>(s.b, a.B + off);
  sync_cta();
  split_gemm(D, D, D, s.a, a.ta, s.b, a.tb,
             [&](int r, int c, float v) { C[r * D + c] = a.accumulate ? C[r * D + c] + v : v; });
}

}  // namespace lcr::cuda::LCR_PATHK
