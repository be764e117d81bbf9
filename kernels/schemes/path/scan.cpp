#include "kernels/schemes/path/scan.hpp"

#include <limits>

#include "kernels/schemes/path/blocks.hpp"
#include "kernels/schemes/path/logit.hpp"
#include "kernels/schemes/path/team_la.hpp"

namespace lcr::path {
namespace {

using la::Member;
using la::N;
using la::Tr;

// Team (b, query head h, query block a): online softmax over the block itself, then over
// earlier blocks right to left (scan.hpp).
template <class T>
struct ForwardScan {
  PathArgs<T> a;
  BlockState<T> st;
  View4<T> o;
  View3<T> lse;
  int L, H, Hkv, d, dv, level;
  bool has_fox;
  T neg_inf;

  static size_t scratch_bytes(int n, int d, int dv) {
    return 4 * Scratch2<T>::shmem_size(n, d) + Scratch2<T>::shmem_size(d, n) +
           2 * Scratch2<T>::shmem_size(n, dv) + 3 * Scratch2<T>::shmem_size(n, n) +
           Scratch2<T>::shmem_size(d, d) + 3 * Scratch1<T>::shmem_size(n);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int nb = st.nb, blk = st.block;
    const int qa = t.league_rank() % nb, bh = t.league_rank() / nb;
    const int h = bh % H, b = bh / H, hk = h / (H / Hkv), s = qa * blk;
    const int n = L - s < blk ? L - s : blk;
    const auto lv = level;
    Scratch2<T> Q(t.team_scratch(lv), blk, d), X(t.team_scratch(lv), blk, d);
    Scratch2<T> Xn(t.team_scratch(lv), blk, d), W(t.team_scratch(lv), blk, d);
    Scratch2<T> KT(t.team_scratch(lv), d, blk);
    Scratch2<T> V(t.team_scratch(lv), blk, dv), acc(t.team_scratch(lv), blk, dv);
    Scratch2<T> S(t.team_scratch(lv), blk, blk), M(t.team_scratch(lv), blk, blk);
    Scratch2<T> C(t.team_scratch(lv), blk, blk), PT(t.team_scratch(lv), d, d);
    Scratch1<T> mx(t.team_scratch(lv), blk), lsum(t.team_scratch(lv), blk);
    Scratch1<T> fq(t.team_scratch(lv), blk);

    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
      for (int c = 0; c < d; ++c) {
        Q(i, c) = a.q(b, s + i, h, c);
        W(i, c) = a.w(b, s + i, hk, c);
      }
      for (int c = 0; c < dv; ++c) acc(i, c) = T(0);
      mx(i) = neg_inf;  // any value: the first update sees lsum == 0
      lsum(i) = T(0);
      fq(i) = has_fox ? a.fox_q(b, s + i, h) : T(0);
    });
    load_keys(t, b, hk, s, n, a.k, KT, V);
    la::gemm(t, N, Tr, n, n, d, T(1), Q, W, T(0), M);  // M = lower(Q W^T)
    la::mask_lower<T>(t, n, false, M);
    la::gemm(t, N, N, n, n, d, T(1), Q, KT, T(0), S);  // Q K^T - M E: intra-block logits
    auto Eg = Kokkos::subview(st.e, b, hk, qa, Kokkos::ALL, Kokkos::ALL);
    la::gemm(t, N, N, n, n, n, T(-1), M, Eg, T(1), S);
    update(t, b, h, s, n, n, true, S, V, mx, lsum, acc, fq);
    // Queries folded to the block's left boundary: x = q - (M T) W.
    auto Tg = Kokkos::subview(st.t, b, hk, qa, Kokkos::ALL, Kokkos::ALL);
    la::gemm(t, N, N, n, n, n, T(1), M, Tg, T(0), C);
    la::copy(t, n, d, Q, X);
    la::gemm(t, N, N, n, d, n, T(-1), C, W, T(1), X);
    for (int c = qa - 1; c >= 0; --c) {
      load_keys(t, b, hk, c * blk, blk, st.k_fold, KT, V);
      la::gemm(t, N, N, n, blk, d, T(1), X, KT, T(0), S);
      update(t, b, h, c * blk, n, blk, false, S, V, mx, lsum, acc, fq);
      if (c == 0) break;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, d), [&](int r) {
        for (int l = 0; l < d; ++l) PT(l, r) = st.p(b, hk, c, r, l);
      });
      t.team_barrier();
      la::gemm(t, N, N, n, d, d, T(1), X, PT, T(0), Xn);  // x <- P_c x
      auto tmp = X;
      X = Xn;
      Xn = tmp;
    }
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
      const T inv = T(1) / lsum(i);  // > 0: every row sees its own key
      for (int c = 0; c < dv; ++c) o(b, s + i, h, c) = acc(i, c) * inv;
      lse(b, h, s + i) = mx(i) + kmath::log(lsum(i));
    });
  }

  // KT = keys^T of rows j0 .. j0+nk (d x nk), V = their values.
  template <class KV>
  KOKKOS_FUNCTION void load_keys(const Member& t, int b, int hk, int j0, int nk, const KV& keys,
                                 const Scratch2<T>& KT, const Scratch2<T>& V) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk), [&](int j) {
      for (int c = 0; c < d; ++c) KT(c, j) = keys(b, j0 + j, hk, c);
      for (int c = 0; c < dv; ++c) V(j, c) = a.v(b, j0 + j, hk, c);
    });
    t.team_barrier();
  }

  // Online softmax with the raw logits S [nq, nk] of key rows j0.. (causal: j <= i). Each
  // row's logits, max, exp and sum are contiguous loops; P (zero past the causal edge) then
  // goes into one team product acc += P V.
  KOKKOS_FUNCTION void update(const Member& t, int b, int h, int j0, int nq, int nk, bool causal,
                              const Scratch2<T>& S, const Scratch2<T>& V, const Scratch1<T>& mx,
                              const Scratch1<T>& lsum, const Scratch2<T>& acc,
                              const Scratch1<T>& fq) const {
    const Logit<T> logit{a.scale, a.softcap};
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int i) {
      const int jn = causal ? i + 1 : nk;
      T* KOKKOS_RESTRICT srow = &S(i, 0);
      if (has_fox) {
        for (int j = 0; j < jn; ++j) srow[j] = logit(srow[j], fq(i), a.fox_k(b, j0 + j, h));
      } else {
        for (int j = 0; j < jn; ++j) srow[j] = logit(srow[j], T(0), T(0));
      }
      const T m_new = tile::max_of(srow, jn, mx(i));
      for (int j = 0; j < jn; ++j) srow[j] -= m_new;
      tile::exp_or_zero(srow, jn);
      for (int j = jn; j < nk; ++j) srow[j] = T(0);
      const T corr = lsum(i) == T(0) ? T(0) : kmath::exp(mx(i) - m_new);
      lsum(i) = lsum(i) * corr + tile::sum_of(srow, jn);
      mx(i) = m_new;
      T* KOKKOS_RESTRICT arow = &acc(i, 0);
      for (int c = 0; c < dv; ++c) arow[c] *= corr;
    });
    t.team_barrier();
    la::gemm(t, N, N, nq, dv, nk, T(1), S, V, T(1), acc);
  }
};

}  // namespace

template <class T>
void path_forward(const PathArgs<T>& a, const View4<T>& o, const View3<T>& lse) {
  const int B = a.q.extent(0), L = a.q.extent(1), H = a.q.extent(2), d = a.q.extent(3);
  const int Hkv = a.k.extent(2), dv = a.v.extent(3);
  if (B == 0 || L == 0 || H == 0) return;
  const BlockState<T> st = block_forward<T>(a.w, a.beta, a.k, a.block);
  const size_t bytes = ForwardScan<T>::scratch_bytes(a.block, d, dv);
  ForwardScan<T> f{a,
                   st,
                   o,
                   lse,
                   L,
                   H,
                   Hkv,
                   d,
                   dv,
                   scratch_level(bytes),
                   a.fox_q.extent(0) > 0,
                   -std::numeric_limits<T>::infinity()};
  la::TeamPolicy policy(B * H * st.nb, Kokkos::AUTO);
  policy.set_scratch_size(f.level, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for("lcr::path_forward", policy, f);
}

#define LCR_INSTANTIATE(T) \
  template void path_forward<T>(const PathArgs<T>&, const View4<T>&, const View3<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr::path
