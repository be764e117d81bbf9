#pragma once
// Small dense linear algebra for one Kokkos team on scratch (or global) 2-D views: what
// the PaTH block kernels are made of. Every routine splits output rows over the team's
// threads and ends with a team barrier, so its result can be read right away.
#include "kernels/attention/kokkos/tile.hpp"
#include "kernels/base/team_policy.hpp"

namespace lcr::path::la {

using TeamPolicy = DynamicTeamPolicy;
using Member = TeamMember;

enum Op { N = 0, Tr = 1 };

// C[i][j] = beta C[i][j] + alpha sum_l op(A)[i][l] op(B)[l][j] for i < m, j < p, l < k.
// With op(B) = B the inner loop runs along a row of B and C (vectorisable axpy form);
// with op(B) = B^T it is a dot product along rows of A and B.
// Row-major B and C, beta 0 or 1 and whole register blocks (m a multiple of 4, p of the
// SIMD block width: PaTH's 64-row blocks at d = 64 or 128) take the register-blocked tile
// product, which sums each element over l in the same order (op(B) = B^T on a SIMD CPU too,
// as alpha op(A) B^T summed onto C: the last bits differ from the loop's alpha (sum) + C).
template <class T, class VA, class VB, class VC>
KOKKOS_INLINE_FUNCTION void gemm(const Member& t, Op ta, Op tb, int m, int p, int k, T alpha,
                                 const VA& A, const VB& B, T beta, const VC& C) {
  if (tb == N && (beta == T(0) || beta == T(1)) && m % tile::kBlockRows == 0 &&
      p % tile::block_cols<T>() == 0 && B.stride_1() == 1 && C.stride_1() == 1) {
    const int rs = int(ta == N ? A.stride_0() : A.stride_1());
    const int cs = int(ta == N ? A.stride_1() : A.stride_0());
    if (beta == T(0))
      tile::gemm<false>(t, C.data(), int(C.stride_0()), A.data(), rs, cs, B.data(),
                        int(B.stride_0()), m, p, k, alpha);
    else
      tile::gemm<true>(t, C.data(), int(C.stride_0()), A.data(), rs, cs, B.data(),
                       int(B.stride_0()), m, p, k, alpha);
    t.team_barrier();
    return;
  }
#if LCR_TILE_SIMD
  if (ta == N && tb == Tr && (beta == T(0) || beta == T(1)) && m % tile::kBlockRows == 0 &&
      p % tile::block_cols<T>() == 0 && k <= tile::kMaxNtDepth && A.stride_1() == 1 &&
      B.stride_1() == 1 && C.stride_1() == 1) {
    if (beta == T(0))
      tile::gemm_nt<false>(t, C.data(), int(C.stride_0()), A.data(), int(A.stride_0()), B.data(),
                           int(B.stride_0()), m, p, k, alpha);
    else
      tile::gemm_nt<true>(t, C.data(), int(C.stride_0()), A.data(), int(A.stride_0()), B.data(),
                          int(B.stride_0()), m, p, k, alpha);
    t.team_barrier();
    return;
  }
#endif
  Kokkos::parallel_for(Kokkos::TeamThreadRange(t, m), [&](int i) {
    if (tb == N) {
      for (int j = 0; j < p; ++j) C(i, j) = beta == T(0) ? T(0) : beta * C(i, j);
      for (int l = 0; l < k; ++l) {
        const T a = alpha * (ta == N ? A(i, l) : A(l, i));
        if (a == T(0)) continue;
        for (int j = 0; j < p; ++j) C(i, j) += a * B(l, j);
      }
    } else {
      for (int j = 0; j < p; ++j) {
        T s = T(0);
        if (ta == N)
          for (int l = 0; l < k; ++l) s += A(i, l) * B(j, l);
        else
          for (int l = 0; l < k; ++l) s += A(l, i) * B(j, l);
        C(i, j) = (beta == T(0) ? T(0) : beta * C(i, j)) + alpha * s;
      }
    }
  });
  t.team_barrier();
}

// Keeps the lower triangle of the m x m matrix A (strict: below the diagonal only).
template <class T, class V>
KOKKOS_INLINE_FUNCTION void mask_lower(const Member& t, int m, bool strict, const V& A) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(t, m), [&](int i) {
    for (int j = strict ? i : i + 1; j < m; ++j) A(i, j) = T(0);
  });
  t.team_barrier();
}

template <class T, class V>
KOKKOS_INLINE_FUNCTION void fill(const Member& t, int m, int p, T value, const V& A) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(t, m), [&](int i) {
    for (int j = 0; j < p; ++j) A(i, j) = value;
  });
  t.team_barrier();
}

// Dst = Src for an m x p block.
template <class VS, class VD>
KOKKOS_INLINE_FUNCTION void copy(const Member& t, int m, int p, const VS& src, const VD& dst) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(t, m), [&](int i) {
    for (int j = 0; j < p; ++j) dst(i, j) = src(i, j);
  });
  t.team_barrier();
}

// Lam = (I + strictLower(diag(beta) G))^-1 for the n x n Gram matrix G = W W^T, by
// forward substitution one row at a time (row r needs rows < r):
//   Lam[r][c] = delta_rc - beta_r sum_{c <= l < r} G[r][l] Lam[l][c].
// Unit lower triangular. Bounded for beta in [0, 2] and unit w: Lam diag(beta) y is the
// coefficient vector of a Householder recursion whose state never grows (DESIGN.md s3).
template <class T, class VG, class VB, class VL>
KOKKOS_INLINE_FUNCTION void ut_inverse(const Member& t, int n, const VG& G, const VB& beta,
                                       const VL& Lam) {
  for (int r = 0; r < n; ++r) {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int c) {
      if (c > r) {
        Lam(r, c) = T(0);
        return;
      }
      T s = T(0);
      for (int l = c; l < r; ++l) s += G(r, l) * Lam(l, c);
      Lam(r, c) = (c == r ? T(1) : T(0)) - beta(r) * s;
    });
    t.team_barrier();
  }
}

}  // namespace lcr::path::la
