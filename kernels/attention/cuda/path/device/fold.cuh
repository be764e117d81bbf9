#pragma once
// A span's boundary quantities for the context-parallel ring (path.hpp: Folds / FoldGrads;
// DESIGN.md section 5), from what prep computes per fine block m (P_m in pf, q~ in qf, k~ in
// kf):
//   Pre_m = P_0 ... P_{m-1},   Suf_m = P_{m+1} ... P_{nb-1},   P = P_0 ... P_{nb-1}
//   q_fold_i = Pre_m q~_i   (query i of block m folded to the span's left end)
//   k_fold_j = Suf_m^T k~_j (key j of block m folded to the span's right end)
// The products are fp32 on the CUDA cores: they are chains of up to nb factors, and bf16
// storage between factors would add its rounding nb times. Two levels keep the sequential
// depth at rg + nb / rg (rg, the group size, about sqrt(nb)):
//   lp_m / ls_m = exclusive prefix / suffix products inside block m's group g (fold_local),
//   gg_g = the group's product, gp_g / gs_g = exclusive prefix / suffix of the gg (fold_group),
//   Pre_m = gp_g lp_m, Suf_m = ls_m gs_g (fold_combine).
// Backward: the same chains in reverse mode. d q_fold and d k_fold give d q~ and d k~ (added
// to dqf / dkf) and dPre_m, dSuf_m; those run back through the two levels into dP_m (added to
// dpf), which block_backward turns into dq, dk, dw, dbeta with the attention's own share.
//
// Matrices are D x D fp32, row-major, dense in global memory ([B, Hkv, count, D, D]) and with
// leading dimension D + 1 in shared memory (no bank conflicts on transposed reads).
#include "kernels/attention/cuda/path/device/tile.cuh"

