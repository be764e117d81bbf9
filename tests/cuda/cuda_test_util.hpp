#pragma once
// Shared helpers of the CUDA tests (tests/cuda and its subfolders):
//  - LCR_REQUIRE_GPU(): first line of every test that needs a GPU; without one (CI, the
//    development machine) the test SKIPS with the reason printed, never passes silently.
//  - bf16 conversion, rounding, upload/download, fresh random inputs, the normwise error.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/attention/cuda/sdpa.hpp"

namespace lcr::cuda::test {

// A fresh seed per call (tests print it), or LCR_TEST_SEED when set, to replay a failure
// (every call then returns that seed).
inline uint64_t case_seed() {
  if (const char* s = std::getenv("LCR_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

// Empty when a CUDA device is usable, else why not (no driver, no device, ...).
inline std::string gpu_unavailable_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error for later calls
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
  }
  if (n == 0) return "cudaGetDeviceCount reports 0 devices";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "cudaGetDeviceProperties failed";
  if (p.major < 8)
    return "device 0 is sm_" + std::to_string(p.major * 10 + p.minor) + " (needs sm_80+)";
  return {};
}

// Marks the current test skipped when there is no GPU. GTEST_SKIP only leaves the function
// it is in, so tests use the macro below, which also returns from the test body.
inline void require_gpu() {
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
}
#define LCR_REQUIRE_GPU()                     \
  do {                                        \
    ::lcr::cuda::test::require_gpu();         \
    if (::testing::Test::IsSkipped()) return; \
  } while (0)

// LCR_REQUIRE_CUDNN(): after LCR_REQUIRE_GPU() in tests of cuDNN's attention (SdpaImpl
// cudnn / auto): SKIPS with the loader's reason where libcudnn.so.9 cannot be loaded.
#define LCR_REQUIRE_CUDNN()                                                \
  do {                                                                     \
    std::string lcr_cudnn_why_;                                            \
    if (!::lcr::cuda::cudnn_attention_available(&lcr_cudnn_why_))          \
      GTEST_SKIP() << "cuDNN attention not available: " << lcr_cudnn_why_; \
  } while (0)

inline float round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }

inline std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& x) {
  std::vector<__nv_bfloat16> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16(x[i]);
  return y;
}
inline std::vector<float> from_bf16(const std::vector<__nv_bfloat16>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = __bfloat162float(x[i]);
  return y;
}
// Rounds every element to bf16 in place: the exact values the GPU will see.
inline void round_to_bf16(std::vector<float>& x) {
  for (float& v : x) v = round_bf16(v);
}

inline DeviceBuffer<__nv_bfloat16> upload_bf16(const std::vector<float>& x) {
  return DeviceBuffer<__nv_bfloat16>(to_bf16(x));
}
inline std::vector<float> download_bf16(const DeviceBuffer<__nv_bfloat16>& d) {
  return from_bf16(d.download());
}

// Fresh random inputs each run (seed printed by the caller on failure), N(0, sigma).
inline std::vector<float> random_normal(size_t n, std::mt19937_64& rng, float sigma = 1.f) {
  std::normal_distribution<float> dist(0.f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// FoX cumulative log gates, [B, L, H]: c_i = sum_{t <= i} log sigmoid(g_t), g ~ N(2, 1) per
// (b, h), so decreasing from about -0.13 per step.
inline std::vector<float> random_fox_gates(int B, int64_t L, int H, std::mt19937_64& rng) {
  std::normal_distribution<float> gate(2.f, 1.f);
  std::vector<float> cum(size_t(B) * size_t(L) * size_t(H));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      float acc = 0.f;
      for (int64_t i = 0; i < L; ++i) {
        acc -= std::log1p(std::exp(-gate(rng)));
        cum[size_t((b * L + i) * H + h)] = acc;
      }
    }
  return cum;
}

// Rows of D values scaled to unit length in double (PaTH's w).
inline void normalise_rows(std::vector<float>& w, int D) {
  for (size_t r = 0; r < w.size() / size_t(D); ++r) {
    double n = 0;
    for (int d = 0; d < D; ++d) n += double(w[r * D + d]) * w[r * D + d];
    for (int d = 0; d < D; ++d) w[r * D + d] = float(w[r * D + d] / std::sqrt(n));
  }
}

// Normwise relative error ||got - want||_2 / ||want||_2 against a float64 reference.
template <class T>
double rel_l2(const std::vector<T>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = double(got[i]) - want[i];
    num += e * e;
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace lcr::cuda::test
