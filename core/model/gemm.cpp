#include "core/model/gemm.hpp"

#include <cstring>

#include "kernels/base/error.hpp"

namespace lcr {
namespace {

// The problem as every kernel below sees it: op(B) is row-major [K, N] with row stride ldb
// (packed first when B is transposed); op(A)(i, k) is read in place.
template <class T>
struct Problem {
  bool ta;
  int64_t M, N, K;
  T alpha;
  const T* A;
  int64_t lda;
  const T* B;
  int64_t ldb;
  T beta;
  T* C;
  int64_t ldc;

  KOKKOS_INLINE_FUNCTION T a_at(int64_t i, int64_t k) const {
    return ta ? A[k * lda + i] : A[i * lda + k];
  }
  KOKKOS_INLINE_FUNCTION void store(int64_t i, int64_t j, T acc) const {
    T& c = C[i * ldc + j];
    c = beta == T(0) ? alpha * acc : alpha * acc + beta * c;
  }
};

// The portable kernel (any backend, GPUs included): one work item computes an MR x NR block
// of C over the whole K in a local array the compiler keeps in registers. Per k it loads NR
// contiguous values of op(B)'s row k and MR values of op(A)'s column k. Work items walk
// down a column of blocks (i fastest), so the K x NR panel of B stays in cache across them.
// (The CUDA model calls cuBLAS instead.)
constexpr int MR = 4, NR = 8;

template <class T>
struct MicroTiles {
  Problem<T> p;
  int64_t tiles_m;

