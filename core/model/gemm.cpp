#include "core/model/gemm.hpp"

#include "kernels/base/error.hpp"

namespace lcr {
namespace {

// Register blocking: one work item computes an MR x NR block of C over the whole K,
// accumulating in a local array the compiler keeps in registers (4 x 8 floats = 8 SSE
// registers). Per k it loads NR contiguous values of op(B)'s row k and MR values of op(A)'s
// column k: MR NR multiply-adds per MR + NR loads. Work items walk down a column of blocks
// (i fastest), so the K x NR panel of B stays in L1 across them. op(B) is first packed into
// a dense row-major [K, N] buffer when B is transposed, so the inner loop is always unit
// stride over j. (A GPU backend would rather stage tiles in team scratch; the CUDA path
// calls cuBLAS behind this same function.)
constexpr int MR = 4, NR = 8;

template <class T>
struct MicroTiles {
  bool ta;
  int64_t M, N, K;
  T alpha;
  const T* A;
  int64_t lda;
  const T* B;  // op(B), row-major [K, N] with row stride ldb
  int64_t ldb;
  T beta;
  T* C;
  int64_t ldc;
  int64_t tiles_m;

  KOKKOS_INLINE_FUNCTION T a_at(int64_t i, int64_t k) const {
    return ta ? A[k * lda + i] : A[i * lda + k];
  }

  KOKKOS_INLINE_FUNCTION void store(int64_t i, int64_t j, T acc) const {
    T& c = C[i * ldc + j];
    c = beta == T(0) ? alpha * acc : alpha * acc + beta * c;
  }

  KOKKOS_INLINE_FUNCTION void operator()(int64_t t) const {
    const int64_t i0 = (t % tiles_m) * MR, j0 = (t / tiles_m) * NR;
    T acc[MR][NR];
    for (int r = 0; r < MR; ++r)
      for (int c = 0; c < NR; ++c) acc[r][c] = T(0);
    if (i0 + MR <= M && j0 + NR <= N) {  // full block: fixed trip counts, unrolled
      for (int64_t k = 0; k < K; ++k) {
        const T* b = B + k * ldb + j0;
        T a[MR];
        for (int r = 0; r < MR; ++r) a[r] = a_at(i0 + r, k);
        for (int r = 0; r < MR; ++r)
          for (int c = 0; c < NR; ++c) acc[r][c] += a[r] * b[c];
      }
      for (int r = 0; r < MR; ++r)
        for (int c = 0; c < NR; ++c) store(i0 + r, j0 + c, acc[r][c]);
      return;
    }
    const int mr = int(M - i0 < MR ? M - i0 : MR), nr = int(N - j0 < NR ? N - j0 : NR);
    for (int64_t k = 0; k < K; ++k) {
      const T* b = B + k * ldb + j0;
      for (int r = 0; r < mr; ++r) {
        const T a = a_at(i0 + r, k);
        for (int c = 0; c < nr; ++c) acc[r][c] += a * b[c];
      }
    }
    for (int r = 0; r < mr; ++r)
      for (int c = 0; c < nr; ++c) store(i0 + r, j0 + c, acc[r][c]);
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
  using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>;
  View1<T> packed;
  if (tb == Trans::Yes && K > 0) {  // op(B)[k, j] = B[j, k]: transpose into [K, N]
    packed =
        View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::gemm_bt"), size_t(K * N));
    const T* src = B;
    T* dst = packed.data();
    Kokkos::parallel_for(
        "lcr::gemm_pack_bt", Range(0, K * N),
        KOKKOS_LAMBDA(int64_t t) { dst[t] = src[(t % N) * ldb + t / N]; });
    B = packed.data();
    ldb = N;
  }
  const int64_t tiles_m = (M + MR - 1) / MR, tiles_n = (N + NR - 1) / NR;
  MicroTiles<T> f{ta == Trans::Yes, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, tiles_m};
  Kokkos::parallel_for("lcr::gemm", Range(0, tiles_m * tiles_n), f);
}

template void gemm<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(Trans, Trans, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

}  // namespace lcr
