#pragma once
// The SDPA backward in the form a GPU team runs (tile::kGpuLayout): every tile in level-0
// scratch (on-chip shared memory, 48 KiB a team on CUDA less Kokkos's share). The CPU form
// (sdpa.cpp) reads the side it loops over from per-tile transposes in place and keeps the
// fixed side row-major; here the fixed side is the transposed one, staged once per team, and
// the side the loop walks comes in row-major tiles, so each product's right operand is a
// row-major scratch tile and its left one a scratch tile read along rows or columns:
//   dK/dV team (one key tile):   S = Q K^T, dP = dO V^T    [bq, bk] (query rows)
//                                dV += P^T dO, dK += scale dS^T Q
//   dQ team (one query tile):    S^T = K Q^T, dP^T = V dO^T [bk, bq] (key rows)
//                                dQ += scale dS K
// The softmax-backward rows run with scale 1 (the products apply it), so the bias lanes'
// sums are over dS itself, as in the CPU form.
#include "kernels/attention/kokkos/sdpa_team.hpp"

namespace lcr::sdpa_detail {

// A backward team's tiles: bq queries by bk keys; left operands' rows padded by one float.
struct BackwardTiles {
  int bq, bk;
};

// dK, dV (and dbias_k) for one key tile of one KV head, summed over the query heads of its
// GQA group and over every query tile that can see the key tile.
template <class T>
struct BackwardKVGpu {
  SdpaArgs<T> a;
  View4<const T> kt, vt;  // [B Hkv, Lk tiles, D or Dv, bk]: K, V transposed per key tile
  View3<const T> lse, delta;
  View4<const T> dout;
  View4<T> dk, dv;
  View3<T> dbias_k;
  int H, Hkv, Lq, Lk, D, Dv, nkt, level;
  BackwardTiles tl;
  T neg_inf;

