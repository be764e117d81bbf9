// PaTH backward: the cross-block part query block by query block (steps 1-4 in
// scan.hpp), then block_backward for everything inside blocks.
#include "kernels/schemes/path/blocks.hpp"
#include "kernels/schemes/path/logit.hpp"
#include "kernels/schemes/path/scan.hpp"
#include "kernels/schemes/path/team_la.hpp"

namespace lcr::path {
// Helpers sit in a named namespace, not an anonymous one: nvcc's rules for extended
// (device) lambdas are simplest to meet in functions with external linkage.
namespace scan_bwd_detail {

using la::Member;
using la::N;
using la::Tr;

// Work space of the cross-block backward, reused by every query block.
template <class T>
struct CrossState {
  View5<T> xs;       // [B, H, nb, block, d]: x^(c) of the current query block's rows
  View5<T> rs;       // [B, H, nb, block, d]: r^(c), then g^(c) in place
  View4<T> rsum;     // [B, H, nb, block]: FoX, sum_j dx_ij over key block c
  View4<T> dk_fold;  // [B, L, Hkv, d]
  View4<T> dq_fold;  // [B, L, H, d]
  View5<T> dp;       // [B, Hkv, nb, d, d]
  View5<T> pt;       // [B, Hkv, nb, d, d]: P_c^T (the carry reads it row by row)
};

// Step 2, team (b, KV head, key block c < qa): the softmax gradient between the query
// block qa (carried to block c's right end) and key block c.
template <class T>
struct CrossKeys {
  PathArgs<T> a;
  BlockState<T> st;
  CrossState<T> cs;
  View3<const T> lse, delta;
  View4<const T> dout;
  View4<T> dv;
  View3<T> dfox_k;
  int qa, nq, H, Hkv, d, dv_dim, level;
  bool has_fox;

