#pragma once
// The SDPA backward in the form a GPU team runs (tile::kGpuLayout), in the register style of
// the forward (sdpa_forward_gpu.hpp): each thread owns a fixed block of the gradients it
// accumulates and keeps it in registers for the team's life; operand tiles pass through
// level-0 scratch, read as vectors of 4 (or SC) consecutive elements. Two kernels, no
// atomics, as in the CPU form:
//   dK/dV team (4 RG keys, fixed):   per query tile of 8 SC queries,
//       S^T = K Q^T, dP^T = V dO^T (registers: 4 keys x SC queries a thread)
//       -> P^T, dS^T -> scratch -> dV += P^T dO, dK += dS^T Q (registers)
//   dQ team (4 RG queries, fixed):   per key tile of 8 SC keys,
//       S = Q K^T, dP = dO V^T (registers) -> dS -> scratch -> dQ += dS K (registers)
// Thread (ty, tx), ty < RG, tx < 8, owns rows 4 ty .. 4 ty + 3 of its fixed side, columns
// SC tx .. SC tx + SC - 1 of the walked side, and gradient columns 32 c + 4 tx + (0..3),
// c < NC. Gradient widths above 32 NC run in column passes (league entries of their own),
// each recomputing S and dP. The softmax-backward elements run with scale 1 and the
// products' sums are scaled once at the end, so the bias lanes' sums are over dS itself.
#include "kernels/attention/kokkos/sdpa_team.hpp"

namespace lcr::sdpa_detail {

// s[i][j] = sum_{k < n} A[k * lda + 4 ty + i] * B[k * ldb + SC tx + j]: a thread's 4 x SC
// block of S (or dP) from two transposed scratch tiles.
template <int SC, class T>
KOKKOS_INLINE_FUNCTION void product_block(T (&s)[4][SC], const T* A, int lda, const T* B, int ldb,
                                          int n, int ty, int tx) {
  LCR_UNROLL
  for (int i = 0; i < 4; ++i) LCR_UNROLL
  for (int j = 0; j < SC; ++j) s[i][j] = T(0);
  for (int k = 0; k < n; ++k) {
    const Pack<T, 4> x = load_pack<4>(A + k * lda + 4 * ty);
    const Pack<T, SC> y = load_pack<SC>(B + k * ldb + SC * tx);
    LCR_UNROLL
    for (int i = 0; i < 4; ++i) LCR_UNROLL
    for (int j = 0; j < SC; ++j) s[i][j] += x.v[i] * y.v[j];
  }
}

// dst[r * ld + d] = src(r, d) for r < rows, d < cols (0 where src gives nothing): one
// element a thread, consecutive threads on consecutive d (coalesced global reads).
template <class T, class Member, class Src>
KOKKOS_INLINE_FUNCTION void stage(const Member& t, T* dst, int ld, int rows, int cols, Src src) {
  for_each_element(t, rows, cols, [&](int, int r, int d) { dst[r * ld + d] = src(r, d); });
}

// dK, dV (and dbias_k) for one key tile of one KV head, summed over the query heads of its
// GQA group and over every query tile that can see the key tile.
template <class T, int SC, int NC>
struct BackwardKVGpu {
  static constexpr int kDc = 32 * NC;  // gradient columns a pass
  struct Thread {
    T dk[4][4 * NC], dv[4][4 * NC];  // keys 4 ty + i, columns 32 c + 4 tx + j of the pass
    T s[4][SC], dp[4][SC];           // this query tile's S^T then P^T; dP^T then dS^T
    T dbk[4];                        // this head's sum of dS over this thread's queries
  };

  SdpaArgs<T> a;
  View4<const T> kt, vt;   // [B Hkv, Lk tiles, D or Dv, BK]: K, V transposed per key tile
  View4<const T> qt, dot;  // [B H, Lq tiles, D or Dv, BQ]: Q, dO transposed per query tile
  View3<const T> lse, delta;
  View4<const T> dout;
  View4<T> dk, dv;
  View3<T> dbias_k;
  int H, Hkv, Lq, Lk, D, Dv, nkt, npass, level;
  GpuShape sh;
  T neg_inf;

