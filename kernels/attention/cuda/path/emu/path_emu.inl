// The PaTH kernels built for the SIMT emulator (emu.hpp): path::emu::forward / backward run
// the very kernel source of the GPU build on the CPU, with host pointers. Tests use them on
// machines without a GPU to check the kernels' indexing, fragment layouts and barriers.
// Included twice: path_emu.cpp (path::emu, the Hopper form with wgmma) and path_emu_mma.cpp
// (path::emu_mma, LCR_CUDA_EMU_MMA_SYNC: each wgmma by mma.sync, as the GPU build compiles
// them for sm_80 .. sm_89). LCR_PATH_EMU names the namespace, LCR_PATH_EMU_PROBE the probe.
#include <cstring>
#include <functional>
#include <type_traits>

#include "kernels/attention/cuda/path/device/all.cuh"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/attention/cuda/path/plan.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda::path::LCR_PATH_EMU {
namespace {

namespace K = ::lcr::cuda::LCR_PATHK;

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

void forward(const Args& a, __nv_bfloat16* o, float* lse, void* ws, std::size_t ws_bytes,
             const Folds* folds) {
  forward_impl(a, o, lse, ws, ws_bytes, nullptr, folds);
}

void backward(const Args& a, const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* dout,
              const Grads& g, void* ws, std::size_t ws_bytes, const FoldGrads* fold_grads) {
  backward_impl(a, o, lse, dout, g, ws, ws_bytes, nullptr, fold_grads);
}

void carry(int B, int L, int H, int Hkv, int D, const float* M, const float* q, __nv_bfloat16* y) {
  carry_impl(B, L, H, Hkv, D, M, q, y, nullptr);
}
void carry_backward(int B, int L, int H, int Hkv, int D, const float* M, const float* q,
                    const float* dy, float* dq, float* dM) {
  carry_backward_impl(B, L, H, Hkv, D, M, q, dy, dq, dM, nullptr);
}
void mat_products(int batch, int D, const float* A, bool ta, const float* B, bool tb, float* C,
                  bool accumulate) {
  mat_products_impl(batch, D, A, ta, B, tb, C, accumulate, nullptr);
}
}  // namespace lcr::cuda::path::LCR_PATH_EMU

namespace lcr::cuda::path::detail {
void LCR_PATH_EMU_PROBE(const __nv_bfloat16* A, const __nv_bfloat16* B, const __nv_bfloat16* P,
                        float* c1, float* c2, float* c3, bool fence) {
  LCR_PATH_EMU::wgmma_probe_impl(A, B, P, c1, c2, c3, fence);
}
}  // namespace lcr::cuda::path::detail
