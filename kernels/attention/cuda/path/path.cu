// The PaTH kernels built for the GPU (nvcc, sm_90a): path::forward / backward.
#include "core/error.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/path/device/all.cuh"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/attention/cuda/path/plan.hpp"

namespace lcr::cuda::path {
namespace {

namespace K = ::lcr::cuda::pathk;

struct Grid3 {
  int x, y, z;
};

template <class... P, class... A>
void launch(void (*kernel)(P...), Grid3 grid, int threads, std::size_t smem, cudaStream_t s,
            const A&... args) {
  LCR_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<dim3(grid.x, grid.y, grid.z), threads, smem, s>>>(args...);
  LCR_CUDA_CHECK_LAUNCH();
}

void zero(void* p, std::size_t bytes, cudaStream_t s) {
  LCR_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s));
}

#include "kernels/attention/cuda/path/launch.inl"

}  // namespace

void forward(const Args& a, __nv_bfloat16* o, float* lse, void* ws, std::size_t ws_bytes,
             cudaStream_t s) {
  forward_impl(a, o, lse, ws, ws_bytes, s);
}

}  // namespace lcr::cuda::path
namespace lcr::cuda::path {
void backward(const Args& a, const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* dout,
              const Grads& g, void* ws, std::size_t ws_bytes, cudaStream_t s) {
  backward_impl(a, o, lse, dout, g, ws, ws_bytes, s);
}
}  // namespace lcr::cuda::path
