#include "core/model/gemm.hpp"

#include "core/error.hpp"

namespace lcr {
namespace {

// Tile sizes: a team computes a TM x TN block of C, stepping through K in TK slabs staged
// in scratch (3 x 32 x 32 doubles = 24 KiB, within level-0 scratch on every backend).
constexpr int TM = 32, TN = 32, TK = 32;

template <class T>
struct GemmTile {
  using Team = Kokkos::TeamPolicy<ExecSpace>::member_type;
  using Scratch = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace::scratch_memory_space,
                               Kokkos::MemoryUnmanaged>;
  bool ta, tb;
  int64_t M, N, K;
  T alpha;
  const T* A;
  int64_t lda;
  const T* B;
  int64_t ldb;
  T beta;
  T* C;
  int64_t ldc;
  int64_t tiles_n;

  static size_t scratch_bytes() { return 3 * Scratch::shmem_size(TM, TK); }

  KOKKOS_INLINE_FUNCTION T a_at(int64_t i, int64_t k) const {
    return ta ? A[k * lda + i] : A[i * lda + k];
  }
  KOKKOS_INLINE_FUNCTION T b_at(int64_t k, int64_t j) const {
    return tb ? B[j * ldb + k] : B[k * ldb + j];
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Team& team) const {
    const int64_t i0 = int64_t(team.league_rank() / tiles_n) * TM;
    const int64_t j0 = int64_t(team.league_rank() % tiles_n) * TN;
    Scratch As(team.team_scratch(0), TM, TK), Bs(team.team_scratch(0), TK, TN),
        Cs(team.team_scratch(0), TM, TN);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, TM * TN),
                         [&](int t) { Cs(t / TN, t % TN) = T(0); });
    for (int64_t k0 = 0; k0 < K; k0 += TK) {
      team.team_barrier();
      // Stage op(A)[i0.., k0..] and op(B)[k0.., j0..]; zeros outside the matrix so the
      // inner loop needs no bounds checks.
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, TM * TK), [&](int t) {
        const int64_t i = i0 + t / TK, k = k0 + t % TK;
        As(t / TK, t % TK) = (i < M && k < K) ? a_at(i, k) : T(0);
      });
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, TK * TN), [&](int t) {
        const int64_t k = k0 + t / TN, j = j0 + t % TN;
        Bs(t / TN, t % TN) = (k < K && j < N) ? b_at(k, j) : T(0);
      });
      team.team_barrier();
      // Row i of the C tile: an axpy over kk with contiguous rows of Bs (vectorises on CPU).
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, TM), [&](int i) {
        for (int kk = 0; kk < TK; ++kk) {
          const T a = As(i, kk);
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, TN),
                               [&](int j) { Cs(i, j) += a * Bs(kk, j); });
        }
      });
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, TM * TN), [&](int t) {
      const int64_t i = i0 + t / TN, j = j0 + t % TN;
      if (i < M && j < N) {
        T& c = C[i * ldc + j];
        c = beta == T(0) ? alpha * Cs(t / TN, t % TN) : alpha * Cs(t / TN, t % TN) + beta * c;
      }
    });
  }
};

}  // namespace

template <class T>
void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  require(M >= 0 && N >= 0 && K >= 0, "gemm: negative size M=", M, " N=", N, " K=", K);
  require(lda >= (ta == Trans::No ? K : M) && ldb >= (tb == Trans::No ? N : K) && ldc >= N,
          "gemm: leading dimension too small (lda=", lda, " ldb=", ldb, " ldc=", ldc, ")");
  if (M == 0 || N == 0) return;
  const int64_t tiles_m = (M + TM - 1) / TM, tiles_n = (N + TN - 1) / TN;
  GemmTile<T> f{ta == Trans::Yes, tb == Trans::Yes, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                tiles_n};
  Kokkos::TeamPolicy<ExecSpace> policy(int(tiles_m * tiles_n), Kokkos::AUTO);
  Kokkos::parallel_for(
      "lcr::gemm", policy.set_scratch_size(0, Kokkos::PerTeam(GemmTile<T>::scratch_bytes())), f);
}

template void gemm<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(Trans, Trans, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

}  // namespace lcr
