#pragma once
// Error checking for every CUDA runtime call and kernel launch of lcr's CUDA code: a
// failure becomes an lcr::Error naming the call, file and line, and the CUDA message, so
// a bad launch or an out-of-memory surfaces at the call that caused it, not later.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/base/error.hpp"

namespace lcr::cuda::detail {
inline void check_cuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess) {
    throw_error("CUDA error at ", file, ":", line, ": ", what, " -> ", cudaGetErrorName(err), " (",
                cudaGetErrorString(err), ")");
  }
}
}  // namespace lcr::cuda::detail

// LCR_CUDA_CHECK(cudaMemcpy(...));  throws lcr::Error on any cudaError_t but cudaSuccess.
#define LCR_CUDA_CHECK(expr) ::lcr::cuda::detail::check_cuda((expr), #expr, __FILE__, __LINE__)

// After a <<<...>>> launch: catches bad launch configurations (too much shared memory,
// too many threads) at once. Faults inside the kernel surface at the next synchronising
// call, which is checked too.
#define LCR_CUDA_CHECK_LAUNCH() \
  ::lcr::cuda::detail::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

namespace lcr::cuda::detail {
// Throws, naming the kernel and both sizes, when `smem` bytes of dynamic shared memory exceed
// what one block may opt in to on the current device (227 KiB on sm_90, 163 KiB on sm_80,
// 99 KiB on sm_86 / sm_89), where the launch would fail with a bare "invalid argument".
inline void check_smem_fits(const char* kernel, std::size_t smem) {
  int dev = 0, limit = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice", __FILE__, __LINE__);
  check_cuda(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
             "cudaDeviceGetAttribute", __FILE__, __LINE__);
  if (smem > std::size_t(limit))
    throw_error("lcr CUDA kernel ", kernel, " needs ", smem / 1024, " KiB of shared memory per ",
                "block; this GPU allows ", limit / 1024, " KiB. Use a smaller head width, or the ",
                "Kokkos kernels (train.device = \"cpu\", a Kokkos GPU build: docs/kokkos.md)");
}
}  // namespace lcr::cuda::detail

#if defined(__CUDACC__)
namespace lcr::cuda::detail {
// kernel<<<grid, threads, smem, s>>>(args...), checked, with the opt-in to `smem` bytes of
// dynamic shared memory set first (above 48 KiB a kernel must ask for it).
template <class... P, class... A>
void launch_with_smem(void (*kernel)(P...), int64_t grid, int threads, std::size_t smem,
                      cudaStream_t s, const A&... args) {
  if (smem > 48 * 1024) check_smem_fits("(SDPA)", smem);
  LCR_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<unsigned(grid), threads, smem, s>>>(args...);
  LCR_CUDA_CHECK_LAUNCH();
}
}  // namespace lcr::cuda::detail
#endif