  KOKKOS_INLINE_FUNCTION void operator()(int64_t t) const {
    const int64_t i0 = (t % tiles_m) * MR, j0 = (t / tiles_m) * NR;
    T acc[MR][NR];
    for (int r = 0; r < MR; ++r)
      for (int c = 0; c < NR; ++c) acc[r][c] = T(0);
    if (i0 + MR <= p.M && j0 + NR <= p.N) {  // full block: fixed trip counts, unrolled
      for (int64_t k = 0; k < p.K; ++k) {
        const T* b = p.B + k * p.ldb + j0;
        T a[MR];
        for (int r = 0; r < MR; ++r) a[r] = p.a_at(i0 + r, k);
        for (int r = 0; r < MR; ++r)
          for (int c = 0; c < NR; ++c) acc[r][c] += a[r] * b[c];
      }
      for (int r = 0; r < MR; ++r)
        for (int c = 0; c < NR; ++c) p.store(i0 + r, j0 + c, acc[r][c]);
      return;
    }
    const int mr = int(p.M - i0 < MR ? p.M - i0 : MR), nr = int(p.N - j0 < NR ? p.N - j0 : NR);
    for (int64_t k = 0; k < p.K; ++k) {
      const T* b = p.B + k * p.ldb + j0;
      for (int r = 0; r < mr; ++r) {
        const T a = p.a_at(i0 + r, k);
        for (int c = 0; c < nr; ++c) acc[r][c] += a * b[c];
      }
    }
    for (int r = 0; r < mr; ++r)
      for (int c = 0; c < nr; ++c) p.store(i0 + r, j0 + c, acc[r][c]);
  }
};

GemmKernel g_kernel = GemmKernel::Best;

}  // namespace

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(__CUDACC__) && \
    !defined(__HIPCC__)
// The host kernel on x86-64. A portable build targets SSE2, yet the CPUs it runs on have
// AVX2 and FMA (since 2013) and often AVX-512: the same register-blocked loop is compiled
// for each (target attributes) and the widest the CPU supports is chosen at run time, so a
// Debian build trains at the CPU's vector width without -march. FMA rounds each product
// once, so results differ in the last bits between CPUs (and from the portable kernel), not
// between runs on one CPU. Every element is still summed over k in increasing order.
#define LCR_GEMM_X86 1
namespace {

// A strip: C rows i0 .. i0 + MRS, columns j0 + v W (v < NV packs of W = Bytes / sizeof(T)
// elements), over the whole K: MRS x NV vector accumulators in registers. Per k: NV packed
// loads of op(B)'s row, MRS broadcasts of op(A), MRS NV vector multiply-adds.
template <class T, int Bytes, int MRS, int NV>
[[gnu::always_inline]] inline void strip(const Problem<T>& p, int64_t i0, int64_t j0) {
  typedef T P __attribute__((vector_size(Bytes)));
  constexpr int W = Bytes / int(sizeof(T));
  P acc[MRS][NV];
  for (int r = 0; r < MRS; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = P{};
  const T* b = p.B + j0;
  for (int64_t k = 0; k < p.K; ++k, b += p.ldb) {
    P bv[NV];
    for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + v * W, sizeof(P));
    for (int r = 0; r < MRS; ++r) {
      const T a = p.a_at(i0 + r, k);
      for (int v = 0; v < NV; ++v) acc[r][v] += a * bv[v];
    }
  }
  for (int r = 0; r < MRS; ++r)
    for (int v = 0; v < NV; ++v) {
      T* c = p.C + (i0 + r) * p.ldc + j0 + v * W;
      P out = p.alpha * acc[r][v];
      if (p.beta != T(0)) {
        P old;
        std::memcpy(&old, c, sizeof(P));
        out += p.beta * old;
      }
      std::memcpy(c, &out, sizeof(P));
    }
}

// Rows i0 .. i0 + mr (mr <= MR) by NV packs at j0. (Templates, not lambdas: a lambda is a
// function of its own, compiled for the default target rather than the caller's.)
template <class T, int Bytes, int NV>
[[gnu::always_inline]] inline void rows(const Problem<T>& p, int64_t i0, int mr, int64_t j0) {
  if (mr == MR) return strip<T, Bytes, MR, NV>(p, i0, j0);
  for (int r = 0; r < mr; ++r) strip<T, Bytes, 1, NV>(p, i0 + r, j0);
}

// The block at (i0, j0) of mr rows and nv packs (1 .. NVMax).
template <class T, int Bytes, int NVMax>
[[gnu::always_inline]] inline void block(const Problem<T>& p, int64_t i0, int mr, int64_t j0,
                                         int nv) {
  if constexpr (NVMax >= 4)
    if (nv == 4) return rows<T, Bytes, 4>(p, i0, mr, j0);
  if constexpr (NVMax >= 3)
    if (nv == 3) return rows<T, Bytes, 3>(p, i0, mr, j0);
  if (nv == 2) return rows<T, Bytes, 2>(p, i0, mr, j0);
  rows<T, Bytes, 1>(p, i0, mr, j0);
}

template <class T>
using BlockFn = void (*)(const Problem<T>&, int64_t, int, int64_t, int);

// One entry point a width (templates on the type): 16 vector registers (SSE2, AVX2) hold
// 4 x 2 accumulators, 2 loaded packs and a broadcast; AVX-512's 32 hold 4 x 4.
template <class T>
void block_sse(const Problem<T>& p, int64_t i, int m, int64_t j, int n) {
  block<T, 16, 2>(p, i, m, j, n);
}
template <class T>
__attribute__((target("avx2,fma"))) void block_avx2(const Problem<T>& p, int64_t i, int m,
                                                    int64_t j, int n) {
  block<T, 32, 2>(p, i, m, j, n);
}
template <class T>
__attribute__((target("avx512f"))) void block_avx512(const Problem<T>& p, int64_t i, int m,
                                                     int64_t j, int n) {
  block<T, 64, 4>(p, i, m, j, n);
}

bool cpu_has(GemmKernel k) {
  switch (k) {
    case GemmKernel::Avx512:
      return __builtin_cpu_supports("avx512f");
    case GemmKernel::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default:
      return true;
  }
}

// The kernel to run (Portable: none), its vector bytes and packs a block.
struct HostKernel {
  GemmKernel kind;
  int bytes, max_packs;
};

HostKernel host_kernel() {
  GemmKernel k = g_kernel;
  if (k == GemmKernel::Best)
    k = cpu_has(GemmKernel::Avx512) ? GemmKernel::Avx512
        : cpu_has(GemmKernel::Avx2) ? GemmKernel::Avx2
                                    : GemmKernel::Sse;
  switch (k) {
    case GemmKernel::Avx512:
      return {k, 64, 4};
    case GemmKernel::Avx2:
      return {k, 32, 2};
    case GemmKernel::Sse:
      return {k, 16, 2};
    default:
      return {GemmKernel::Portable, 0, 0};
  }
}

template <class T>
BlockFn<T> block_fn(GemmKernel k) {
  return k == GemmKernel::Avx512 ? block_avx512<T>
         : k == GemmKernel::Avx2 ? block_avx2<T>
                                 : block_sse<T>;
}

// The vector kernel over the host backend's threads: one work item a (row block, column
// block), i fastest as in MicroTiles. Column blocks: nfull of max_packs packs, then (when
// any whole pack is left) one of the rest; the last N mod W columns go to the portable
// kernel. Returns the first column it did not cover.
template <class T>
int64_t host_gemm(const Problem<T>& p, const HostKernel& hk) {
  const int W = hk.bytes / int(sizeof(T)), full = hk.max_packs;
  const int64_t nfull = p.N / (int64_t(full) * W);
  const int rest = int((p.N - nfull * full * W) / W);
  const int64_t ncols = nfull + (rest > 0), tiles_m = (p.M + MR - 1) / MR;
  if (ncols == 0) return 0;
  const BlockFn<T> fn = block_fn<T>(hk.kind);
  Kokkos::parallel_for(
      "lcr::gemm_host",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(0, tiles_m * ncols),
      [=](int64_t t) {
        const int64_t i0 = (t % tiles_m) * MR, c = t / tiles_m;
        fn(p, i0, int(p.M - i0 < MR ? p.M - i0 : MR), c * full * W, c < nfull ? full : rest);
      });
  return (nfull * full + rest) * W;
}

}  // namespace
#endif

bool gemm_use_kernel(GemmKernel k) {
#if LCR_GEMM_X86
  if (!Kokkos::SpaceAccessibility<ExecSpace, HostSpace>::accessible && k != GemmKernel::Best &&
      k != GemmKernel::Portable)
    return false;
  if (!cpu_has(k)) return false;
#else
  if (k != GemmKernel::Best && k != GemmKernel::Portable) return false;
#endif
  g_kernel = k;
  return true;
}

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
  Problem<T> p{ta == Trans::Yes, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
  int64_t j0 = 0;  // columns before j0 are done
#if LCR_GEMM_X86
  if constexpr (Kokkos::SpaceAccessibility<ExecSpace, HostSpace>::accessible) {
    const HostKernel hk = host_kernel();
    if (hk.kind != GemmKernel::Portable) j0 = host_gemm(p, hk);
  }
#endif
  if (j0 == N) return;
  // The columns left (all of them, or the N mod W past the vector kernel's), as a problem
  // of their own: B and C shifted by j0.
  p.N = N - j0;
  p.B += j0;
  p.C += j0;
  const int64_t tiles_m = (M + MR - 1) / MR, tiles_n = (p.N + NR - 1) / NR;
  Kokkos::parallel_for("lcr::gemm", Range(0, tiles_m * tiles_n), MicroTiles<T>{p, tiles_m});
}

template void gemm<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(Trans, Trans, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

}  // namespace lcr
