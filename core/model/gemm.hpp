#pragma once
// Dense matrix product for the model's projections, in its own unit so a backend can swap
// in a vendor BLAS (cuBLAS on the CUDA path) behind the same call.
//
//   C[M, N] = alpha op(A)[M, K] op(B)[K, N] + beta C[M, N]
//
// Row-major (LayoutRight) raw pointers in the default memory space, with leading
// dimensions: op(A) = A when ta == NoTrans (A is [M, K], lda >= K) and A^T when ta == Trans
// (A is [K, M], lda >= M); likewise B. With beta == 0, C is not read (it may hold NaN).
// Deterministic: every C element is summed by one thread in increasing k order.
// Implementation notes (register blocking, packing, the x86 vector kernels) in gemm.cpp.
//
// The model's uses (X [rows, D] activations, W [D, N] weights):
//   forward   Y = X W          gemm(N, N, rows, N, D, 1, X, W, 0, Y)
//   backward  dX += dY W^T     gemm(N, T, rows, D, N, 1, dY, W, 1, dX)
//             dW += X^T dY     gemm(T, N, D, N, rows, 1, X, dY, 1, dW)
#include <cstdint>

#include "kernels/base/tensor.hpp"

namespace lcr {

enum class Trans { No, Yes };

template <class T>
void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// Which kernel a host build runs: the widest vector kernel this CPU supports (Best, the
// default), one named, or the portable scalar-blocked one (the only kernel of device and
// non-x86 builds). Returns false, changing nothing, when this build or CPU lacks it. For
// tests (each kernel against the naive product) and benchmarks.
enum class GemmKernel { Best, Portable, Sse, Avx2, Avx512 };
bool gemm_use_kernel(GemmKernel k);

// The common case of dense operands: lda/ldb/ldc are the stored row lengths.
template <class T>
void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, const T* B,
          T beta, T* C) {
  gemm<T>(ta, tb, M, N, K, alpha, A, ta == Trans::No ? K : M, B, tb == Trans::No ? N : K, beta, C,
          N);
}

}  // namespace lcr