  static size_t scratch_bytes(const BackwardTiles& tl, int D, int Dv) {
    const int CB = tile::block_cols<T>();
    const int Dp = tile::round_up(D, CB), Dvp = tile::round_up(Dv, CB);
    return scratch2<T>(D, tl.bk) + scratch2<T>(Dv, tl.bk) + scratch2<T>(tl.bk, Dp) +
           scratch2<T>(tl.bk, Dvp) + scratch2<T>(tl.bq, Dp + 1) + scratch2<T>(tl.bq, Dvp + 1) +
           2 * scratch2<T>(tl.bq, tl.bk + 1) + Scratch1<T>::shmem_size(tl.bk) +
           2 * Scratch1<T>::shmem_size(tl.bq);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    constexpr int CB = tile::block_cols<T>(), R = tile::kBlockRows;
    const int bq = tl.bq, bk = tl.bk;
    const auto w = tile_of(t.league_rank(), t.league_size(), nkt, false);  // most queries first
    const int hk = w.bh % Hkv, b = w.bh / Hkv, G = H / Hkv;
    const int j0 = w.tile * bk;
    const int nk = (Lk - j0) < bk ? (Lk - j0) : bk;
    const int mk = tile::round_up(nk, R), nkp = tile::round_up(nk, CB);
    const int Dp = tile::round_up(D, CB), Dvp = tile::round_up(Dv, CB);
    const int ldq = Dp + 1, ldo = Dvp + 1, lds = bk + 1;
    // Kt [D, bk], Vt [Dv, bk]: this team's keys, transposed; dKs [bk, Dp], dVs [bk, Dvp]
    // accumulate; Qs [bq, ldq], dOs [bq, ldo]: a query tile; S, dP [bq, lds]; dbk [bk].
    Scratch2<T> Kt(t.team_scratch(level), D, bk), Vt(t.team_scratch(level), Dv, bk);
    Scratch2<T> dKs(t.team_scratch(level), bk, Dp), dVs(t.team_scratch(level), bk, Dvp);
    Scratch2<T> Qs(t.team_scratch(level), bq, ldq), dOs(t.team_scratch(level), bq, ldo);
    Scratch2<T> S(t.team_scratch(level), bq, lds), dP(t.team_scratch(level), bq, lds);
    Scratch1<T> dbk(t.team_scratch(level), bk);
    Scratch1<T> lse_s(t.team_scratch(level), bq), del_s(t.team_scratch(level), bq);
    const Logit<T> logit{a};
    const bool want_dbias = dbias_k.extent(0) > 0;

    const T* kblock = &kt(b * Hkv + hk, w.tile, 0, 0);
    const T* vblock = &vt(b * Hkv + hk, w.tile, 0, 0);
    load_rows(t, Kt.data(), bk, D, D, bk, [&](int d) { return kblock + d * bk; });
    load_rows(t, Vt.data(), bk, Dv, Dv, bk, [&](int d) { return vblock + d * bk; });
    zero_rows(t, dKs.data(), Dp, bk);
    zero_rows(t, dVs.data(), Dvp, bk);
    // First query row whose position reaches this tile's first key.
    int64_t istart = a.k_pos0 + j0 - a.q_pos0;
    if (istart < 0) istart = 0;
    const int i_first = int(istart / bq) * bq;
    for (int g = 0; g < G; ++g) {
      const int h = hk * G + g;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, bk), [&](int c) { dbk(c) = T(0); });
      for (int i0 = i_first; i0 < Lq; i0 += bq) {
        const int nq = (Lq - i0) < bq ? (Lq - i0) : bq;
        const int mq = tile::round_up(nq, R);
        t.team_barrier();
        load_rows(t, Qs.data(), ldq, mq, nq, D, [&](int r) { return &a.q(b, i0 + r, h, 0); });
        load_rows(t, dOs.data(), ldo, mq, nq, Dv, [&](int r) { return &dout(b, i0 + r, h, 0); });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
          lse_s(r) = lse(b, h, i0 + r);
          del_s(r) = delta(b, h, i0 + r);
        });
        t.team_barrier();
        tile::gemm<false>(t, S.data(), lds, Qs.data(), ldq, Kt.data(), bk, mq, nkp, D);
        tile::gemm<false>(t, dP.data(), lds, dOs.data(), ldo, Vt.data(), bk, mq, nkp, Dv);
        t.team_barrier();
        // Row r: query r against the keys c < hi it sees (causal: p_j <= p_i); an empty row
        // (lse -inf) and the padding see none.
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, mq), [&](int r) {
          const int64_t pi = a.q_pos0 + i0 + r, pj0 = a.k_pos0 + j0;
          const T lse_r = r < nq ? lse_s(r) : neg_inf;
          const T del_r = r < nq ? del_s(r) : T(0);
          const int64_t vis = lse_r == neg_inf ? 0 : pi - pj0 + 1;
          const int hi = vis < 0 ? 0 : (vis < nk ? int(vis) : nk);
          logit.query_row(&S(r, 0), 0, hi, b, h, i0 + r, pi, j0, pj0);
          softmax_grad_row<false>(&S(r, 0), &dP(r, 0), 0, hi, nkp, &lse_r, &del_r, T(1), a.softcap,
                                  false);
        });
        t.team_barrier();
        if (want_dbias)  // dbias_k[j] -= sum_i dS_ij, over queries in order
          Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk), [&](int c) {
            T s = T(0);
            for (int r = 0; r < nq; ++r) s += dP(r, c);
            dbk(c) -= s;
          });
        tile::gemm<true>(t, dVs.data(), Dvp, S.data(), 1, lds, dOs.data(), ldo, mk, Dvp, nq);
        tile::gemm<true>(t, dKs.data(), Dp, dP.data(), 1, lds, Qs.data(), ldq, mk, Dp, nq, a.scale);
      }
      t.team_barrier();
      if (want_dbias)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk),
                             [&](int c) { dbias_k(b, j0 + c, h) = dbk(c); });
    }
    t.team_barrier();
    const auto one = [](int) { return T(1); };
    store_rows(
        t, dKs.data(), Dp, nk, D, [&](int c) { return &dk(b, j0 + c, hk, 0); }, one);
    store_rows(
        t, dVs.data(), Dvp, nk, Dv, [&](int c) { return &dv(b, j0 + c, hk, 0); }, one);
  }
};

// dQ (and dbias_q) for one query tile of one head.
template <class T>
struct BackwardQGpu {
  SdpaArgs<T> a;
  View4<const T> qt, dot;  // [B H, Lq tiles, D or Dv, bq]: Q, dO transposed per query tile
  View3<const T> lse, delta;
  View4<T> dq;
  View3<T> dbias_q;
  int H, Hkv, Lq, Lk, D, Dv, nqt, level;
  BackwardTiles tl;
  T neg_inf;