  // Scratch, in elements, each region a multiple of 4: Kt [D, BK + 4], Vt [Dv, BK + 4] (this
  // team's keys, transposed, staged once); Qt [D, BQ], dOt [Dv, BQ], Qr [BQ, Dc], dOr
  // [BQ, Dc] (a query tile both ways); Pt, dSt [BQ, BK + 4]; ls, ds [BQ] (lse, delta);
  // red [BK, 8] (the dbias partials).
  // (dc: the gradient columns a pass, kDc.)
  KOKKOS_INLINE_FUNCTION static size_t scratch_elems(const GpuShape& sh, int D, int Dv, int dc) {
    const size_t BK = sh.rows(), BQ = sh.cols(), ld = sh.ld();
    return (D + Dv) * ld + (D + Dv) * BQ + 2 * BQ * dc + 2 * BQ * ld + 2 * BQ + BK * 8;
  }
  static size_t scratch_bytes(const GpuShape& sh, int D, int Dv, int dc) {
    return scratch_elems(sh, D, Dv, dc) * sizeof(T) + 4 * sizeof(T);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int BK = sh.rows(), BQ = sh.cols(), ld = sh.ld(), G = H / Hkv;
    const int pass = t.league_rank() % npass;
    // First key tile first: under a causal mask the most queries see it.
    const auto w = tile_of(t.league_rank() / npass, t.league_size() / npass, nkt, false);
    const int hk = w.bh % Hkv, b = w.bh / Hkv, bhk = b * Hkv + hk;
    const int j0 = w.tile * BK, col0 = pass * kDc;
    const int nk = (Lk - j0) < BK ? (Lk - j0) : BK;
    T* Kt = static_cast<T*>(t.team_scratch(level).get_shmem_aligned(
        scratch_elems(sh, D, Dv, kDc) * sizeof(T), 4 * sizeof(T)));
    T* Vt = Kt + D * ld;
    T* Qt = Vt + Dv * ld;
    T* dOt = Qt + D * BQ;
    T* Qr = dOt + Dv * BQ;
    T* dOr = Qr + BQ * kDc;
    T* Pt = dOr + BQ * kDc;
    T* dSt = Pt + BQ * ld;
    T* ls = dSt + BQ * ld;
    T* ds = ls + BQ;
    T* red = ds + BQ;
    const bool want_dbias = dbias_k.extent(0) > 0 && pass == 0;

    Thread st[kMaxTeamThreads];
    auto each = [&](auto&& f) {
      each_thread(t, st, sh.threads(), [&](Thread& th, int id) { f(th, id / 8, id % 8); });
    };
    const T* kblock = &kt(bhk, w.tile, 0, 0);
    const T* vblock = &vt(bhk, w.tile, 0, 0);
    stage(t, Kt, ld, D, BK, [&](int d, int c) { return kblock[d * BK + c]; });
    stage(t, Vt, ld, Dv, BK, [&](int d, int c) { return vblock[d * BK + c]; });
    each([&](Thread& th, int, int) {
      LCR_UNROLL
      for (int i = 0; i < 4; ++i) LCR_UNROLL
      for (int c = 0; c < 4 * NC; ++c) th.dk[i][c] = th.dv[i][c] = T(0);
    });
    // First query tile whose positions reach this tile's first key.
    int64_t istart = a.k_pos0 + j0 - a.q_pos0;
    if (istart < 0) istart = 0;
    const int i_first = int(istart / BQ) * BQ;
    for (int g = 0; g < G; ++g) {
      const int h = hk * G + g;
      each([&](Thread& th, int, int) {
        LCR_UNROLL
        for (int i = 0; i < 4; ++i) th.dbk[i] = T(0);
      });
      for (int i0 = i_first; i0 < Lq; i0 += BQ) {
        const int nq = (Lq - i0) < BQ ? (Lq - i0) : BQ;
        const T* qblock = &qt(b * H + h, i0 / BQ, 0, 0);
        const T* oblock = &dot(b * H + h, i0 / BQ, 0, 0);
        t.team_barrier();  // the last tile's products are done with its tiles
        for_each_element(t, D, BQ, [&](int e, int, int) { Qt[e] = qblock[e]; });
        for_each_element(t, Dv, BQ, [&](int e, int, int) { dOt[e] = oblock[e]; });
        stage(t, Qr, kDc, BQ, kDc, [&](int r, int d) {
          return r < nq && col0 + d < D ? a.q(b, i0 + r, h, col0 + d) : T(0);
        });
        stage(t, dOr, kDc, BQ, kDc, [&](int r, int d) {
          return r < nq && col0 + d < Dv ? dout(b, i0 + r, h, col0 + d) : T(0);
        });
        // lse +inf for an empty row and the padding: P = 0 there.
        stage(t, ls, BQ, 1, BQ, [&](int, int r) {
          const T l = r < nq ? lse(b, h, i0 + r) : neg_inf;
          return l == neg_inf ? -neg_inf : l;
        });
        stage(t, ds, BQ, 1, BQ, [&](int, int r) { return r < nq ? delta(b, h, i0 + r) : T(0); });
        t.team_barrier();
        each([&](Thread& th, int ty, int tx) {
          product_block<SC>(th.s, Kt, ld, Qt, BQ, D, ty, tx);
          product_block<SC>(th.dp, Vt, ld, dOt, BQ, Dv, ty, tx);
          LCR_UNROLL
          for (int i = 0; i < 4; ++i) {
            const int c = 4 * ty + i;
            const int64_t pj = a.k_pos0 + j0 + c;
            LCR_UNROLL
            for (int j = 0; j < SC; ++j) {
              const int r = SC * tx + j;
              const int64_t pi = a.q_pos0 + i0 + r;
              T p = T(0), dx = T(0);
              if (c < nk && r < nq && pj <= pi) {
                const T s = Logit<T>{a}.at(th.s[i][j], b, h, i0 + r, pi, j0 + c, pj);
                p = softmax_grad_at(s, th.dp[i][j], ls[r], ds[r], a.softcap, dx);
              }
              th.s[i][j] = p;
              th.dp[i][j] = dx;
              th.dbk[i] += dx;
            }
          }
          LCR_UNROLL
          for (int j = 0; j < SC; ++j) {
            const int off = (SC * tx + j) * ld + 4 * ty;
            store_pack<4>(Pt + off, Pack<T, 4>{{th.s[0][j], th.s[1][j], th.s[2][j], th.s[3][j]}});
            store_pack<4>(dSt + off,
                          Pack<T, 4>{{th.dp[0][j], th.dp[1][j], th.dp[2][j], th.dp[3][j]}});
          }
        });
        t.team_barrier();
        each([&](Thread& th, int ty, int tx) {
          accumulate_block<NC>(th.dv, Pt, ld, dOr, kDc, nq, ty, tx);
          accumulate_block<NC>(th.dk, dSt, ld, Qr, kDc, nq, ty, tx);
        });
      }
      if (want_dbias) {  // dbias_k[j] = -sum_i dS_ij
        t.team_barrier();
        each([&](Thread& th, int ty, int tx) {
          LCR_UNROLL
          for (int i = 0; i < 4; ++i) red[(4 * ty + i) * 8 + tx] = th.dbk[i];
        });
        t.team_barrier();
        for_each_element(t, nk, 1, [&](int, int c, int) {
          T s = T(0);
          for (int u = 0; u < 8; ++u) s += red[c * 8 + u];
          dbias_k(b, j0 + c, h) = -s;
        });
      }
    }
    each([&](Thread& th, int ty, int tx) {
      LCR_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int c = 4 * ty + i;
        if (c >= nk) continue;
        LCR_UNROLL
        for (int u = 0; u < NC; ++u) LCR_UNROLL
        for (int j = 0; j < 4; ++j) {
          const int d = col0 + 32 * u + 4 * tx + j;
          if (d < D) dk(b, j0 + c, hk, d) = a.scale * th.dk[i][4 * u + j];
          if (d < Dv) dv(b, j0 + c, hk, d) = th.dv[i][4 * u + j];
        }
      }
    });
  }
};

