#pragma once
// The SDPA forward in the form a GPU team runs (tile::kGpuLayout), FlashAttention-2 style in
// plain Kokkos (no CUDA header, intrinsic or launch): each thread owns a fixed block of the
// output for the team's whole life and keeps it, with its rows' running max and sum, in
// registers across key tiles; only operand tiles pass through level-0 scratch.
//
// A team of 8 RG threads (RG = 16 or 8) takes BQ = 4 RG query rows; thread (ty, tx),
// ty < RG, tx < 8, owns rows 4 ty .. 4 ty + 3 of
//   S  [BQ, BK]   (BK = 8 SC keys a tile): columns SC tx .. SC tx + SC - 1
//   O  [BQ, Dvc]  (Dvc = 32 NCH output columns a pass): columns 32 c + 4 tx + (0..3)
// so every operand a thread reads is 4 (or SC) consecutive scratch elements: one vector load
// each (Qt and Pt read down a column of the transposed tile, Kt and Vs along a row), a
// warp's lanes reading distinct consecutive words or broadcasting one. Per key tile:
//   S = Q K^T (registers) -> logits, mask -> row max over the 8 threads of a row (scratch)
//   -> P = exp(S - m), O *= exp(m_old - m), l += rowsum(P) (this thread's columns only)
//   -> P^T to scratch -> O += P V.
// The 8 partial row sums meet once, at the end. Output widths above 128 run in column passes
// (league entries of their own), each recomputing S.
#include "kernels/attention/kokkos/sdpa_team.hpp"

namespace lcr::sdpa_detail {

template <class T, int SC, int NCH>
struct ForwardGpu {
  static constexpr int kDvc = 32 * NCH;  // output columns a pass
  // One thread's state, in registers on a GPU (every index below is a compile-time constant
  // after unrolling).
  struct Thread {
    T o[4][4 * NCH];  // unnormalised output, rows 4 ty + i, columns (c, j) -> 32 c + 4 tx + j
    T s[4][SC];       // this key tile's logits, then probabilities
    T m[4], l[4];     // running max (the row's); running sum over this thread's columns
  };

  SdpaArgs<T> a;
  View4<const T> kt;  // [B Hkv, Lk tiles, D, BK]: K transposed per key tile
  View4<T> o;
  View3<T> lse;
  int H, Hkv, Lq, Lk, D, Dv, nqt, npass, level;
  GpuShape sh;
  T neg_inf;

