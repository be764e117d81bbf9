#include "core/model/cuda/gpu_gemm.hpp"

#include <algorithm>
#include <limits>

#include "core/model/cuda/gpu_layers.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda::model {
namespace {

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw_error("cuBLAS ", what, " failed: ", cublasGetStatusName(st), " (",
                cublasGetStatusString(st), ")");
}

}  // namespace

const char* gemm_precision_name(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::Tf32:
      return "tf32";
    case GemmPrecision::Fp32:
      return "fp32";
    case GemmPrecision::Bf16:
      return "bf16";
  }
  return "?";
}

Gemm::Gemm(cudaStream_t stream, GemmPrecision precision) : stream_(stream), precision_(precision) {
  check(cublasCreate(&handle_), "cublasCreate (is a GPU visible and libcublas installed?)");
  check(cublasSetStream(handle_, stream), "cublasSetStream");
}

Gemm::~Gemm() {
  if (handle_) cublasDestroy(handle_);
}

void Gemm::operator()(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float* A, const float* B, float beta, float* C) const {
  if (M == 0 || N == 0) return;
  constexpr int64_t imax = std::numeric_limits<int>::max();
  require(M <= imax && N <= imax && K <= imax, "gemm: sizes ", M, " x ", N, " x ", K,
          " exceed cuBLAS' 32-bit dimensions; split the batch into smaller micro-batches");
  const int64_t lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
  const cublasOperation_t opA = ta == Trans::No ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t opB = tb == Trans::No ? CUBLAS_OP_N : CUBLAS_OP_T;
  if (precision_ == GemmPrecision::Bf16) {
    // Both operands rounded into the scratch (grown, never shrunk: stream-ordered reuse),
    // then the same column-major call on bf16 inputs with fp32 accumulation and output.
    a16_.grow(size_t(std::max<int64_t>(M * K, 1)));
    b16_.grow(size_t(std::max<int64_t>(K * N, 1)));
    to_bf16(M * K, A, a16_.data(), stream_);
    to_bf16(K * N, B, b16_.data(), stream_);
    check(cublasGemmEx(handle_, opB, opA, int(N), int(M), int(K), &alpha, b16_.data(), CUDA_R_16BF,
                       int(ldb), a16_.data(), CUDA_R_16BF, int(lda), &beta, C, CUDA_R_32F, int(N),
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx (bf16)");
    return;
  }
  const cublasComputeType_t ct =
      precision_ == GemmPrecision::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  // Column-major view: C^T [N, M] = op(B)^T [N, K] op(A)^T [K, M].
  check(cublasGemmEx(handle_, opB, opA, int(N), int(M), int(K), &alpha, B, CUDA_R_32F, int(ldb), A,
                     CUDA_R_32F, int(lda), &beta, C, CUDA_R_32F, int(N), ct, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

}  // namespace lcr::cuda::model
