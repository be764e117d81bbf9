#pragma once
// The tile arithmetic of the Kokkos attention kernels: register-blocked products of small
// row-major tiles and a vectorised exp, written once for CPUs and GPUs.
//
// On a CPU compiler (GCC, Clang) a Pack is a vector of the widest SIMD register the build
// targets (SSE2: 16 bytes; -mavx2: 32; -mavx512f, e.g. LCR_NATIVE_ARCH on such a CPU: 64),
// so a product's inner loop is explicit vector FMAs on accumulators that stay in registers:
// compilers do not find that blocking themselves in the scalar loops. In device code
// (nvcc, hipcc) a Pack is one scalar: the same blocking is a per-thread register tile.
//
// Every product element is summed over k in order, as the plain loop sums it, so the
// kernels' rounding does not depend on the blocking (FMA contraction aside).
#include <Kokkos_Core.hpp>
#include <cstring>
#include <type_traits>

#include "kernels/attention/kokkos/math.hpp"

namespace lcr::tile {

#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && !defined(__HIPCC__) && \
    !defined(__SYCL_DEVICE_ONLY__)
#define LCR_TILE_SIMD 1
#if defined(__AVX512F__)
constexpr int kSimdBytes = 64;  // 32 vector registers
#elif defined(__AVX__)
constexpr int kSimdBytes = 32;  // 16 vector registers
#else
constexpr int kSimdBytes = 16;  // SSE2 / NEON: 16 or 32 registers
#endif
template <class T>
struct Simd {
  typedef T type __attribute__((vector_size(kSimdBytes)));
  static constexpr int width = kSimdBytes / int(sizeof(T));
};
// Accumulator columns (in packs) of a register block: 4 rows x 4 packs + 4 loaded packs fit
// 32 registers; 4 x 2 + 2 fit 16.
constexpr int kPacksPerBlock = kSimdBytes == 64 ? 4 : 2;
#else
#define LCR_TILE_SIMD 0
template <class T>
struct Simd {
  using type = T;
  static constexpr int width = 1;
};
// 4 x 4 outputs a thread: 16 FMAs for 8 operand loads from level-0 scratch.
constexpr int kPacksPerBlock = 4;
#endif

// Fully unroll a loop over a register array (its index must be a compile-time constant, or
// the array lives in local memory): device compilers do not always unroll long bodies.
// Only the device passes: nvcc's host pass hands the pragma to the host compiler, which warns.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define LCR_UNROLL _Pragma("unroll")
#else
#define LCR_UNROLL
#endif

// Device code: a team's threads are GPU lanes. Tile loads go one element a thread
// (coalesced), register blocks interleave rows and columns (below), and the kernels choose
// tiles that fit level-0 scratch (on-chip shared memory).
constexpr bool kGpuLayout = !LCR_TILE_SIMD;

constexpr int kBlockRows = 4;  // rows of a register block (one broadcast each per k)

// Columns one register block covers: every N a product runs over is a multiple of it (the
// kernels pad their tiles' column counts to it with zeros).
template <class T>
KOKKOS_INLINE_FUNCTION constexpr int block_cols() {
  return kPacksPerBlock * Simd<T>::width;
}

// n rounded up to a multiple of m.
KOKKOS_INLINE_FUNCTION constexpr int round_up(int n, int m) { return (n + m - 1) / m * m; }

template <class T>
KOKKOS_FORCEINLINE_FUNCTION typename Simd<T>::type load(const T* p) {
  typename Simd<T>::type v;
  if constexpr (Simd<T>::width == 1) {
    v = *p;
  } else {
    std::memcpy(&v, p, sizeof(v));  // unaligned vector load
  }
  return v;
}

template <class T>
KOKKOS_FORCEINLINE_FUNCTION void store(T* p, const typename Simd<T>::type& v) {
  if constexpr (Simd<T>::width == 1) {
    *p = v;
  } else {
    std::memcpy(p, &v, sizeof(v));
  }
}

// One register block: rows i0 + r rstep (r < kBlockRows) and packs at columns j0 + v cstep
// (v < kPacksPerBlock) of C (Accumulate: +=) get alpha sum_k A(i, k) B[k * ldb + (j - j0)],
// over k in order, A(i, k) at A[i * a_row + k * a_col]; B starts at C's column j0.
template <bool Accumulate, class T>
KOKKOS_FORCEINLINE_FUNCTION void register_block(T* KOKKOS_RESTRICT C, int ldc,
                                                const T* KOKKOS_RESTRICT A, int a_row, int a_col,
                                                const T* KOKKOS_RESTRICT B, int ldb, int i0,
                                                int rstep, int j0, int cstep, int K, T alpha) {
  using P = typename Simd<T>::type;
  constexpr int NV = kPacksPerBlock, R = kBlockRows;
  P acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v)
      acc[r][v] = Accumulate ? load(C + (i0 + r * rstep) * ldc + j0 + v * cstep) : P{};
  for (int k = 0; k < K; ++k) {
    P b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load(B + k * ldb + v * cstep);
    for (int r = 0; r < R; ++r) {
      const T a = alpha * A[(i0 + r * rstep) * a_row + k * a_col];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) store(C + (i0 + r * rstep) * ldc + j0 + v * cstep, acc[r][v]);
}

// C[M x N] = alpha A[M x K] B[K x N] (Accumulate: C +=), row-major B and C with leading
// dimensions ldb, ldc; A's element (i, k) at A[i * a_row + k * a_col] (so A may be a
// transposed view). M must be a multiple of kBlockRows and N of block_cols<T>() (callers pad
// with zero rows and columns); K is any. Each element is alpha A(i, k) B(k, j) summed over k
// in order onto C (or 0). The register blocks are shared among the team's threads: on a CPU
// a block is kBlockRows adjacent rows by kPacksPerBlock adjacent packs; on a GPU thread
// (bi, bj) takes rows bi + r M / kBlockRows and columns bj + v N / kPacksPerBlock, so a warp
// reads consecutive B columns (distinct shared-memory banks) and few A rows (broadcasts).
template <bool Accumulate, class T, class Member>
KOKKOS_INLINE_FUNCTION void gemm(const Member& t, T* KOKKOS_RESTRICT C, int ldc,
                                 const T* KOKKOS_RESTRICT A, int a_row, int a_col,
                                 const T* KOKKOS_RESTRICT B, int ldb, int M, int N, int K,
                                 T alpha = T(1)) {
  constexpr int CB = block_cols<T>();
  const int nrb = M / kBlockRows, ncb = N / CB;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nrb * ncb), [&](int blk) {
    const int bi = blk / ncb, bj = blk % ncb;
    if constexpr (kGpuLayout)
      register_block<Accumulate>(C, ldc, A, a_row, a_col, B + bj, ldb, bi, nrb, bj, ncb, K, alpha);
    else
      register_block<Accumulate>(C, ldc, A, a_row, a_col, B + bj * CB, ldb, bi * kBlockRows, 1,
                                 bj * CB, Simd<T>::width, K, alpha);
  });
}

