// Chunk-level PaTH quantities from the block ones (blocks.hpp): with the chunk cut into
// blocks 0..nb-1 (block transitions P_m, block-folded k^, q^),
//   k~_j = R_m^T k^_j,  R_m  = P_{m+1} ... P_{nb-1}   (suffix products)
//   q~_i = Lp_m q^_i,   Lp_m = P_0 ... P_{m-1}        (prefix products)
//   P    = Lp_{nb-1} P_{nb-1}.
// Backward: through these products into dk^, dq^, dP_m, then block_backward.
#include "kernels/schemes/path/ring.hpp"

#include <initializer_list>
#include <utility>

#include "kernels/base/error.hpp"
#include "kernels/schemes/path/blocks.hpp"
#include "kernels/schemes/path/team_la.hpp"

namespace lcr::path {
// Helpers sit in a named namespace, not an anonymous one: nvcc's rules for extended
// (device) lambdas are simplest to meet in functions with external linkage.
namespace ring_detail {

using la::Member;
using la::N;
using la::Tr;
using Range3 = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>;
using Kokkos::ALL;

template <class V>
KOKKOS_INLINE_FUNCTION auto mat(const V& v, int b, int hk, int m) {
  return Kokkos::subview(v, b, hk, m, ALL, ALL);
}

template <class V>
KOKKOS_INLINE_FUNCTION void set_identity(const Member& t, int d, const V& A) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(t, d), [&](int i) {
    for (int j = 0; j < d; ++j) A(i, j) = i == j ? 1 : 0;
  });
  t.team_barrier();
}

// Team (b, hk): R_{nb-1} = I, R_{m-1} = P_m R_m.
template <class T>
struct Suffix {
  View5<T> p, r;
  int Hkv, d, nb;
  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int hk = t.league_rank() % Hkv, b = t.league_rank() / Hkv;
    set_identity(t, d, mat(r, b, hk, nb - 1));
    for (int m = nb - 1; m >= 1; --m)
      la::gemm(t, N, N, d, d, d, T(1), mat(p, b, hk, m), mat(r, b, hk, m), T(0),
               mat(r, b, hk, m - 1));
  }
};

// Team (b, hk): backward of Suffix; dr holds the direct gradients of every R_m.
template <class T>
struct SuffixBackward {
  View5<T> p, r, dr, dp;
  int Hkv, d, nb;
  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int hk = t.league_rank() % Hkv, b = t.league_rank() / Hkv;
    for (int m = 1; m < nb; ++m) {
      la::gemm(t, N, Tr, d, d, d, T(1), mat(dr, b, hk, m - 1), mat(r, b, hk, m), T(1),
               mat(dp, b, hk, m));
      la::gemm(t, Tr, N, d, d, d, T(1), mat(p, b, hk, m), mat(dr, b, hk, m - 1), T(1),
               mat(dr, b, hk, m));
    }
  }
};

// Team (b, hk): Lp_0 = I, Lp_{m+1} = Lp_m P_m; total = Lp_{nb-1} P_{nb-1} when given.
template <class T>
struct Prefix {
  View5<T> p, lp;
  View4<T> total;
  int Hkv, d, nb;
  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int hk = t.league_rank() % Hkv, b = t.league_rank() / Hkv;
    set_identity(t, d, mat(lp, b, hk, 0));
    for (int m = 0; m + 1 < nb; ++m)
      la::gemm(t, N, N, d, d, d, T(1), mat(lp, b, hk, m), mat(p, b, hk, m), T(0),
               mat(lp, b, hk, m + 1));
    if (total.extent(0) > 0)
      la::gemm(t, N, N, d, d, d, T(1), mat(lp, b, hk, nb - 1), mat(p, b, hk, nb - 1), T(0),
               Kokkos::subview(total, b, hk, ALL, ALL));
  }
};