  static size_t scratch_bytes(int n, int d, int dv) {
    return 3 * Scratch2<T>::shmem_size(n, d) + 3 * Scratch2<T>::shmem_size(n, dv) +
           2 * Scratch2<T>::shmem_size(n, n) + 3 * Scratch1<T>::shmem_size(n);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int blk = st.block, c = t.league_rank() % qa, bh = t.league_rank() / qa;
    const int hk = bh % Hkv, b = bh / Hkv, G = H / Hkv, sq = qa * blk, sk = c * blk;
    const auto lv = level;
    // Keys and values also transposed, so every product below runs in axpy form.
    Scratch2<T> Kf(t.team_scratch(lv), blk, d), dKf(t.team_scratch(lv), blk, d);
    Scratch2<T> KfT(t.team_scratch(lv), d, blk), VT(t.team_scratch(lv), dv_dim, blk);
    Scratch2<T> dV(t.team_scratch(lv), blk, dv_dim);
    Scratch2<T> dO(t.team_scratch(lv), blk, dv_dim);
    Scratch2<T> S(t.team_scratch(lv), blk, blk), Gx(t.team_scratch(lv), blk, blk);
    Scratch1<T> lse_s(t.team_scratch(lv), blk), del_s(t.team_scratch(lv), blk);
    Scratch1<T> fq(t.team_scratch(lv), blk);
    const Logit<T> logit{a.scale, a.softcap};
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, blk), [&](int j) {
      for (int x = 0; x < d; ++x) {
        Kf(j, x) = KfT(x, j) = st.k_fold(b, sk + j, hk, x);
        dKf(j, x) = T(0);
      }
      for (int x = 0; x < dv_dim; ++x) {
        VT(x, j) = a.v(b, sk + j, hk, x);
        dV(j, x) = T(0);
      }
    });
    for (int gi = 0; gi < G; ++gi) {
      const int h = hk * G + gi;
      auto X = Kokkos::subview(cs.xs, b, h, c, Kokkos::ALL, Kokkos::ALL);
      auto R = Kokkos::subview(cs.rs, b, h, c, Kokkos::ALL, Kokkos::ALL);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int i) {
        for (int x = 0; x < dv_dim; ++x) dO(i, x) = dout(b, sq + i, h, x);
        lse_s(i) = lse(b, h, sq + i);
        del_s(i) = delta(b, h, sq + i);
        fq(i) = has_fox ? a.fox_q(b, sq + i, h) : T(0);
      });
      t.team_barrier();
      la::gemm(t, N, N, nq, blk, d, T(1), X, KfT, T(0), S);        // raw logits
      la::gemm(t, N, N, nq, blk, dv_dim, T(1), dO, VT, T(0), Gx);  // dO V^T
      // Per row, in contiguous passes: s, then (dP - delta) ds/dx, then P, then dS.
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int i) {
        T* KOKKOS_RESTRICT srow = &S(i, 0);
        T* KOKKOS_RESTRICT grow = &Gx(i, 0);
        if (has_fox) {
          for (int j = 0; j < blk; ++j) srow[j] = logit(srow[j], fq(i), a.fox_k(b, sk + j, h));
        } else {
          for (int j = 0; j < blk; ++j) srow[j] = logit(srow[j], T(0), T(0));
        }
        for (int j = 0; j < blk; ++j) grow[j] = (grow[j] - del_s(i)) * logit.dcap(srow[j]);
        for (int j = 0; j < blk; ++j) srow[j] -= lse_s(i);
        tile::exp_or_zero(srow, blk);
        for (int j = 0; j < blk; ++j) grow[j] *= srow[j];
        if (has_fox) {
          T rowsum = T(0);
          for (int j = 0; j < blk; ++j) rowsum += grow[j];
          cs.rsum(b, h, c, i) = rowsum;
        }
      });
      t.team_barrier();
      if (has_fox) {
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, blk), [&](int j) {
          T colsum = T(0);
          for (int i = 0; i < nq; ++i) colsum += Gx(i, j);
          dfox_k(b, sk + j, h) -= colsum;
        });
      }
      la::gemm(t, Tr, N, blk, dv_dim, nq, T(1), S, dO, T(1), dV);  // dV += P^T dO
      la::gemm(t, Tr, N, blk, d, nq, a.scale, Gx, X, T(1), dKf);   // dk~ += G^T x
      la::gemm(t, N, N, nq, d, blk, a.scale, Gx, Kf, T(0), R);     // r = G k~
    }
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, blk), [&](int j) {
      for (int x = 0; x < d; ++x) cs.dk_fold(b, sk + j, hk, x) += dKf(j, x);
      for (int x = 0; x < dv_dim; ++x) dv(b, sk + j, hk, x) += dV(j, x);
    });
  }
};

// Steps 1 and 3, team (b, query head, chunk of kCarryRows rows of the query block), as
// team GEMMs over the chunk's rows: the carry X^(c-1) = X^(c) P_c^T (x <- P_c x), or its
// adjoint G^(c) += G^(c-1) P_c (g <- r + P_c^T g), then dq~ = g^(qa-1) and the FoX row sums.
constexpr int kCarryRows = 16;

template <class T>
struct Carry {
  BlockState<T> st;
  CrossState<T> cs;
  View4<const T> q_fold;
  View3<T> dfox_q;
  int qa, nq, sq, H, Hkv, d;
  bool adjoint, has_fox;

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int nchunk = (nq + kCarryRows - 1) / kCarryRows;
    const int ch = t.league_rank() % nchunk, bh = t.league_rank() / nchunk;
    const int h = bh % H, b = bh / H, hk = h / (H / Hkv), i0 = ch * kCarryRows;
    const int nr = nq - i0 < kCarryRows ? nq - i0 : kCarryRows;
    const auto rows = Kokkos::make_pair(i0, i0 + nr);
    if (!adjoint) {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nr), [&](int i) {
        for (int x = 0; x < d; ++x) cs.xs(b, h, qa - 1, i0 + i, x) = q_fold(b, sq + i0 + i, h, x);
      });
      t.team_barrier();
      for (int c = qa - 1; c >= 1; --c)
        la::gemm(t, N, N, nr, d, d, T(1), Kokkos::subview(cs.xs, b, h, c, rows, Kokkos::ALL),
                 Kokkos::subview(cs.pt, b, hk, c, Kokkos::ALL, Kokkos::ALL), T(0),
                 Kokkos::subview(cs.xs, b, h, c - 1, rows, Kokkos::ALL));
      return;
    }
    for (int c = 1; c < qa; ++c)
      la::gemm(t, N, N, nr, d, d, T(1), Kokkos::subview(cs.rs, b, h, c - 1, rows, Kokkos::ALL),
               Kokkos::subview(st.p, b, hk, c, Kokkos::ALL, Kokkos::ALL), T(1),
               Kokkos::subview(cs.rs, b, h, c, rows, Kokkos::ALL));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nr), [&](int i) {
      for (int x = 0; x < d; ++x) cs.dq_fold(b, sq + i0 + i, h, x) = cs.rs(b, h, qa - 1, i0 + i, x);
      if (!has_fox) return;
      T sum = T(0);
      for (int c = 0; c < qa; ++c) sum += cs.rsum(b, h, c, i0 + i);
      dfox_q(b, sq + i0 + i, h) += sum;
    });
  }
};