  // Scratch, in elements, each region a multiple of 4: Qt [D, BQ + 4] (Q^T; the pad spreads
  // a warp's transposed stores over the banks), Kt [D, BK] sharing its space with Pt
  // [BK, BQ + 4] (P^T), Vs [BK, Dvc], red [BQ, 8] (the 8 threads' partials of each row).
  // (dvc: the output columns a pass, kDvc.)
  KOKKOS_INLINE_FUNCTION static size_t scratch_elems(const GpuShape& sh, int D, int dvc) {
    const size_t kt = size_t(D) * sh.cols(), pt = size_t(sh.cols()) * sh.ld();
    return size_t(D) * sh.ld() + (kt > pt ? kt : pt) + size_t(sh.cols()) * dvc + sh.rows() * 8;
  }
  static size_t scratch_bytes(const GpuShape& sh, int D, int dvc) {
    return scratch_elems(sh, D, dvc) * sizeof(T) + 4 * sizeof(T);  // + alignment slack
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int BQ = sh.rows(), BK = sh.cols(), RG = sh.rg, ldt = sh.ld();
    const int pass = t.league_rank() % npass;
    const auto w = tile_of(t.league_rank() / npass, t.league_size() / npass, nqt, true);
    const int h = w.bh % H, b = w.bh / H, bhk = b * Hkv + h / (H / Hkv);
    const int i0 = w.tile * BQ, col0 = pass * kDvc;
    const int nq = (Lq - i0) < BQ ? (Lq - i0) : BQ;
    const int ncol = (Dv - col0) < kDvc ? (Dv - col0) : kDvc;
    T* base = static_cast<T*>(t.team_scratch(level).get_shmem_aligned(
        scratch_elems(sh, D, kDvc) * sizeof(T), 4 * sizeof(T)));
    T* Qt = base;
    T* Kt = Qt + D * ldt;
    T* Pt = Kt;
    T* Vs = Kt + (D * BK > BK * ldt ? D * BK : BK * ldt);
    T* red = Vs + BK * kDvc;

    Thread st[kMaxTeamThreads];
    // f(thread state, ty, tx) for each thread this one plays.
    auto each = [&](auto&& f) {
      each_thread(t, st, sh.threads(), [&](Thread& th, int id) { f(th, id / 8, id % 8); });
    };

    // Q^T: consecutive threads take consecutive d of a row (coalesced global reads).
    for_each_element(t, BQ, D, [&](int, int r, int d) {
      Qt[d * ldt + r] = r < nq ? a.q(b, i0 + r, h, d) : T(0);
    });
    each([&](Thread& th, int, int) {
      LCR_UNROLL
      for (int i = 0; i < 4; ++i) {
        th.m[i] = neg_inf;
        th.l[i] = T(0);
        LCR_UNROLL
        for (int c = 0; c < 4 * NCH; ++c) th.o[i][c] = T(0);
      }
    });
    // Keys past the tile's last query position are masked for every row: stop there.
    int64_t jend = a.q_pos0 + i0 + nq - a.k_pos0;
    if (jend > Lk) jend = Lk;
    for (int j0 = 0; j0 < jend; j0 += BK) {
      const int nk = (jend - j0) < BK ? int(jend - j0) : BK;
      const T* kblock = &kt(bhk, j0 / BK, 0, 0);
      t.team_barrier();  // the last tile's P V is done with Pt and Vs
      for_each_element(t, D, BK, [&](int e, int, int) { Kt[e] = kblock[e]; });
      for_each_element(t, BK, kDvc, [&](int e, int r, int d) {
        Vs[e] = r < nk && d < ncol ? a.v(b, j0 + r, h / (H / Hkv), col0 + d) : T(0);
      });
      t.team_barrier();
      each([&](Thread& th, int ty, int tx) {
        logits(th, ty, tx, Qt, Kt, red, b, h, i0, nq, j0, nk);
      });
      t.team_barrier();  // red holds every thread's row maxima; Kt is free for P^T
      each([&](Thread& th, int ty, int tx) { softmax(th, ty, tx, red, Pt); });
      t.team_barrier();
      each([&](Thread& th, int ty, int tx) {
        accumulate_block<NCH>(th.o, Pt, ldt, Vs, kDvc, nk, ty, tx);  // O += P V
      });
    }
    t.team_barrier();  // the last tile's readers of red are done
    each([&](Thread& th, int ty, int tx) {
      LCR_UNROLL
      for (int i = 0; i < 4; ++i) red[(i * RG + ty) * 8 + tx] = th.l[i];
    });
    t.team_barrier();
    each([&](Thread& th, int ty, int tx) { finish(th, ty, tx, red, b, h, i0, nq, col0, ncol); });
  }