// Team (b, hk): backward of Prefix; dlp holds the direct gradients of every Lp_m.
template <class T>
struct PrefixBackward {
  View5<T> p, lp, dlp, dp;
  View4<const T> dtotal;
  int Hkv, d, nb;
  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int hk = t.league_rank() % Hkv, b = t.league_rank() / Hkv;
    if (dtotal.extent(0) > 0) {
      auto dT = Kokkos::subview(dtotal, b, hk, ALL, ALL);
      la::gemm(t, N, Tr, d, d, d, T(1), dT, mat(p, b, hk, nb - 1), T(1), mat(dlp, b, hk, nb - 1));
      la::gemm(t, Tr, N, d, d, d, T(1), mat(lp, b, hk, nb - 1), dT, T(1), mat(dp, b, hk, nb - 1));
    }
    for (int m = nb - 2; m >= 0; --m) {
      la::gemm(t, Tr, N, d, d, d, T(1), mat(lp, b, hk, m), mat(dlp, b, hk, m + 1), T(1),
               mat(dp, b, hk, m));
      la::gemm(t, N, Tr, d, d, d, T(1), mat(dlp, b, hk, m + 1), mat(p, b, hk, m), T(1),
               mat(dlp, b, hk, m));
    }
  }
};

// Team (b, hk, block m): dM_m += sum_{h in group} sum_{i in m} a_i c_i^T (a, c rows of
// [B, L, heads, d] tensors; heads = Hkv for keys, H for queries).
template <class T, class VO = View5<T>>
struct RowOuter {
  View4<const T> a, c;
  VO out;
  int L, heads, Hkv, d, blk, nb;
  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int m = t.league_rank() % nb, bh = t.league_rank() / nb;
    const int hk = bh % Hkv, b = bh / Hkv, G = heads / Hkv, s = m * blk;
    const int n = L - s < blk ? L - s : blk;
    const auto rows = Kokkos::make_pair(s, s + n);
    for (int gi = 0; gi < G; ++gi) {
      const int h = hk * G + gi;
      la::gemm(t, Tr, N, d, d, n, T(1), Kokkos::subview(a, b, rows, h, ALL),
               Kokkos::subview(c, b, rows, h, ALL), T(1), mat(out, b, hk, m));
    }
  }
};

// y_i (=|+=) op(M_m(i)) x_i per row, M [B, Hkv, nb, d, d], m(i) = i / blk (blk = 0: m = 0
// and M is [B, Hkv, 1, d, d]).
template <class T, class VM>
void rows_times(const VM& M, bool transpose, int blk, const View4<const T>& x, const View4<T>& y,
                bool accumulate) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2), d = x.extent(3);
  const int Hkv = M.extent(1);
  Kokkos::parallel_for(
      "lcr::path_rows_times", Range3({0, 0, 0}, {B, L, H}), KOKKOS_LAMBDA(int b, int i, int h) {
        const int hk = h / (H / Hkv), m = blk > 0 ? i / blk : 0;
        for (int r = 0; r < d; ++r) {
          T s = T(0);
          for (int c = 0; c < d; ++c)
            s += (transpose ? M(b, hk, m, c, r) : M(b, hk, m, r, c)) * x(b, i, h, c);
          y(b, i, h, r) = accumulate ? y(b, i, h, r) + s : s;
        }
      });
}

template <class T>
View5<T> suffix_products(const BlockState<T>& st, int B, int Hkv, int d) {
  View5<T> r("lcr::path_suffix", B, Hkv, st.nb, d, d);
  Kokkos::parallel_for("lcr::path_suffix", la::TeamPolicy(B * Hkv, Kokkos::AUTO),
                       Suffix<T>{st.p, r, Hkv, d, st.nb});
  return r;
}

template <class T>
View5<T> prefix_products(const BlockState<T>& st, int B, int Hkv, int d, const View4<T>& total) {
  View5<T> lp("lcr::path_prefix", B, Hkv, st.nb, d, d);
  Kokkos::parallel_for("lcr::path_prefix", la::TeamPolicy(B * Hkv, Kokkos::AUTO),
                       Prefix<T>{st.p, lp, total, Hkv, d, st.nb});
  return lp;
}

