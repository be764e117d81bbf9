#pragma once
// The per-row work of the Kokkos SDPA kernels (sdpa.cpp): the logits of a row of (query, key)
// pairs from their dot products, the softmax backward's row, the tile loaders. Each loop runs
// over a contiguous row with the options' branches hoisted out of it, so a CPU vectorises it.
#include "kernels/attention/kokkos/math.hpp"
#include "kernels/attention/kokkos/sdpa.hpp"
#include "kernels/attention/kokkos/tile.hpp"

namespace lcr::sdpa_detail {

// Query rows and key rows of a tile; multiples of every register block's rows and columns.
constexpr int kTileQ = 64;
constexpr int kTileK = 64;
static_assert(kTileQ % tile::kBlockRows == 0 && kTileQ % tile::block_cols<double>() == 0 &&
                  kTileQ % tile::block_cols<float>() == 0 && kTileK == kTileQ,
              "tiles must hold whole register blocks");

// The logit of (query i at position p_i, key j at position p_j) from their dot product:
//   x = scale dot - slope_h (p_i - p_j) + (bias_q[b,i,h] - bias_k[b,j,h]),
//   s = softcap tanh(x / softcap) when softcap > 0,
// in that order of operations in every pass, so forward and backward compute the same s.
template <class T>
struct Logit {
  SdpaArgs<T> a;

  // x[c], c in [lo, hi): query i (position pi) against key j0 + c (position pj0 + c).
  KOKKOS_INLINE_FUNCTION void query_row(T* KOKKOS_RESTRICT x, int lo, int hi, int b, int h, int i,
                                        int64_t pi, int j0, int64_t pj0) const {
    for (int c = lo; c < hi; ++c) x[c] *= a.scale;
    if (a.alibi_slopes.extent(0) > 0) {
      const T sl = a.alibi_slopes(h);
      for (int c = lo; c < hi; ++c) x[c] -= sl * T(pi - pj0 - c);
    }
    if (a.bias_q.extent(0) > 0) {
      const T bq = a.bias_q(b, i, h);
      for (int c = lo; c < hi; ++c) x[c] += bq - a.bias_k(b, j0 + c, h);
    }
    cap(x, lo, hi);
  }
  // x[r], r in [lo, hi): key j (position pj) against query i0 + r (position pi0 + r).
  KOKKOS_INLINE_FUNCTION void key_row(T* KOKKOS_RESTRICT x, int lo, int hi, int b, int h, int j,
                                      int64_t pj, int i0, int64_t pi0) const {
    for (int r = lo; r < hi; ++r) x[r] *= a.scale;
    if (a.alibi_slopes.extent(0) > 0) {
      const T sl = a.alibi_slopes(h);
      for (int r = lo; r < hi; ++r) x[r] -= sl * T(pi0 + r - pj);
    }
    if (a.bias_q.extent(0) > 0) {
      const T bk = a.bias_k(b, j, h);
      for (int r = lo; r < hi; ++r) x[r] += a.bias_q(b, i0 + r, h) - bk;
    }
    cap(x, lo, hi);
  }
  // One element of query_row: query i (position pi) against key j (position pj), the same
  // operations in the same order, on a value (a GPU thread's register).
  KOKKOS_INLINE_FUNCTION T at(T x, int b, int h, int i, int64_t pi, int j, int64_t pj) const {
    x *= a.scale;
    if (a.alibi_slopes.extent(0) > 0) x -= a.alibi_slopes(h) * T(pi - pj);
    if (a.bias_q.extent(0) > 0) x += a.bias_q(b, i, h) - a.bias_k(b, j, h);
    return a.softcap > T(0) ? a.softcap * kmath::tanh(x / a.softcap) : x;
  }
  KOKKOS_INLINE_FUNCTION void cap(T* KOKKOS_RESTRICT x, int lo, int hi) const {
    if (a.softcap > T(0))
      for (int c = lo; c < hi; ++c) x[c] = a.softcap * kmath::tanh(x[c] / a.softcap);
  }
};

// One row of a backward tile, in place. On entry srow holds the logits s over the visible
// columns [lo, hi) and dprow the products <dO_i, v_j> over all npad columns; lse and delta
// are the row's (kPerColumn false: lse[0], delta[0]) or each column's. On exit srow holds
// P = exp(s - lse) and dprow scale * dS, dS = P (dP - delta) ds/dx, both 0 outside [lo, hi)
// and where P underflows. Returns the sum of dS over the row, in column order, when
// want_sum (the bias lanes' gradient), else 0.
template <bool kPerColumn, class T>
KOKKOS_INLINE_FUNCTION T softmax_grad_row(T* KOKKOS_RESTRICT srow, T* KOKKOS_RESTRICT dprow, int lo,
                                          int hi, int npad, const T* lse, const T* delta, T scale,
                                          T softcap, bool want_sum) {
  if constexpr (tile::kGpuLayout) {  // one element at a time: no per-thread row buffer
    T sum = T(0);
    for (int c = 0; c < npad; ++c) {
      const T x =
          c >= lo && c < hi ? srow[c] - lse[kPerColumn ? c : 0] : T(2) * tile::exp_floor<T>();
      const T p = x >= tile::exp_floor<T>() ? kmath::exp(x) : T(0);
      T dx = p * (dprow[c] - delta[kPerColumn ? c : 0]);
      if (softcap > T(0)) {
        const T t = srow[c] / softcap;
        dx *= T(1) - t * t;
      }
      srow[c] = p;
      sum += dx;
      dprow[c] = dx * scale;
    }
    return want_sum ? sum : T(0);
  } else {
    T p[kTileQ];
    for (int c = 0; c < npad; ++c) {
      const T l = lse[kPerColumn ? c : 0];
      p[c] = c >= lo && c < hi ? srow[c] - l : T(2) * tile::exp_floor<T>();  // masked: exp 0
    }
    tile::exp_or_zero(p, npad);
    for (int c = 0; c < npad; ++c) {
      T dx = p[c] * (dprow[c] - delta[kPerColumn ? c : 0]);
      if (softcap > T(0)) {  // ds/dx = 1 - tanh^2 = 1 - (s / softcap)^2
        const T t = srow[c] / softcap;
        dx *= T(1) - t * t;
      }
      srow[c] = p[c];
      dprow[c] = dx;
    }
    T sum = T(0);
    if (want_sum)
      for (int c = 0; c < npad; ++c) sum += dprow[c];
    for (int c = 0; c < npad; ++c) dprow[c] *= scale;
    return sum;
  }
}

// softmax_grad_row for one element (a GPU thread's register): the logit s, its product
// dp = <dO_i, v_j>, the row's lse and delta. Returns P = exp(s - lse) (0 below exp_floor;
// lse = +inf gives 0) and sets dx = P (dp - delta) ds/dx, unscaled.
template <class T>
KOKKOS_INLINE_FUNCTION T softmax_grad_at(T s, T dp, T lse, T delta, T softcap, T& dx) {
  const T x = s - lse;
  const T p = x >= tile::exp_floor<T>() ? kmath::exp(x) : T(0);
  dx = p * (dp - delta);
  if (softcap > T(0)) {
    const T t = s / softcap;
    dx *= T(1) - t * t;
  }
  return p;
}

// f(e, r, d) for every element e = r * cols + d of a [rows, cols] tile, spread over the team:
// thread k takes e = k, k + team size, ..., its (r, d) stepped by additions (a division per
// element costs GPU threads as much as the copy).
template <class Member, class F>
KOKKOS_INLINE_FUNCTION void for_each_element(const Member& t, int rows, int cols, F f) {
  const int n = rows * cols, step = t.team_size();
  if (n == 0) return;
  const int dr = step / cols, dd = step % cols;
  int e = t.team_rank(), r = e / cols, d = e % cols;
  for (; e < n; e += step) {
    f(e, r, d);
    r += dr;
    d += dd;
    if (d >= cols) {
      d -= cols;
      ++r;
    }
  }
}

// Rows [0, n) of width w, row r read from src(r) (a pointer to its first element), into
// dst [rows, ld]; columns [w, ld) and rows [n, rows) zeroed: the register blocks read whole
// padded tiles. A CPU thread copies whole rows (memcpy); GPU threads take consecutive
// elements, so a warp's reads of a row coalesce.
template <class T, class Member, class Src>
KOKKOS_INLINE_FUNCTION void load_rows(const Member& t, T* dst, int ld, int rows, int n, int w,
                                      Src src) {
  if constexpr (tile::kGpuLayout) {
    for_each_element(t, rows, ld,
                     [&](int e, int r, int d) { dst[e] = r < n && d < w ? src(r)[d] : T(0); });
  } else {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows), [&](int r) {
      T* row = dst + r * ld;
      const int wr = r < n ? w : 0;
      if (wr > 0) std::memcpy(row, src(r), sizeof(T) * wr);
      for (int d = wr; d < ld; ++d) row[d] = T(0);
    });
  }
}