// Step 4, team (b, KV head, block c in 1..qa-1): dP_c += sum_h sum_i g_i^(c-1) x_i^(c)^T.
template <class T>
struct CrossTransitions {
  CrossState<T> cs;
  int qa, nq, H, Hkv, d, level;

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int c = 1 + t.league_rank() % (qa - 1), bh = t.league_rank() / (qa - 1);
    const int hk = bh % Hkv, b = bh / Hkv, G = H / Hkv;
    auto dP = Kokkos::subview(cs.dp, b, hk, c, Kokkos::ALL, Kokkos::ALL);
    for (int gi = 0; gi < G; ++gi) {
      const int h = hk * G + gi;
      auto Rg = Kokkos::subview(cs.rs, b, h, c - 1, Kokkos::ALL, Kokkos::ALL);
      auto X = Kokkos::subview(cs.xs, b, h, c, Kokkos::ALL, Kokkos::ALL);
      la::gemm(t, Tr, N, d, d, nq, T(1), Rg, X, T(1), dP);
    }
  }
};

template <class T>
void cross_backward(const PathArgs<T>& a, const BlockState<T>& st, const View4<const T>& q_fold,
                    const View3<const T>& lse, const View3<const T>& delta,
                    const View4<const T>& dout, const View4<T>& dv, const View3<T>& dfox_q,
                    const View3<T>& dfox_k, const CrossState<T>& cs) {
  const int B = a.q.extent(0), L = a.q.extent(1), H = a.q.extent(2), d = a.q.extent(3);
  const int Hkv = a.k.extent(2), dvd = a.v.extent(3), blk = st.block;
  const bool has_fox = a.fox_q.extent(0) > 0;
  const size_t bytes = CrossKeys<T>::scratch_bytes(blk, d, dvd);
  const int level = scratch_level(bytes);
  for (int qa = 1; qa < st.nb; ++qa) {
    const int sq = qa * blk, nq = L - sq < blk ? L - sq : blk;
    // 1. carry the queries leftwards, storing x^(c) for c = qa-1 .. 0
    const int nchunk = (nq + kCarryRows - 1) / kCarryRows;
    Carry<T> carry{st, cs, q_fold, dfox_q, qa, nq, sq, H, Hkv, d, false, has_fox};
    Kokkos::parallel_for("lcr::path_bwd_carry", la::TeamPolicy(B * H * nchunk, Kokkos::AUTO),
                         carry);
    // 2. softmax gradients per key block
    CrossKeys<T> ck{a,  st, cs, lse, delta, dout, dv,    dfox_k,
                    qa, nq, H,  Hkv, d,     dvd,  level, has_fox};
    la::TeamPolicy kp(B * Hkv * qa, Kokkos::AUTO);
    kp.set_scratch_size(level, Kokkos::PerTeam(bytes));
    Kokkos::parallel_for("lcr::path_bwd_keys", kp, ck);
    // 3. the adjoint of the carried queries, left to right: g^(c) = r^(c) + P_c^T g^(c-1)
    carry.adjoint = true;
    Kokkos::parallel_for("lcr::path_bwd_adjoint", la::TeamPolicy(B * H * nchunk, Kokkos::AUTO),
                         carry);
    // 4. transition gradients
    if (qa > 1) {
      CrossTransitions<T> ct{cs, qa, nq, H, Hkv, d, 0};
      Kokkos::parallel_for("lcr::path_bwd_transitions",
                           la::TeamPolicy(B * Hkv * (qa - 1), Kokkos::AUTO), ct);
    }
  }
}

}  // namespace scan_bwd_detail