// Shapes of a chunk call: w [B, L, Hkv, d], beta [B, L, Hkv], and each of `rows`
// (name, tensor) [B, L, heads, d] with heads a multiple of Hkv.
template <class T>
void check_chunk(int block, const View4<const T>& w, const View3<const T>& beta,
                 std::initializer_list<std::pair<const char*, std::vector<int64_t>>> rows) {
  require(block >= 1, "PaTH block size must be >= 1, got ", block);
  const auto ws = shape_of(w);
  require(shape_of(beta) == std::vector<int64_t>{ws[0], ws[1], ws[2]}, "path beta has shape ",
          shape_string(shape_of(beta)), ", expected ", shape_string({ws[0], ws[1], ws[2]}),
          " to match w ", shape_string(ws));
  for (const auto& [name, s] : rows)
    require(s.size() == 4 && s[0] == ws[0] && s[1] == ws[1] && s[3] == ws[3] && ws[2] > 0 &&
                s[2] % ws[2] == 0,
            name, " has shape ", shape_string(s), ", expected [", ws[0], ", ", ws[1],
            ", a multiple of ", ws[2], ", ", ws[3], "] to match w ", shape_string(ws));
}

template <class T>
void check_dbeta(const View3<const T>& beta, const View3<T>& dbeta) {
  require(shape_of(dbeta) == shape_of(beta), "dbeta has shape ", shape_string(shape_of(dbeta)),
          ", expected the shape of beta ", shape_string(shape_of(beta)));
}

}  // namespace ring_detail

using namespace ring_detail;

template <class T>
void fold_keys_right(const View4<const T>& w, const View3<const T>& beta, const View4<const T>& k,
                     int block, const View4<T>& k_fold) {
  check_chunk<T>(block, w, beta, {{"k", shape_of(k)}, {"k_fold", shape_of(k_fold)}});
  const int B = w.extent(0), L = w.extent(1), Hkv = w.extent(2), d = w.extent(3);
  if (B * L * Hkv == 0) return;
  const BlockState<T> st = block_forward<T>(w, beta, k, block);
  const View5<T> r = suffix_products(st, B, Hkv, d);
  rows_times<T>(r, true, block, st.k_fold, k_fold, false);
}

template <class T>
void fold_keys_right_backward(const View4<const T>& w, const View3<const T>& beta,
                              const View4<const T>& k, int block, const View4<const T>& dk_fold,
                              const View4<T>& dk, const View4<T>& dw, const View3<T>& dbeta) {
  check_chunk<T>(block, w, beta,
                 {{"k", shape_of(k)},
                  {"dk_fold", shape_of(dk_fold)},
                  {"dk", shape_of(dk)},
                  {"dw", shape_of(dw)}});
  check_dbeta(beta, dbeta);
  const int B = w.extent(0), L = w.extent(1), Hkv = w.extent(2), d = w.extent(3);
  if (B * L * Hkv == 0) return;
  const BlockState<T> st = block_forward<T>(w, beta, k, block);
  const View5<T> r = suffix_products(st, B, Hkv, d);
  View4<T> dkb("lcr::path_dk_block", B, L, Hkv, d);
  rows_times<T>(r, false, block, dk_fold, dkb, false);  // dk^ = R dk~
  View5<T> dr("lcr::path_dsuffix", B, Hkv, st.nb, d, d), dp("lcr::path_dp", B, Hkv, st.nb, d, d);
  Kokkos::parallel_for("lcr::path_dsuffix_rows", la::TeamPolicy(B * Hkv * st.nb, Kokkos::AUTO),
                       RowOuter<T>{st.k_fold, dk_fold, dr, L, Hkv, Hkv, d, block, st.nb});
  Kokkos::parallel_for("lcr::path_dsuffix", la::TeamPolicy(B * Hkv, Kokkos::AUTO),
                       SuffixBackward<T>{st.p, r, dr, dp, Hkv, d, st.nb});
  BlockGrads<T> g{{}, dkb, dp, {}, dk, dw, dbeta};
  block_backward<T>(w, beta, {}, k, block, BlockAttention<T>{}, g);
}