  // th.s = the logits of rows 4 ty + i against keys j0 + SC tx + j (-inf where masked);
  // red gets the rows' maxima over this thread's columns.
  KOKKOS_INLINE_FUNCTION void logits(Thread& th, int ty, int tx, const T* Qt, const T* Kt, T* red,
                                     int b, int h, int i0, int nq, int j0, int nk) const {
    const int ldt = sh.ld(), BK = sh.cols();
    LCR_UNROLL
    for (int i = 0; i < 4; ++i) LCR_UNROLL
    for (int j = 0; j < SC; ++j) th.s[i][j] = T(0);
    for (int k = 0; k < D; ++k) {
      const Pack<T, 4> q = load_pack<4>(Qt + k * ldt + 4 * ty);
      const Pack<T, SC> kk = load_pack<SC>(Kt + k * BK + SC * tx);
      LCR_UNROLL
      for (int i = 0; i < 4; ++i) LCR_UNROLL
      for (int j = 0; j < SC; ++j) th.s[i][j] += q.v[i] * kk.v[j];
    }
    const Logit<T> logit{a};
    LCR_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int r = 4 * ty + i;
      const int64_t pi = a.q_pos0 + i0 + r;
      T mx = neg_inf;
      LCR_UNROLL
      for (int j = 0; j < SC; ++j) {
        const int c = SC * tx + j;
        const int64_t pj = a.k_pos0 + j0 + c;
        if (r < nq && c < nk && pj <= pi) {
          th.s[i][j] = logit.at(th.s[i][j], b, h, i0 + r, pi, j0 + c, pj);
          mx = th.s[i][j] > mx ? th.s[i][j] : mx;
        } else {
          th.s[i][j] = neg_inf;
        }
      }
      red[(i * sh.rg + ty) * 8 + tx] = mx;
    }
  }

  // The online softmax step for this thread's rows: the rows' new max from the 8 partials,
  // P = exp(s - m) (0 below exp_floor, and where masked), O and l rescaled; P^T to Pt.
  KOKKOS_INLINE_FUNCTION void softmax(Thread& th, int ty, int tx, const T* red, T* Pt) const {
    const int ldt = sh.ld();
    LCR_UNROLL
    for (int i = 0; i < 4; ++i) {
      const T* part = red + (i * sh.rg + ty) * 8;
      T mx = th.m[i];
      LCR_UNROLL
      for (int u = 0; u < 8; ++u) mx = part[u] > mx ? part[u] : mx;
      // exp(-inf - finite) = 0; -inf - -inf is NaN, which fails the comparison: 0 too.
      const T dc = th.m[i] - mx;
      const T corr = dc >= tile::exp_floor<T>() ? kmath::exp(dc) : T(0);
      T sum = T(0);
      LCR_UNROLL
      for (int j = 0; j < SC; ++j) {
        const T x = th.s[i][j] - mx;
        th.s[i][j] = x >= tile::exp_floor<T>() ? kmath::exp(x) : T(0);
        sum += th.s[i][j];
      }
      th.l[i] = th.l[i] * corr + sum;
      th.m[i] = mx;
      LCR_UNROLL
      for (int c = 0; c < 4 * NCH; ++c) th.o[i][c] *= corr;
    }
    LCR_UNROLL
    for (int j = 0; j < SC; ++j)
      store_pack<4>(Pt + (SC * tx + j) * ldt + 4 * ty,
                    Pack<T, 4>{{th.s[0][j], th.s[1][j], th.s[2][j], th.s[3][j]}});
  }

  // o = O / l over the row's 8 partial sums (red), lse = m + log l; a row that saw no key
  // gets o = 0, lse = -inf.
  KOKKOS_INLINE_FUNCTION void finish(Thread& th, int ty, int tx, const T* red, int b, int h, int i0,
                                     int nq, int col0, int ncol) const {
    LCR_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int r = 4 * ty + i;
      if (r >= nq) continue;
      T l = T(0);
      LCR_UNROLL
      for (int u = 0; u < 8; ++u) l += red[(i * sh.rg + ty) * 8 + u];
      const T inv = l == T(0) ? T(0) : T(1) / l;
      LCR_UNROLL
      for (int c = 0; c < NCH; ++c) LCR_UNROLL
      for (int j = 0; j < 4; ++j) {
        const int d = 32 * c + 4 * tx + j;
        if (d < ncol) o(b, i0 + r, h, col0 + d) = th.o[i][4 * c + j] * inv;
      }
      if (tx == 0 && col0 == 0) lse(b, h, i0 + r) = l == T(0) ? neg_inf : th.m[i] + kmath::log(l);
    }
  }
};

}  // namespace lcr::sdpa_detail
