#include "kernels/schemes/path/blocks.hpp"

#include "kernels/schemes/path/logit.hpp"
#include "kernels/schemes/path/team_la.hpp"

namespace lcr::path {
namespace {

using la::Member;
using la::N;
using la::Tr;

template <class F>
void launch(const char* name, const F& f, int league, size_t bytes) {
  la::TeamPolicy policy(league, Kokkos::AUTO);
  policy.set_scratch_size(f.level, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(name, policy, f);
}

// Team (b, KV head, block m): T_m, E_m, k~ and P_m.
template <class T>
struct ForwardKernel {
  View4<const T> w, k;
  View3<const T> beta;
  BlockState<T> st;
  int L, Hkv, d, level;
  bool has_k;

  static size_t scratch_bytes(int n, int d) {
    return 3 * Scratch2<T>::shmem_size(n, d) + 3 * Scratch2<T>::shmem_size(n, n) +
           Scratch1<T>::shmem_size(n);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int nb = st.nb, blk = st.block;
    const int m = t.league_rank() % nb, bh = t.league_rank() / nb;
    const int hk = bh % Hkv, b = bh / Hkv, s = m * blk;
    const int n = L - s < blk ? L - s : blk;
    Scratch2<T> W(t.team_scratch(level), blk, d), K(t.team_scratch(level), blk, d);
    Scratch2<T> Y(t.team_scratch(level), blk, d), G(t.team_scratch(level), blk, blk);
    Scratch2<T> Lam(t.team_scratch(level), blk, blk), Nm(t.team_scratch(level), blk, blk);
    Scratch1<T> bt(t.team_scratch(level), blk);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
      bt(i) = beta(b, s + i, hk);
      for (int c = 0; c < d; ++c) W(i, c) = w(b, s + i, hk, c);
      if (has_k)
        for (int c = 0; c < d; ++c) K(i, c) = k(b, s + i, hk, c);
    });
    t.team_barrier();
    la::gemm(t, N, Tr, n, n, d, T(1), W, W, T(0), G);  // Gram W W^T
    la::ut_inverse<T>(t, n, G, bt, Lam);
    auto Tg = Kokkos::subview(st.t, b, hk, m, Kokkos::ALL, Kokkos::ALL);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int r) {
      for (int c = 0; c < n; ++c) Tg(r, c) = Lam(r, c) * bt(c);  // T = Lam D
    });
    t.team_barrier();
    // P = I - W^T (T^T W)
    la::gemm(t, Tr, N, n, d, n, T(1), Tg, W, T(0), Y);
    auto Pg = Kokkos::subview(st.p, b, hk, m, Kokkos::ALL, Kokkos::ALL);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, d), [&](int i) {
      for (int c = 0; c < d; ++c) Pg(i, c) = i == c ? T(1) : T(0);
    });
    t.team_barrier();
    la::gemm(t, Tr, N, d, d, n, T(-1), W, Y, T(1), Pg);
    if (!has_k) return;
    // E = T strictLower(W K^T); k~ = K - E^T W
    la::gemm(t, N, Tr, n, n, d, T(1), W, K, T(0), Nm);
    la::mask_lower<T>(t, n, true, Nm);
    auto Eg = Kokkos::subview(st.e, b, hk, m, Kokkos::ALL, Kokkos::ALL);
    la::gemm(t, N, N, n, n, n, T(1), Tg, Nm, T(0), Eg);
    la::gemm(t, Tr, N, n, d, n, T(-1), Eg, W, T(1), K);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int j) {
      for (int c = 0; c < d; ++c) st.k_fold(b, s + j, hk, c) = K(j, c);
    });
  }
};

// Team (b, query head, block m): q~ = Q - (lower(Q W^T) T) W.
template <class T>
struct FoldQueriesKernel {
  View4<const T> w, q;
  View4<T> q_fold;
  View5<T> tm;
  int L, H, Hkv, d, blk, nb, level;

  static size_t scratch_bytes(int n, int d) {
    return 2 * Scratch2<T>::shmem_size(n, d) + 2 * Scratch2<T>::shmem_size(n, n);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int m = t.league_rank() % nb, bh = t.league_rank() / nb;
    const int h = bh % H, b = bh / H, hk = h / (H / Hkv), s = m * blk;
    const int n = L - s < blk ? L - s : blk;
    Scratch2<T> W(t.team_scratch(level), blk, d), Q(t.team_scratch(level), blk, d);
    Scratch2<T> M(t.team_scratch(level), blk, blk), C(t.team_scratch(level), blk, blk);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
      for (int c = 0; c < d; ++c) {
        W(i, c) = w(b, s + i, hk, c);
        Q(i, c) = q(b, s + i, h, c);
      }
    });
    t.team_barrier();
    la::gemm(t, N, Tr, n, n, d, T(1), Q, W, T(0), M);
    la::mask_lower<T>(t, n, false, M);
    auto Tg = Kokkos::subview(tm, b, hk, m, Kokkos::ALL, Kokkos::ALL);
    la::gemm(t, N, N, n, n, n, T(1), M, Tg, T(0), C);
    la::gemm(t, N, N, n, d, n, T(-1), C, W, T(1), Q);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
      for (int c = 0; c < d; ++c) q_fold(b, s + i, h, c) = Q(i, c);
    });
  }
};

}  // namespace

template <class T>
BlockState<T> block_forward(const View4<const T>& w, const View3<const T>& beta,
                            const View4<const T>& k, int block) {
  const int B = w.extent(0), L = w.extent(1), Hkv = w.extent(2), d = w.extent(3);
  BlockState<T> st;
  st.block = block;
  st.nb = num_blocks(L, block);
  const bool has_k = k.extent(0) > 0;
  st.t = View5<T>("lcr::path_t", B, Hkv, st.nb, block, block);
  st.p = View5<T>("lcr::path_p", B, Hkv, st.nb, d, d);
  if (has_k) {
    st.e = View5<T>("lcr::path_e", B, Hkv, st.nb, block, block);
    st.k_fold = View4<T>("lcr::path_k_fold", B, L, Hkv, d);
  }
  if (B == 0 || L == 0 || Hkv == 0) return st;
  const size_t bytes = ForwardKernel<T>::scratch_bytes(block, d);
  ForwardKernel<T> f{w, k, beta, st, L, Hkv, d, scratch_level(bytes), has_k};
  launch("lcr::path_block_forward", f, B * Hkv * st.nb, bytes);
  return st;
}

template <class T>
void block_fold_queries(const BlockState<T>& st, const View4<const T>& w, const View4<const T>& q,
                        const View4<T>& q_fold) {
  const int B = q.extent(0), L = q.extent(1), H = q.extent(2), d = q.extent(3);
  if (B == 0 || L == 0 || H == 0) return;
  const size_t bytes = FoldQueriesKernel<T>::scratch_bytes(st.block, d);
  FoldQueriesKernel<T> f{
      w, q, q_fold, st.t, L, H, int(w.extent(2)), d, st.block, st.nb, scratch_level(bytes)};
  launch("lcr::path_fold_queries", f, B * H * st.nb, bytes);
}

#define LCR_INSTANTIATE(T)                                                              \
  template BlockState<T> block_forward<T>(const View4<const T>&, const View3<const T>&, \
                                          const View4<const T>&, int);                  \
  template void block_fold_queries<T>(const BlockState<T>&, const View4<const T>&,      \
                                      const View4<const T>&, const View4<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr::path