template <class T>
void fold_queries_left(const View4<const T>& w, const View3<const T>& beta, const View4<const T>& q,
                       int block, const View4<T>& q_fold) {
  check_chunk<T>(block, w, beta, {{"q", shape_of(q)}, {"q_fold", shape_of(q_fold)}});
  const int B = w.extent(0), L = w.extent(1), Hkv = w.extent(2), d = w.extent(3);
  if (B * L * Hkv == 0 || q.extent(2) == 0) return;
  const BlockState<T> st = block_forward<T>(w, beta, {}, block);
  View4<T> qb("lcr::path_q_block", B, L, q.extent(2), d);
  block_fold_queries<T>(st, w, q, qb);
  const View5<T> lp = prefix_products<T>(st, B, Hkv, d, {});
  rows_times<T>(lp, false, block, qb, q_fold, false);
}

template <class T>
void fold_queries_left_backward(const View4<const T>& w, const View3<const T>& beta,
                                const View4<const T>& q, int block, const View4<const T>& dq_fold,
                                const View4<T>& dq, const View4<T>& dw, const View3<T>& dbeta) {
  check_chunk<T>(block, w, beta,
                 {{"q", shape_of(q)},
                  {"dq_fold", shape_of(dq_fold)},
                  {"dq", shape_of(dq)},
                  {"dw", shape_of(dw)}});
  check_dbeta(beta, dbeta);
  const int B = w.extent(0), L = w.extent(1), Hkv = w.extent(2), d = w.extent(3);
  const int H = q.extent(2);
  if (B * L * Hkv == 0 || H == 0) return;
  const BlockState<T> st = block_forward<T>(w, beta, {}, block);
  View4<T> qb("lcr::path_q_block", B, L, H, d);
  block_fold_queries<T>(st, w, q, qb);
  const View5<T> lp = prefix_products<T>(st, B, Hkv, d, {});
  View4<T> dqb("lcr::path_dq_block", B, L, H, d);
  rows_times<T>(lp, true, block, dq_fold, dqb, false);  // dq^ = Lp^T dq~
  View5<T> dlp("lcr::path_dprefix", B, Hkv, st.nb, d, d), dp("lcr::path_dp", B, Hkv, st.nb, d, d);
  Kokkos::parallel_for("lcr::path_dprefix_rows", la::TeamPolicy(B * Hkv * st.nb, Kokkos::AUTO),
                       RowOuter<T>{dq_fold, qb, dlp, L, H, Hkv, d, block, st.nb});
  Kokkos::parallel_for("lcr::path_dprefix", la::TeamPolicy(B * Hkv, Kokkos::AUTO),
                       PrefixBackward<T>{st.p, lp, dlp, dp, {}, Hkv, d, st.nb});
  BlockGrads<T> g{dqb, {}, dp, dq, {}, dw, dbeta};
  block_backward<T>(w, beta, q, {}, block, BlockAttention<T>{}, g);
}

template <class T>
void chunk_transition(const View4<const T>& w, const View3<const T>& beta, int block,
                      const View4<T>& p) {
  check_chunk<T>(block, w, beta, {});
  const int B = w.extent(0), L = w.extent(1), Hkv = w.extent(2), d = w.extent(3);
  require(shape_of(p) == std::vector<int64_t>{B, Hkv, d, d}, "chunk transition P has shape ",
          shape_string(shape_of(p)), ", expected ", shape_string({B, Hkv, d, d}));
  if (L == 0) {  // an empty chunk transitions nothing: P = I
    Kokkos::parallel_for(
        "lcr::path_identity", Range3({0, 0, 0}, {B, Hkv, d}), KOKKOS_LAMBDA(int b, int h, int r) {
          for (int c = 0; c < d; ++c) p(b, h, r, c) = r == c ? T(1) : T(0);
        });
    return;
  }
  const BlockState<T> st = block_forward<T>(w, beta, {}, block);
  prefix_products<T>(st, B, Hkv, d, p);
}