namespace lcr::cuda::LCR_PATHK {

// Element (r, c) of op(X): p[r * ld + c], or p[c * ld + r] when transposed; fp32 or bf16.
template <class T>
struct MatOp {
  const T* p;
  int ld;
  bool t;
  LCR_DEV float at(int r, int c) const {
    const T x = t ? p[int64_t(c) * ld + r] : p[int64_t(r) * ld + c];
    if constexpr (sizeof(T) == 2)
      return to_f(x);
    else
      return x;
  }
};
template <class T>
LCR_DEV MatOp<T> mat(const T* p, int ld, bool t = false) {
  return MatOp<T>{p, ld, t};
}

// C[M x N] = op(A)[M x K] op(B)[K x N] in fp32, 256 threads as 16 x 16 owners of interleaved
// (M/16) x (N/16) element sets. epi(r, c, v) runs for every element after a barrier (so it
// may overwrite an operand), followed by another barrier.
template <int M, int N, class TA, class TB, class Epi>
LCR_DEV void f32_gemm(int K, MatOp<TA> A, MatOp<TB> B, Epi&& epi) {
  constexpr int TM = M / 16, TN = N / 16;
  const int tr = tid() / 16, tc = tid() % 16;
  float acc[TM][TN];
  LCR_UNROLL
  for (int i = 0; i < TM; ++i) LCR_UNROLL
  for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  for (int k = 0; k < K; ++k) {
    float a[TM], b[TN];
    LCR_UNROLL
    for (int i = 0; i < TM; ++i) a[i] = A.at(tr + 16 * i, k);
    LCR_UNROLL
    for (int j = 0; j < TN; ++j) b[j] = B.at(k, tc + 16 * j);
    LCR_UNROLL
    for (int i = 0; i < TM; ++i) LCR_UNROLL
    for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
  }
  sync_cta();
  LCR_UNROLL
  for (int i = 0; i < TM; ++i) LCR_UNROLL
  for (int j = 0; j < TN; ++j) epi(tr + 16 * i, tc + 16 * j, acc[i][j]);
  sync_cta();
}

template <int D>
constexpr int kMatLd = D + 1;
template <int D>
constexpr std::size_t kMatBytes = std::size_t(D) * (D + 1) * sizeof(float);

template <int D>
LCR_DEV void set_identity(float* m) {
  for (int e = tid(); e < D * D; e += nthreads()) m[(e / D) * kMatLd<D> + e % D] = e / D == e % D;
}
template <int D, class T>
LCR_DEV void load_mat(float* dst, const T* src) {  // dense global -> shared
  for (int e = tid(); e < D * D; e += nthreads()) {
    if constexpr (sizeof(T) == 2)
      dst[(e / D) * kMatLd<D> + e % D] = to_f(src[e]);
    else
      dst[(e / D) * kMatLd<D> + e % D] = src[e];
  }
}
template <int D>
LCR_DEV void store_mat(float* dst, const float* src) {  // shared -> dense global
  for (int e = tid(); e < D * D; e += nthreads()) dst[e] = src[(e / D) * kMatLd<D> + e % D];
}

// Matrix i of a [B, Hkv, count, D, D] array for (b, hk).
template <int D, class T>
LCR_DEV T* mat_at(T* base, const Params& p, int b, int hk, int count, int i) {
  return base + ((int64_t(b) * p.Hkv + hk) * count + i) * D * D;
}

// Exclusive prefix and suffix products of X(0) ... X(n-1) (load(i, smem) fills X(i)):
// pre(i) = X(0) ... X(i-1) and suf(i) = X(i+1) ... X(n-1) to global memory; the total
// X(0) ... X(n-1) to total. cur and x: shared matrices.
template <int D, class Load>
LCR_DEV void chain_products(int n, Load load, float* pre, float* suf, float* total, float* cur,
                            float* x) {
  constexpr int ld = kMatLd<D>;
  set_identity<D>(cur);
  for (int i = 0; i < n; ++i) {
    store_mat<D>(pre + int64_t(i) * D * D, cur);
    load(i, x);
    sync_cta();
    f32_gemm<D, D>(D, mat(cur, ld), mat(x, ld),
                   [&](int r, int c, float v) { cur[r * ld + c] = v; });
  }
  store_mat<D>(total, cur);
  sync_cta();
  set_identity<D>(cur);
  for (int i = n - 1; i >= 0; --i) {
    store_mat<D>(suf + int64_t(i) * D * D, cur);
    load(i, x);
    sync_cta();
    f32_gemm<D, D>(D, mat(x, ld), mat(cur, ld),
                   [&](int r, int c, float v) { cur[r * ld + c] = v; });
  }
  sync_cta();
}

// Reverse mode of chain_products: given d pre(i), d suf(i) (dense global, null = zero) and
// d total, calls add_dx(i, r, c, v) with every contribution to d X(i) (two per element:
// the prefix pass, then the suffix pass). acc and x: shared matrices.
template <int D, class Load, class AddDx>
LCR_DEV void chain_products_backward(int n, Load load, const float* pre, const float* dpre,
                                     const float* suf, const float* dsuf, const float* dtotal,
                                     AddDx add_dx, float* acc, float* x) {
  constexpr int ld = kMatLd<D>, DD = D * D;
  // Prefix: pre(i+1) = pre(i) X(i), total = pre(n). acc = d pre(i+1) going down.
  load_mat<D>(acc, dtotal);
  for (int i = n - 1; i >= 0; --i) {
    load(i, x);
    sync_cta();
    f32_gemm<D, D>(D, mat(pre + int64_t(i) * DD, D, true), mat(acc, ld),
                   [&](int r, int c, float v) { add_dx(i, r, c, v); });
    const float* dp = dpre ? dpre + int64_t(i) * DD : nullptr;
    f32_gemm<D, D>(D, mat(acc, ld), mat(x, ld, true), [&](int r, int c, float v) {
      acc[r * ld + c] = v + (dp ? dp[r * D + c] : 0.f);
    });
  }
  // Suffix: suf(i-1) = X(i) suf(i), suf(n-1) = I. acc = d suf(i-1) going up.
  if (dsuf == nullptr) return;
  load_mat<D>(acc, dsuf);
  for (int i = 1; i < n; ++i) {
    load(i, x);
    sync_cta();
    f32_gemm<D, D>(D, mat(acc, ld), mat(suf + int64_t(i) * DD, D, true),
                   [&](int r, int c, float v) { add_dx(i, r, c, v); });
    const float* ds = dsuf + int64_t(i) * DD;
    f32_gemm<D, D>(D, mat(x, ld, true), mat(acc, ld),
                   [&](int r, int c, float v) { acc[r * ld + c] = v + ds[r * D + c]; });
  }
}

template <int D>
struct FoldSmem {  // two shared matrices
  float *a, *b;
  static LCR_HD std::size_t carve(SmemCarver& c, FoldSmem* s) {
    FoldSmem t;
    t.a = c.take<float>(std::size_t(D) * kMatLd<D>);
    t.b = c.take<float>(std::size_t(D) * kMatLd<D>);
    if (s) *s = t;
    return c.off;
  }
  static LCR_DEV FoldSmem here() {  // the running block's
    FoldSmem s;
    SmemCarver c{smem_base()};
    carve(c, &s);
    return s;
  }
};

// Loads of the chains' factors into shared memory: a group's block transitions P_m (bf16
// pf, from block m0) or the group products gg (fp32).
template <int D>
struct BlockFactors {
  const Params& p;
  int b, hk, m0;
  LCR_DEV void operator()(int i, float* x) const {
    load_mat<D>(x, mat_at<D>(p.pf, p, b, hk, p.nb, m0 + i));
  }
};
template <int D>
struct GroupFactors {
  const Params& p;
  int b, hk;
  LCR_DEV void operator()(int i, float* x) const {
    load_mat<D>(x, mat_at<D>(p.fgg, p, b, hk, p.ng, i));
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
                    s.b);
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
                    s.b);
}

