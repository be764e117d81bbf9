#pragma once
// The model's dense products on the GPU through cuBLAS: the same row-major contract as
// core/model/gemm.hpp (C[M, N] = alpha op(A)[M, K] op(B)[K, N] + beta C, raw fp32 device
// pointers, beta == 0 does not read C), so GpuModel's per-layer code reads like the CPU
// model's.
//
// Precision: fp32 storage; Tf32 (default) runs on the tensor cores with 10-bit mantissa
// inputs and fp32 accumulation (cuBLAS' CUBLAS_COMPUTE_32F_FAST_TF32: ~8x the plain fp32
// peak on H100 / H200), Fp32 is exact fp32 (for tests that compare with the CPU model), Bf16
// rounds A and B to bf16 (8-bit mantissa; one conversion pass each into the Gemm's scratch,
// per call) and runs the bf16 tensor cores with fp32 accumulation and an fp32 C: the
// mixed precision of bf16 training, about twice TF32's rate (the bf16 tensor-core peak is
// twice the TF32 one).
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so cuBLAS gets the
// operands swapped and no data moves.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/model/gemm.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"

namespace lcr::cuda::model {

enum class GemmPrecision { Tf32, Fp32, Bf16 };
const char* gemm_precision_name(GemmPrecision p);  // "tf32", "fp32", "bf16"

class Gemm {
 public:
  Gemm(cudaStream_t stream, GemmPrecision precision);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void operator()(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  const float* B, float beta, float* C) const;

 private:
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  GemmPrecision precision_;
  mutable DeviceBuffer<__nv_bfloat16> a16_, b16_;  // Bf16: the rounded operands
};

}  // namespace lcr::cuda::model
