// The PaTH kernels built for the GPU (nvcc, sm_90a): path::forward / backward.
#include <map>
#include <sstream>
#include <vector>

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

struct ProfiledLaunch {
  const char* name;
  cudaEvent_t start, stop;
};
bool g_profiling = false;
std::vector<ProfiledLaunch> g_launches;

template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), Grid3 grid, int threads, std::size_t smem,
            cudaStream_t s, const A&... args) {
  LCR_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  ProfiledLaunch pl{name, nullptr, nullptr};
  if (g_profiling) {
    LCR_CUDA_CHECK(cudaEventCreate(&pl.start));
    LCR_CUDA_CHECK(cudaEventCreate(&pl.stop));
    LCR_CUDA_CHECK(cudaEventRecord(pl.start, s));
  }
  kernel<<<dim3(grid.x, grid.y, grid.z), threads, smem, s>>>(args...);
  LCR_CUDA_CHECK_LAUNCH();
  if (g_profiling) {
    LCR_CUDA_CHECK(cudaEventRecord(pl.stop, s));
    g_launches.push_back(pl);
  }
}

void zero(void* p, std::size_t bytes, cudaStream_t s) {
  LCR_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s));
}

#include "kernels/attention/cuda/path/launch.inl"

}  // namespace

namespace detail {
void set_profiling(bool on) { g_profiling = on; }
std::string profile_report() {
  std::map<std::string, double> ms;
  for (const auto& l : g_launches) {
    LCR_CUDA_CHECK(cudaEventSynchronize(l.stop));
    float t = 0.f;
    LCR_CUDA_CHECK(cudaEventElapsedTime(&t, l.start, l.stop));
    ms[l.name] += t;
    cudaEventDestroy(l.start);
    cudaEventDestroy(l.stop);
  }
  g_launches.clear();
  std::ostringstream os;
  for (const auto& [name, t] : ms) os << "  kernel " << name << " " << t << " ms\n";
  return os.str();
}
}  // namespace detail

void forward(const Args& a, __nv_bfloat16* o, float* lse, void* ws, std::size_t ws_bytes,
             cudaStream_t s) {
  forward_impl(a, o, lse, ws, ws_bytes, s);
}

void backward(const Args& a, const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* dout,
              const Grads& g, void* ws, std::size_t ws_bytes, cudaStream_t s) {
  backward_impl(a, o, lse, dout, g, ws, ws_bytes, s);
}
}  // namespace lcr::cuda::path