// Per (block m, KV head, batch): Pre_m = gp_g lp_m, Suf_m = ls_m gs_g (operands from global).
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_combine_kernel(Params p) {
  const int m = bid_x(), hk = bid_y(), b = bid_z(), g = m / p.rg;
  float* pre = mat_at<D>(p.fpre, p, b, hk, p.nb, m);
  float* suf = mat_at<D>(p.fsuf, p, b, hk, p.nb, m);
  f32_gemm<D, D>(D, mat(mat_at<D>(p.fgp, p, b, hk, p.ng, g), D),
                 mat(mat_at<D>(p.flp, p, b, hk, p.nb, m), D),
                 [&](int r, int c, float v) { pre[r * D + c] = v; });
  f32_gemm<D, D>(D, mat(mat_at<D>(p.fls, p, b, hk, p.nb, m), D),
                 mat(mat_at<D>(p.fgs, p, b, hk, p.ng, g), D),
                 [&](int r, int c, float v) { suf[r * D + c] = v; });
}

// Per (block m, head y, batch), y < H a query head, else KV head y - H:
//   q_fold rows = qf rows Pre_m^T (row form of Pre_m q~), k_fold rows = kf rows Suf_m.
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_apply_kernel(Params p) {
  const int m = bid_x(), y = bid_y(), b = bid_z(), s0 = m * kBlk;
  if (y < p.H) {
    const int h = y, hk = h / p.G();
    const float* qf = p.qf + ((int64_t(b) * p.H + h) * p.Lp + s0) * D;
    f32_gemm<kBlk, D>(D, mat(qf, D), mat(mat_at<D>(p.fpre, p, b, hk, p.nb, m), D, true),
                      [&](int r, int c, float v) {
                        if (s0 + r < p.L)
                          p.fold_q[((int64_t(b) * p.L + s0 + r) * p.H + h) * D + c] = v;
                      });
  } else {
    const int hk = y - p.H;
    const bf16* kf = p.kf + ((int64_t(b) * p.Hkv + hk) * p.Lp + s0) * D;
    f32_gemm<kBlk, D>(
        D, mat(kf, D), mat(mat_at<D>(p.fsuf, p, b, hk, p.nb, m), D), [&](int r, int c, float v) {
          if (s0 + r < p.L)
            p.fold_k[((int64_t(b) * p.L + s0 + r) * p.Hkv + hk) * D + c] = __float2bfloat16(v);
        });
  }
}