template <class T>
void chunk_transition_backward(const View4<const T>& w, const View3<const T>& beta, int block,
                               const View4<const T>& dp_chunk, const View4<T>& dw,
                               const View3<T>& dbeta) {
  check_chunk<T>(block, w, beta, {{"dw", shape_of(dw)}});
  check_dbeta(beta, dbeta);
  require(shape_of(dp_chunk) == std::vector<int64_t>{int64_t(w.extent(0)), int64_t(w.extent(2)),
                                                     int64_t(w.extent(3)), int64_t(w.extent(3))},
          "dP has shape ", shape_string(shape_of(dp_chunk)), ", expected [B, Hkv, d, d] of w ",
          shape_string(shape_of(w)));
  const int B = w.extent(0), L = w.extent(1), Hkv = w.extent(2), d = w.extent(3);
  if (B * L * Hkv == 0) return;
  const BlockState<T> st = block_forward<T>(w, beta, {}, block);
  const View5<T> lp = prefix_products<T>(st, B, Hkv, d, {});
  View5<T> dlp("lcr::path_dprefix", B, Hkv, st.nb, d, d), dp("lcr::path_dp", B, Hkv, st.nb, d, d);
  Kokkos::parallel_for("lcr::path_dprefix", la::TeamPolicy(B * Hkv, Kokkos::AUTO),
                       PrefixBackward<T>{st.p, lp, dlp, dp, dp_chunk, Hkv, d, st.nb});
  BlockGrads<T> g{{}, {}, dp, {}, {}, dw, dbeta};
  block_backward<T>(w, beta, {}, {}, block, BlockAttention<T>{}, g);
}

template <class T>
void apply_transition(const View4<const T>& p, const View4<const T>& x, const View4<T>& y) {
  require(p.extent(0) == x.extent(0) && p.extent(2) == x.extent(3) && p.extent(3) == x.extent(3) &&
              p.extent(1) > 0 && x.extent(2) % p.extent(1) == 0,
          "apply_transition: P ", shape_string(shape_of(p)), " does not fit x ",
          shape_string(shape_of(x)), " (P must be [B, Hkv, d, d] with Hkv dividing x's heads)");
  const auto p5 =
      Kokkos::View<const T*****, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryUnmanaged>(
          p.data(), p.extent(0), p.extent(1), 1, p.extent(2), p.extent(3));
  rows_times<T>(p5, false, 0, x, y, false);
}

template <class T>
void apply_transition_backward(const View4<const T>& p, const View4<const T>& x,
                               const View4<const T>& dy, const View4<T>& dp, const View4<T>& dx) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2), d = x.extent(3);
  const int Hkv = p.extent(1);
  using U5 = Kokkos::View<T*****, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryUnmanaged>;
  const auto p5 =
      Kokkos::View<const T*****, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryUnmanaged>(
          p.data(), B, Hkv, 1, d, d);
  rows_times<T>(p5, true, 0, dy, dx, true);
  const U5 dp5(dp.data(), B, Hkv, 1, d, d);
  Kokkos::parallel_for("lcr::path_apply_transition_dp", la::TeamPolicy(B * Hkv, Kokkos::AUTO),
                       RowOuter<T, U5>{dy, x, dp5, L, H, Hkv, d, L > 0 ? L : 1, 1});
}

#define LCR_INSTANTIATE(T)                                                                        \
  template void fold_keys_right<T>(const View4<const T>&, const View3<const T>&,                  \
                                   const View4<const T>&, int, const View4<T>&);                  \
  template void fold_keys_right_backward<T>(const View4<const T>&, const View3<const T>&,         \
                                            const View4<const T>&, int, const View4<const T>&,    \
                                            const View4<T>&, const View4<T>&, const View3<T>&);   \
  template void fold_queries_left<T>(const View4<const T>&, const View3<const T>&,                \
                                     const View4<const T>&, int, const View4<T>&);                \
  template void fold_queries_left_backward<T>(const View4<const T>&, const View3<const T>&,       \
                                              const View4<const T>&, int, const View4<const T>&,  \
                                              const View4<T>&, const View4<T>&, const View3<T>&); \
  template void chunk_transition<T>(const View4<const T>&, const View3<const T>&, int,            \
                                    const View4<T>&);                                             \
  template void chunk_transition_backward<T>(const View4<const T>&, const View3<const T>&, int,   \
                                             const View4<const T>&, const View4<T>&,              \
                                             const View3<T>&);                                    \
  template void apply_transition<T>(const View4<const T>&, const View4<const T>&,                 \
                                    const View4<T>&);                                             \
  template void apply_transition_backward<T>(const View4<const T>&, const View4<const T>&,        \
                                             const View4<const T>&, const View4<T>&,              \
                                             const View4<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr::path
