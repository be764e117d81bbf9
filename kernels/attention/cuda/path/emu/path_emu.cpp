// The PaTH kernels built for the SIMT emulator (emu.hpp): path::emu::forward / backward run
// the very kernel source of the GPU build on the CPU, with host pointers. Tests use them on
// machines without a GPU to check the kernels' indexing, fragment layouts and barriers.
#define LCR_CUDA_EMU 1

#include <cstring>
#include <functional>

#include "core/error.hpp"
#include "kernels/attention/cuda/path/device/all.cuh"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/attention/cuda/path/plan.hpp"

namespace lcr::cuda::path::emu {
namespace {

namespace K = ::lcr::cuda::pathk_emu;

struct Grid3 {
  int x, y, z;
};

template <class Kernel, class... A>
void launch(const char*, Kernel kernel, Grid3 grid, int threads, std::size_t smem, cudaStream_t,
            const A&... args) {
  ::lcr::emu::launch({unsigned(grid.x), unsigned(grid.y), unsigned(grid.z)}, {unsigned(threads)},
                     smem, [&] { kernel(args...); });
}

[[maybe_unused]] void zero(void* p, std::size_t bytes, cudaStream_t) { std::memset(p, 0, bytes); }

#include "kernels/attention/cuda/path/launch.inl"

}  // namespace

void forward(const Args& a, __nv_bfloat16* o, float* lse, void* ws, std::size_t ws_bytes) {
  forward_impl(a, o, lse, ws, ws_bytes, nullptr);
}

void backward(const Args& a, const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* dout,
              const Grads& g, void* ws, std::size_t ws_bytes) {
  backward_impl(a, o, lse, dout, g, ws, ws_bytes, nullptr);
}
}  // namespace lcr::cuda::path::emu