// dQ (and dbias_q) for one query tile of one head.
template <class T, int SC, int NC>
struct BackwardQGpu {
  static constexpr int kDc = 32 * NC;
  struct Thread {
    T dq[4][4 * NC];           // queries 4 ty + i, columns 32 c + 4 tx + j of the pass
    T s[4][SC], dp[4][SC];     // this key tile's S; dP then dS
    T lse[4], del[4], dbq[4];  // the rows' lse (+inf: P = 0), delta; sum of dS over keys
  };

  SdpaArgs<T> a;
  View4<const T> kt, vt;   // [B Hkv, Lk tiles, D or Dv, BK]: K, V transposed per key tile
  View4<const T> qt, dot;  // [B H, Lq tiles, D or Dv, BQ]: Q, dO transposed per query tile
  View3<const T> lse, delta;
  View4<T> dq;
  View3<T> dbias_q;
  int H, Hkv, Lq, Lk, D, Dv, nqt, npass, level;
  GpuShape sh;
  T neg_inf;

  // Scratch: Qt [D, BQ + 4], dOt [Dv, BQ + 4] (this team's queries, staged once); Kt
  // [D, BK], Vt [Dv, BK], Kr [BK, Dc] (a key tile); dS [BK, BQ + 4] (dS^T); red [BQ, 8].
  KOKKOS_INLINE_FUNCTION static size_t scratch_elems(const GpuShape& sh, int D, int Dv, int dc) {
    const size_t BQ = sh.rows(), BK = sh.cols(), ld = sh.ld();
    return (D + Dv) * ld + (D + Dv) * BK + BK * dc + BK * ld + BQ * 8;
  }
  static size_t scratch_bytes(const GpuShape& sh, int D, int Dv, int dc) {
    return scratch_elems(sh, D, Dv, dc) * sizeof(T) + 4 * sizeof(T);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int BQ = sh.rows(), BK = sh.cols(), ld = sh.ld();
    const int pass = t.league_rank() % npass;
    const auto w = tile_of(t.league_rank() / npass, t.league_size() / npass, nqt, true);
    const int h = w.bh % H, b = w.bh / H, bhk = b * Hkv + h / (H / Hkv);
    const int i0 = w.tile * BQ, col0 = pass * kDc;
    const int nq = (Lq - i0) < BQ ? (Lq - i0) : BQ;
    T* Qt = static_cast<T*>(t.team_scratch(level).get_shmem_aligned(
        scratch_elems(sh, D, Dv, kDc) * sizeof(T), 4 * sizeof(T)));
    T* dOt = Qt + D * ld;
    T* Kt = dOt + Dv * ld;
    T* Vt = Kt + D * BK;
    T* Kr = Vt + Dv * BK;
    T* dSt = Kr + BK * kDc;
    T* red = dSt + BK * ld;
    const bool want_dbias = dbias_q.extent(0) > 0 && pass == 0;

    Thread st[kMaxTeamThreads];
    auto each = [&](auto&& f) {
      each_thread(t, st, sh.threads(), [&](Thread& th, int id) { f(th, id / 8, id % 8); });
    };
    const T* qblock = &qt(b * H + h, w.tile, 0, 0);
    const T* oblock = &dot(b * H + h, w.tile, 0, 0);
    stage(t, Qt, ld, D, BQ, [&](int d, int r) { return qblock[d * BQ + r]; });
    stage(t, dOt, ld, Dv, BQ, [&](int d, int r) { return oblock[d * BQ + r]; });
    each([&](Thread& th, int ty, int) {
      LCR_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * ty + i;
        const T l = r < nq ? lse(b, h, i0 + r) : neg_inf;
        th.lse[i] = l == neg_inf ? -neg_inf : l;
        th.del[i] = r < nq ? delta(b, h, i0 + r) : T(0);
        th.dbq[i] = T(0);
        LCR_UNROLL
        for (int c = 0; c < 4 * NC; ++c) th.dq[i][c] = T(0);
      }
    });
    int64_t jend = a.q_pos0 + i0 + nq - a.k_pos0;
    if (jend > Lk) jend = Lk;
    for (int j0 = 0; j0 < jend; j0 += BK) {
      const int nk = (jend - j0) < BK ? int(jend - j0) : BK;
      const T* kblock = &kt(bhk, j0 / BK, 0, 0);
      const T* vblock = &vt(bhk, j0 / BK, 0, 0);
      t.team_barrier();  // the last tile's dQ product is done with Kr and dS
      for_each_element(t, D, BK, [&](int e, int, int) { Kt[e] = kblock[e]; });
      for_each_element(t, Dv, BK, [&](int e, int, int) { Vt[e] = vblock[e]; });
      stage(t, Kr, kDc, BK, kDc, [&](int c, int d) {
        return c < nk && col0 + d < D ? a.k(b, j0 + c, h / (H / Hkv), col0 + d) : T(0);
      });
      t.team_barrier();
      each([&](Thread& th, int ty, int tx) {
        product_block<SC>(th.s, Qt, ld, Kt, BK, D, ty, tx);
        product_block<SC>(th.dp, dOt, ld, Vt, BK, Dv, ty, tx);
        LCR_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int r = 4 * ty + i;
          const int64_t pi = a.q_pos0 + i0 + r;
          LCR_UNROLL
          for (int j = 0; j < SC; ++j) {
            const int c = SC * tx + j;
            const int64_t pj = a.k_pos0 + j0 + c;
            T dx = T(0);
            if (r < nq && c < nk && pj <= pi) {
              const T s = Logit<T>{a}.at(th.s[i][j], b, h, i0 + r, pi, j0 + c, pj);
              softmax_grad_at(s, th.dp[i][j], th.lse[i], th.del[i], a.softcap, dx);
            }
            th.dp[i][j] = dx;
            th.dbq[i] += dx;
          }
        }
        LCR_UNROLL
        for (int j = 0; j < SC; ++j)
          store_pack<4>(dSt + (SC * tx + j) * ld + 4 * ty,
                        Pack<T, 4>{{th.dp[0][j], th.dp[1][j], th.dp[2][j], th.dp[3][j]}});
      });
      t.team_barrier();
      each([&](Thread& th, int ty, int tx) {
        accumulate_block<NC>(th.dq, dSt, ld, Kr, kDc, nk, ty, tx);
      });
    }
    if (want_dbias) {  // dbias_q[i] = sum_j dS_ij
      t.team_barrier();
      each([&](Thread& th, int ty, int tx) {
        LCR_UNROLL
        for (int i = 0; i < 4; ++i) red[(4 * ty + i) * 8 + tx] = th.dbq[i];
      });
      t.team_barrier();
      for_each_element(t, nq, 1, [&](int, int r, int) {
        T s = T(0);
        for (int u = 0; u < 8; ++u) s += red[r * 8 + u];
        dbias_q(b, i0 + r, h) = s;
      });
    }
    each([&](Thread& th, int ty, int tx) {
      LCR_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * ty + i;
        if (r >= nq) continue;
        LCR_UNROLL
        for (int u = 0; u < NC; ++u) LCR_UNROLL
        for (int j = 0; j < 4; ++j) {
          const int d = col0 + 32 * u + 4 * tx + j;
          if (d < D) dq(b, i0 + r, h, d) = a.scale * th.dq[i][4 * u + j];
        }
      }
    });
  }
};

}  // namespace lcr::sdpa_detail