// The row-major A form: A[M x K] with leading dimension lda.
template <bool Accumulate, class T, class Member>
KOKKOS_INLINE_FUNCTION void gemm(const Member& t, T* KOKKOS_RESTRICT C, int ldc,
                                 const T* KOKKOS_RESTRICT A, int lda, const T* KOKKOS_RESTRICT B,
                                 int ldb, int M, int N, int K) {
  gemm<Accumulate>(t, C, ldc, A, lda, 1, B, ldb, M, N, K);
}

#if LCR_TILE_SIMD
// Deepest K that gemm_nt takes: its transposed column chunk lives on the thread's stack.
constexpr int kMaxNtDepth = 256;

// C[M x N] = alpha A[M x K] B[N x K]^T (Accumulate: C +=), all row-major; M, N as in
// gemm(), K <= kMaxNtDepth. Each column chunk of B^T is transposed once into a stack buffer
// and shared by every row block, so the inner loop is gemm()'s. CPU builds only (on a GPU a
// per-thread buffer of this size would live in local memory).
template <bool Accumulate, class T, class Member>
KOKKOS_INLINE_FUNCTION void gemm_nt(const Member& t, T* KOKKOS_RESTRICT C, int ldc,
                                    const T* KOKKOS_RESTRICT A, int lda, const T* KOKKOS_RESTRICT B,
                                    int ldb, int M, int N, int K, T alpha) {
  constexpr int CB = block_cols<T>();
  Kokkos::parallel_for(Kokkos::TeamThreadRange(t, N / CB), [&](int chunk) {
    const int j0 = chunk * CB;
    T bt[kMaxNtDepth * CB];  // [K, CB]: rows j0 .. j0 + CB of B, transposed
    for (int j = 0; j < CB; ++j)
      for (int k = 0; k < K; ++k) bt[k * CB + j] = B[(j0 + j) * ldb + k];
    for (int i0 = 0; i0 < M; i0 += kBlockRows)
      register_block<Accumulate>(C, ldc, A, lda, 1, bt, CB, i0, 1, j0, Simd<T>::width, K, alpha);
  });
}
#endif

// Below this exponent a probability is treated as 0. float: 2^-64, so a row's dropped terms
// (each below 2^-64 of its largest, which is 1 in the forward and at least 1/L in the
// backward) stay below 2^-24 of its sum up to L = 2^40, and no product of a kept one with
// an operand above 2^-62 is subnormal: subnormal arithmetic runs tens of times slower on
// x86 CPUs (microcode assists), and GOAT's long-range prior pushes most logits down there
// at L >= 4K. double: the smallest normal (the reference tests' exactness).
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T exp_floor() {
  return std::is_same_v<T, float> ? T(-44.36) : T(-708.39);  // ln 2^-64; ln of DBL_MIN
}