template <int D>
struct FoldApplyBwdSmem {
  float *g, *acc;  // g: 64 rows x (D + 1), acc: one matrix
  static LCR_HD std::size_t carve(SmemCarver& c, FoldApplyBwdSmem* s) {
    FoldApplyBwdSmem t;
    t.g = c.take<float>(std::size_t(kBlk) * kMatLd<D>);
    t.acc = c.take<float>(std::size_t(D) * kMatLd<D>);
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
  constexpr int ld = kMatLd<D>;
  const int m = bid_x(), hk = bid_y(), b = bid_z(), s0 = m * kBlk;
  float* pre = mat_at<D>(p.fpre, p, b, hk, p.nb, m);
  float* suf = mat_at<D>(p.fsuf, p, b, hk, p.nb, m);
  // Loads rows s0.. of a [B, L, heads, D] fp32 tensor's head `h` into s.g (zero past L).
  auto load_rows = [&](const float* x, int heads, int h) {
    for (int e = tid(); e < kBlk * D; e += nthreads()) {
      const int r = e / D, c = e % D;
      s.g[r * ld + c] = s0 + r < p.L ? x[((int64_t(b) * p.L + s0 + r) * heads + h) * D + c] : 0.f;
    }
    sync_cta();
  };
  for (int e = tid(); e < D * D; e += nthreads()) s.acc[(e / D) * ld + e % D] = 0.f;
  for (int gi = 0; gi < p.G() && p.dfold_q; ++gi) {
    const int h = hk * p.G() + gi;
    load_rows(p.dfold_q, p.H, h);
    float* dqf = p.dqf + ((int64_t(b) * p.H + h) * p.Lp + s0) * D;
    f32_gemm<kBlk, D>(D, mat(s.g, ld), mat(pre, D),
                      [&](int r, int c, float v) { dqf[r * D + c] += v; });
    const float* qf = p.qf + ((int64_t(b) * p.H + h) * p.Lp + s0) * D;
    f32_gemm<D, D>(kBlk, mat(s.g, ld, true), mat(qf, D),
                   [&](int r, int c, float v) { s.acc[r * ld + c] += v; });
  }
  store_mat<D>(pre, s.acc);
  sync_cta();
  if (p.dfold_k) {
    load_rows(p.dfold_k, p.Hkv, hk);
    float* dkf = p.dkf + ((int64_t(b) * p.Hkv + hk) * p.Lp + s0) * D;
    f32_gemm<kBlk, D>(D, mat(s.g, ld), mat(suf, D, true),
                      [&](int r, int c, float v) { dkf[r * D + c] += v; });
    const bf16* kf = p.kf + ((int64_t(b) * p.Hkv + hk) * p.Lp + s0) * D;
    f32_gemm<D, D>(kBlk, mat(kf, D, true), mat(s.g, ld),
                   [&](int r, int c, float v) { suf[r * D + c] = v; });
  } else {
    for (int e = tid(); e < D * D; e += nthreads()) suf[e] = 0.f;
  }
}

// Per (group g, KV head, batch): from dPre_m (in fpre) and dSuf_m (in fsuf) of the group's
// blocks, d lp_m = gp_g^T dPre_m (into fpre), d ls_m = dSuf_m gs_g^T (into fsuf), and
// d gp_g = sum dPre_m lp_m^T, d gs_g = sum ls_m^T dSuf_m (fdgp, fdgs).
template <int D>
LCR_KERNEL_BOUNDS(256, 1)
void fold_combine_backward_kernel(Params p) {
  const FoldSmem<D> s = FoldSmem<D>::here();
  constexpr int ld = kMatLd<D>;
  const int g = bid_x(), hk = bid_y(), b = bid_z(), m0 = group_first(p, g);
  const float* gp = mat_at<D>(p.fgp, p, b, hk, p.ng, g);
  const float* gs = mat_at<D>(p.fgs, p, b, hk, p.ng, g);
  for (int e = tid(); e < D * D; e += nthreads())
    s.a[(e / D) * ld + e % D] = s.b[(e / D) * ld + e % D] = 0.f;
  sync_cta();
  for (int m = m0; m < m0 + group_size(p, g); ++m) {
    float* dpre = mat_at<D>(p.fpre, p, b, hk, p.nb, m);
    float* dsuf = mat_at<D>(p.fsuf, p, b, hk, p.nb, m);
    f32_gemm<D, D>(D, mat(dpre, D), mat(mat_at<D>(p.flp, p, b, hk, p.nb, m), D, true),
                   [&](int r, int c, float v) { s.a[r * ld + c] += v; });
    f32_gemm<D, D>(D, mat(gp, D, true), mat(dpre, D),
                   [&](int r, int c, float v) { dpre[r * D + c] = v; });
    f32_gemm<D, D>(D, mat(mat_at<D>(p.fls, p, b, hk, p.nb, m), D, true), mat(dsuf, D),
                   [&](int r, int c, float v) { s.b[r * ld + c] += v; });
    f32_gemm<D, D>(D, mat(dsuf, D), mat(gs, D, true),
                   [&](int r, int c, float v) { dsuf[r * D + c] = v; });
  }
  store_mat<D>(mat_at<D>(p.fdgp, p, b, hk, p.ng, g), s.a);
  store_mat<D>(mat_at<D>(p.fdgs, p, b, hk, p.ng, g), s.b);
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
  chain_products_backward<D>(
      p.ng, load, mat_at<D>(p.fgp, p, b, hk, p.ng, 0), mat_at<D>(p.fdgp, p, b, hk, p.ng, 0),
      mat_at<D>(p.fgs, p, b, hk, p.ng, 0), mat_at<D>(p.fdgs, p, b, hk, p.ng, 0), dp, add, s.a, s.b);
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
  auto add = [&](int i, int r, int c, float v) { dpf[(int64_t(i) * D + r) * D + c] += v; };
  chain_products_backward<D>(
      group_size(p, g), load, mat_at<D>(p.flp, p, b, hk, p.nb, m0),
      mat_at<D>(p.fpre, p, b, hk, p.nb, m0), mat_at<D>(p.fls, p, b, hk, p.nb, m0),
      mat_at<D>(p.fsuf, p, b, hk, p.nb, m0), mat_at<D>(p.fdgg, p, b, hk, p.ng, g), add, s.a, s.b);
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
    t.acc = backward ? c.take<float>(std::size_t(D) * kMatLd<D>) : nullptr;
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
  constexpr int ld = kMatLd<D>;
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
        if (r0 + r < a.L) a.dq[((int64_t(b) * a.L + r0 + r) * a.H + h) * D + c] += v;
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
  const int64_t off = int64_t(bid_x()) * D * D;
  float* C = a.C + off;
  f32_gemm<D, D>(D, mat(a.A + off, D, a.ta), mat(a.B + off, D, a.tb), [&](int r, int c, float v) {
    C[r * D + c] = a.accumulate ? C[r * D + c] + v : v;
  });
}

}  // namespace lcr::cuda::LCR_PATHK