// dst [rows, ld] = 0.
template <class T, class Member>
KOKKOS_INLINE_FUNCTION void zero_rows(const Member& t, T* dst, int ld, int rows) {
  if constexpr (tile::kGpuLayout) {
    for_each_element(t, rows, ld, [&](int e, int, int) { dst[e] = T(0); });
  } else {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, rows), [&](int r) {
      for (int d = 0; d < ld; ++d) dst[r * ld + d] = T(0);
    });
  }
}

// dst(r)[d] = src[r * ld + d] * scale(r) for r < n, d < w: a tile's rows back to a
// [B, L, H, D] tensor, dst(r) pointing at row r's first element (coalesced on a GPU, as
// load_rows).
template <class T, class Member, class Dst, class Scale>
KOKKOS_INLINE_FUNCTION void store_rows(const Member& t, const T* src, int ld, int n, int w, Dst dst,
                                       Scale scale) {
  if constexpr (tile::kGpuLayout) {
    for_each_element(t, n, w, [&](int, int r, int d) { dst(r)[d] = src[r * ld + d] * scale(r); });
  } else {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int r) {
      const T s = scale(r);
      T* KOKKOS_RESTRICT out = dst(r);
      const T* KOKKOS_RESTRICT in = src + r * ld;
      for (int d = 0; d < w; ++d) out[d] = in[d] * s;
    });
  }
}

}  // namespace lcr::sdpa_detail