// x[c] = x[c] >= exp_floor ? exp(x[c]) : 0 for c < n (x <= 0 or -inf, as softmax
// arguments are). float on a SIMD CPU: Cody-Waite reduction and
// Cephes' degree-6 polynomial, within 2 ulp of the correctly rounded result; otherwise the
// library's exp.
template <class T>
KOKKOS_INLINE_FUNCTION void exp_or_zero(T* KOKKOS_RESTRICT x, int n) {
#if LCR_TILE_SIMD
  if constexpr (std::is_same_v<T, float> && Simd<T>::width > 1) {
    using P = typename Simd<float>::type;
    using I = typename Simd<int>::type;
    constexpr float lo = exp_floor<float>();
    int c = 0;
    for (; c + Simd<float>::width <= n; c += Simd<float>::width) {
      const P x0 = load(x + c);
      const P v = x0 < lo ? P{} + lo : x0;  // -inf must not reach the integer conversion
      // v = n ln2 + r with n = round(v log2 e), |r| <= ln2 / 2.
      const P fx = v * 1.44269504088896341f + 0.5f;
      P fl = __builtin_convertvector(__builtin_convertvector(fx, I), P);  // toward 0
      fl += __builtin_convertvector(fl > fx, P);  // floor: a true compare is -1
      const P r = v - fl * 0.693359375f + fl * 2.12194440e-4f;
      P y = 1.9875691500e-4f * r + 1.3981999507e-3f;
      y = y * r + 8.3334519073e-3f;
      y = y * r + 4.1665795894e-2f;
      y = y * r + 1.6666665459e-1f;
      y = y * r + 5.0000001201e-1f;
      y = y * (r * r) + r + 1.0f;
      // times 2^n, n >= -126: the exponent field built directly.
      const I e = (__builtin_convertvector(fl, I) + 127) << 23;
      P two_n;
      std::memcpy(&two_n, &e, sizeof(two_n));
      store(x + c, x0 < lo ? P{} : y * two_n);
    }
    for (; c < n; ++c) x[c] = x[c] >= lo ? kmath::exp(x[c]) : 0.0f;
    return;
  }
#endif
  for (int c = 0; c < n; ++c) x[c] = x[c] >= exp_floor<T>() ? kmath::exp(x[c]) : T(0);
}

// Row loops that call exp go in chunks of this many elements through a local array, so
// exp_or_zero vectorises them on a SIMD CPU (on a GPU a thread walks its chunk the same way).
constexpr int kRowChunk = 16;

// e[k] = e^(-|x[k]|) for k < n: the one exponential sigmoid and softplus need (0 below
// exp_floor, where sigmoid is 0 or 1 and softplus max(x, 0) within 2^-64 absolute).
template <class T>
KOKKOS_INLINE_FUNCTION void exp_neg_abs(const T* KOKKOS_RESTRICT x, int n, T* KOKKOS_RESTRICT e) {
  for (int k = 0; k < n; ++k) e[k] = x[k] > T(0) ? -x[k] : x[k];
  exp_or_zero(e, n);
}

// sigmoid(x) from e = e^(-|x|).
template <class T>
KOKKOS_INLINE_FUNCTION T sigmoid_from(T x, T e) {
  return (x >= T(0) ? T(1) : e) / (T(1) + e);
}

// max(init, x[0..n)): pack-wise (the maximum does not depend on the order).
template <class T>
KOKKOS_INLINE_FUNCTION T max_of(const T* KOKKOS_RESTRICT x, int n, T init) {
  constexpr int W = Simd<T>::width;
  int c = 0;
  if constexpr (W > 1) {
    if (n >= W) {
      typename Simd<T>::type m = load(x);
      for (c = W; c + W <= n; c += W) {
        const auto v = load(x + c);
        m = v > m ? v : m;
      }
      for (int w = 0; w < W; ++w) init = m[w] > init ? m[w] : init;
    }
  }
  for (; c < n; ++c) init = x[c] > init ? x[c] : init;
  return init;
}

// sum of x[0..n): W running sums, one per lane, then the lanes in order (a row of
// probabilities: the order changes the sum's last bits only).
template <class T>
KOKKOS_INLINE_FUNCTION T sum_of(const T* KOKKOS_RESTRICT x, int n) {
  constexpr int W = Simd<T>::width;
  T s = T(0);
  int c = 0;
  if constexpr (W > 1) {
    typename Simd<T>::type acc{};
    for (; c + W <= n; c += W) acc += load(x + c);
    for (int w = 0; w < W; ++w) s += acc[w];
  }
  for (; c < n; ++c) s += x[c];
  return s;
}

}  // namespace lcr::tile