  static size_t scratch_bytes(const BackwardTiles& tl, int D, int Dv) {
    const int CB = tile::block_cols<T>();
    const int Dp = tile::round_up(D, CB), Dvp = tile::round_up(Dv, CB);
    return scratch2<T>(D, tl.bq) + scratch2<T>(Dv, tl.bq) + scratch2<T>(tl.bq, Dp) +
           scratch2<T>(tl.bk, Dp + 1) + scratch2<T>(tl.bk, Dvp + 1) +
           2 * scratch2<T>(tl.bk, tl.bq + 1) + 3 * Scratch1<T>::shmem_size(tl.bq);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    constexpr int CB = tile::block_cols<T>(), R = tile::kBlockRows;
    const int bq = tl.bq, bk = tl.bk;
    const auto w = tile_of(t.league_rank(), t.league_size(), nqt, true);  // longest first
    const int h = w.bh % H, b = w.bh / H, hk = h / (H / Hkv);
    const int i0 = w.tile * bq;
    const int nq = (Lq - i0) < bq ? (Lq - i0) : bq;
    const int mq = tile::round_up(nq, R), nqp = tile::round_up(nq, CB);
    const int Dp = tile::round_up(D, CB), Dvp = tile::round_up(Dv, CB);
    const int ldk = Dp + 1, ldv = Dvp + 1, lds = bq + 1;
    // Qt [D, bq], dOt [Dv, bq]: this team's queries, transposed; dQs [bq, Dp] accumulates;
    // lse_s, del_s, dbq [bq]; Ks [bk, ldk], Vs [bk, ldv]: a key tile; St, dPt [bk, lds].
    Scratch2<T> Qt(t.team_scratch(level), D, bq), dOt(t.team_scratch(level), Dv, bq);
    Scratch2<T> dQs(t.team_scratch(level), bq, Dp);
    Scratch1<T> lse_s(t.team_scratch(level), bq), del_s(t.team_scratch(level), bq);
    Scratch1<T> dbq(t.team_scratch(level), bq);
    Scratch2<T> Ks(t.team_scratch(level), bk, ldk), Vs(t.team_scratch(level), bk, ldv);
    Scratch2<T> St(t.team_scratch(level), bk, lds), dPt(t.team_scratch(level), bk, lds);
    const Logit<T> logit{a};
    const bool want_dbias = dbias_q.extent(0) > 0;

    const T* qblock = &qt(b * H + h, w.tile, 0, 0);
    const T* oblock = &dot(b * H + h, w.tile, 0, 0);
    load_rows(t, Qt.data(), bq, D, D, bq, [&](int d) { return qblock + d * bq; });
    load_rows(t, dOt.data(), bq, Dv, Dv, bq, [&](int d) { return oblock + d * bq; });
    zero_rows(t, dQs.data(), Dp, bq);
    // Per column r (query): lse, +inf for an empty row and the padding (P = 0); delta.
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, bq), [&](int r) {
      const T l = r < nq ? lse(b, h, i0 + r) : neg_inf;
      lse_s(r) = l == neg_inf ? -neg_inf : l;
      del_s(r) = r < nq ? delta(b, h, i0 + r) : T(0);
      dbq(r) = T(0);
    });
    int64_t jend = a.q_pos0 + i0 + nq - a.k_pos0;
    if (jend > Lk) jend = Lk;
    for (int j0 = 0; j0 < jend; j0 += bk) {
      const int nk = (jend - j0) < bk ? int(jend - j0) : bk;
      const int mk = tile::round_up(nk, R);
      t.team_barrier();
      load_rows(t, Ks.data(), ldk, mk, nk, D, [&](int c) { return &a.k(b, j0 + c, hk, 0); });
      load_rows(t, Vs.data(), ldv, mk, nk, Dv, [&](int c) { return &a.v(b, j0 + c, hk, 0); });
      t.team_barrier();
      tile::gemm<false>(t, St.data(), lds, Ks.data(), ldk, Qt.data(), bq, mk, nqp, D);
      tile::gemm<false>(t, dPt.data(), lds, Vs.data(), ldv, dOt.data(), bq, mk, nqp, Dv);
      t.team_barrier();
      // Row c: key c against the queries r in [lo, nq) that see it (causal: p_i >= p_j).
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, mk), [&](int c) {
        const int64_t pj = a.k_pos0 + j0 + c, pi0 = a.q_pos0 + i0;
        const int64_t first = pj - pi0;
        const int lo = first < 0 ? 0 : (first < nq ? int(first) : nq);
        const int hi = c < nk ? nq : lo;
        logit.key_row(&St(c, 0), lo, hi, b, h, j0 + c, pj, i0, pi0);
        softmax_grad_row<true>(&St(c, 0), &dPt(c, 0), lo, hi, nqp, &lse_s(0), &del_s(0), T(1),
                               a.softcap, false);
      });
      t.team_barrier();
      if (want_dbias)  // dbias_q[i] += sum_j dS_ij, over keys in order
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
          T s = T(0);
          for (int c = 0; c < nk; ++c) s += dPt(c, r);
          dbq(r) += s;
        });
      tile::gemm<true>(t, dQs.data(), Dp, dPt.data(), 1, lds, Ks.data(), ldk, mq, Dp, nk, a.scale);
    }
    t.team_barrier();
    store_rows(
        t, dQs.data(), Dp, nq, D, [&](int r) { return &dq(b, i0 + r, h, 0); },
        [](int) { return T(1); });
    if (want_dbias)
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq),
                           [&](int r) { dbias_q(b, i0 + r, h) = dbq(r); });
  }
};

}  // namespace lcr::sdpa_detail