using namespace scan_bwd_detail;

template <class T>
void path_backward(const PathArgs<T>& a, const View3<const T>& lse, const View3<const T>& delta,
                   const View4<const T>& dout, const View4<T>& dq, const View4<T>& dk,
                   const View4<T>& dv, const View4<T>& dw, const View3<T>& dbeta,
                   const View3<T>& dfox_q, const View3<T>& dfox_k) {
  const int B = a.q.extent(0), L = a.q.extent(1), H = a.q.extent(2), d = a.q.extent(3);
  const int Hkv = a.k.extent(2);
  const bool has_fox = a.fox_q.extent(0) > 0;
  for (const auto& g : {dq, dk, dv, dw}) Kokkos::deep_copy(g, T(0));
  Kokkos::deep_copy(dbeta, T(0));
  if (has_fox) {
    Kokkos::deep_copy(dfox_q, T(0));
    Kokkos::deep_copy(dfox_k, T(0));
  }
  if (B == 0 || L == 0 || H == 0) return;
  const BlockState<T> st = block_forward<T>(a.w, a.beta, a.k, a.block);
  View4<T> q_fold("lcr::path_q_fold", B, L, H, d);
  block_fold_queries<T>(st, a.w, a.q, q_fold);

  CrossState<T> cs;
  cs.xs = View5<T>("lcr::path_bwd_x", B, H, st.nb, a.block, d);
  cs.rs = View5<T>("lcr::path_bwd_g", B, H, st.nb, a.block, d);
  cs.rsum = View4<T>("lcr::path_bwd_rowsum", has_fox ? B : 0, H, st.nb, a.block);
  cs.dk_fold = View4<T>("lcr::path_dk_fold", B, L, Hkv, d);
  cs.dq_fold = View4<T>("lcr::path_dq_fold", B, L, H, d);
  cs.dp = View5<T>("lcr::path_dp", B, Hkv, st.nb, d, d);
  cs.pt = View5<T>("lcr::path_pt", B, Hkv, st.nb, d, d);
  const View5<T> p = st.p, pt = cs.pt;
  Kokkos::parallel_for(
      "lcr::path_bwd_transpose",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<4>>({0, 0, 0, 0}, {B, Hkv, st.nb, d}),
      KOKKOS_LAMBDA(int b, int h, int m, int r) {
        for (int c = 0; c < d; ++c) pt(b, h, m, c, r) = p(b, h, m, r, c);
      });
  cross_backward<T>(a, st, q_fold, lse, delta, dout, dv, dfox_q, dfox_k, cs);

  BlockAttention<T> att;
  att.v = a.v;
  att.dout = dout;
  att.lse = lse;
  att.delta = delta;
  att.fox_q = a.fox_q;
  att.fox_k = a.fox_k;
  att.dfox_q = dfox_q;
  att.dfox_k = dfox_k;
  att.dv = dv;
  att.scale = a.scale;
  att.softcap = a.softcap;
  BlockGrads<T> g{cs.dq_fold, cs.dk_fold, cs.dp, dq, dk, dw, dbeta};
  block_backward<T>(a.w, a.beta, a.q, a.k, a.block, att, g);
}

#define LCR_INSTANTIATE(T)                                                                         \
  template void path_backward<T>(const PathArgs<T>&, const View3<const T>&, const View3<const T>&, \
                                 const View4<const T>&, const View4<T>&, const View4<T>&,          \
                                 const View4<T>&, const View4<T>&, const View3<T>&,                \
                                 const View3<T>&, const View3<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr::path
