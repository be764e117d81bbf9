// The probe of device_code.hpp.
#include <cuda_runtime.h>

#include <array>
#include <mutex>
#include <optional>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/device_code.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda {
namespace {

// out = {__CUDA_ARCH__, 1 if compiled with the sm_90a features}.
__global__ void device_code_probe_kernel(int* out) {
#if defined(__CUDA_ARCH__)
  out[0] = __CUDA_ARCH__;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  out[1] = 1;
#else
  out[1] = 0;
#endif
#endif
}

DeviceCode probe(int dev) {
  DeviceCode c;
  LCR_CUDA_CHECK(cudaDeviceGetAttribute(&c.cc_major, cudaDevAttrComputeCapabilityMajor, dev));
  LCR_CUDA_CHECK(cudaDeviceGetAttribute(&c.cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, device_code_probe_kernel);
  require(e == cudaSuccess, "lcr CUDA kernels: this binary has no code for the GPU of compute ",
          "capability ", c.cc_major, ".", c.cc_minor, " (", cudaGetErrorString(e),
          "); rebuild with it in CMAKE_CUDA_ARCHITECTURES, e.g. \"80;90a\" (compute_80 PTX runs "
          "on every GPU from sm_80 on)");
  int* d = nullptr;
  LCR_CUDA_CHECK(cudaMalloc(&d, 2 * sizeof(int)));
  device_code_probe_kernel<<<1, 1>>>(d);
  int h[2] = {0, 0};
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t copied =
      launched == cudaSuccess ? cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) : launched;
  cudaFree(d);
  LCR_CUDA_CHECK(copied);
  c.arch = h[0];
  c.wgmma = h[1] != 0;
  return c;
}

}  // namespace

std::string DeviceCode::name() const {
  return "sm_" + std::to_string(arch / 10) + (wgmma ? "a" : "") + " code on cc " +
         std::to_string(cc_major) + "." + std::to_string(cc_minor);
}

const DeviceCode& device_code() {
  static std::mutex m;
  static std::array<std::optional<DeviceCode>, 64> cache;
  int dev = 0;
  LCR_CUDA_CHECK(cudaGetDevice(&dev));
  require(dev >= 0 && dev < int(cache.size()), "lcr CUDA kernels: device index ", dev, " past the ",
          cache.size(), " the probe cache holds");
  std::lock_guard<std::mutex> lock(m);
  if (!cache[dev]) cache[dev] = probe(dev);
  return *cache[dev];
}

bool device_has_wgmma() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error for later calls
    return true;
  }
  return device_code().wgmma;
}

}  // namespace lcr::cuda
