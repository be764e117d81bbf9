// Public forward entry points of the CUDA SDPA (sdpa.hpp): the kernel per head-width class
// and path that sdpa_heuristics.hpp chooses (the alternatives: the tuning library,
// sdpa_tuning.hpp), and the row delta of the backward.
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/device_code.hpp"
#include "kernels/attention/cuda/sdpa_forward_kernel.cuh"
#include "kernels/attention/cuda/sdpa_forward_wgmma.cuh"
#include "kernels/attention/cuda/sdpa_heuristics.hpp"

namespace lcr::cuda {
namespace detail {
namespace {

template <template <int, int> class Choice, std::size_t... I>
std::array<SdpaKernels, kWidthPairs> shipped_forward(std::index_sequence<I...>) {
  static_assert(!(uses_wgmma<FwdChoiceMma<pair_dp(I), pair_dvp(I)>> || ...),
                "the tables without wgmma take mma.sync kernels only");
  return {kernels_of<pair_dp(I), pair_dvp(I), Choice<pair_dp(I), pair_dvp(I)>>()...};
}

// delta[b,h,i] = <o[b,i,h,:], dout[b,i,h,:]>: o, dout [B, Lq, H, Dv], delta [B, H, Lq].
// TPR threads per row (a power of two, TPR * 8 >= Dv up to a warp), 16 bytes of o and of dout
// per thread and step, rows in delta's (b, h, i) order so a warp's stores are contiguous: the
// form for Dv % 8 == 0 and 16-byte aligned o, dout (every call lcr makes).
template <int TPR>
__global__ void row_delta_vec_kernel(int B, int Lq, int H, int Dv, const __nv_bfloat16* o,
                                     const __nv_bfloat16* dout, float* delta) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, row = t / TPR;
  const int c0 = int(t % TPR);
  const bool in = row < int64_t(B) * H * Lq;
  float s = 0.f;
  if (in) {  // no early return: every lane takes part in the shuffles
    const int64_t i = row % Lq, bh = row / Lq, h = bh % H, b = bh / H;
    const int64_t off = ((b * Lq + i) * H + h) * Dv;
    const uint4* o16 = reinterpret_cast<const uint4*>(o + off);
    const uint4* d16 = reinterpret_cast<const uint4*>(dout + off);
    for (int c = c0; c < Dv / 8; c += TPR) {
      const uint4 x = o16[c], y = d16[c];
      const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&x);
      const __nv_bfloat162* y2 = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 a = __bfloat1622float2(x2[k]), d = __bfloat1622float2(y2[k]);
        s = fmaf(a.x, d.x, fmaf(a.y, d.y, s));
      }
    }
  }
#pragma unroll
  for (int m = TPR / 2; m >= 1; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
  if (c0 == 0 && in) delta[row] = s;
}

// Launches row_delta_vec_kernel with the least TPR (a power of two) such that TPR * 8 >= Dv,
// at most 32.
template <int TPR>
void launch_row_delta_vec(int B, int Lq, int H, int Dv, const __nv_bfloat16* o,
                          const __nv_bfloat16* dout, float* delta, cudaStream_t s) {
  if constexpr (TPR < 32) {
    if (TPR * 8 < Dv) return launch_row_delta_vec<2 * TPR>(B, Lq, H, Dv, o, dout, delta, s);
  }
  constexpr int kThreads = 256;
  const int64_t threads = int64_t(B) * Lq * H * TPR;
  row_delta_vec_kernel<TPR><<<unsigned((threads + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      B, Lq, H, Dv, o, dout, delta);
}

// The general form (any even Dv, 4-byte alignment): one warp per row, bf16 pairs.
__global__ void row_delta_kernel(int B, int Lq, int H, int Dv, const __nv_bfloat16* o,
                                 const __nv_bfloat16* dout, float* delta) {
  // One warp per (b, i, h) row of o; lanes stride over Dv in bf16 pairs.
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= int64_t(B) * Lq * H) return;
  const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(o + row * Dv);
  const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(dout + row * Dv);
  float s = 0.f;
  for (int c = lane; c < Dv / 2; c += 32) {
    const float2 x = __bfloat1622float2(o2[c]), y = __bfloat1622float2(d2[c]);
    s += x.x * y.x + x.y * y.y;
  }
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
  if (lane == 0) {
    const int h = int(row % H);
    const int64_t bi = row / H, i = bi % Lq, b = bi / Lq;
    delta[(b * H + h) * Lq + i] = s;
  }
}

}  // namespace

const SdpaKernels& forward_kernels(int D, int Dv, bool wgmma) {
  static const std::array<SdpaKernels, kWidthPairs> hopper =
      shipped_forward<FwdChoice>(std::make_index_sequence<kWidthPairs>());
  static const std::array<SdpaKernels, kWidthPairs> mma =
      shipped_forward<FwdChoiceMma>(std::make_index_sequence<kWidthPairs>());
  return (wgmma ? hopper : mma)[width_pair(D, Dv)];
}
const SdpaKernels& forward_kernels(int D, int Dv) {
  return forward_kernels(D, Dv, device_has_wgmma());
}

bool launch_forward(const KernelParams& p, const SdpaKernels& k, cudaStream_t s) {
  const SdpaPath path = forward_path(p.a, k.plain != nullptr, k.bias != nullptr);
  const auto fn = path == SdpaPath::kBias ? k.bias : path == SdpaPath::kPlain ? k.plain : k.opts;
  if (!fn) return false;  // a tuning variant without the option path, options asked
  fn(p, s);
  return true;
}

}  // namespace detail

void sdpa_forward(const SdpaArgs& a, __nv_bfloat16* o, float* o_f32, float* lse, cudaStream_t s) {
  check(a);
  require(o != nullptr || o_f32 != nullptr,
          "cuda sdpa_forward: pass o (bf16), o_f32 (fp32) or both");
  require(lse != nullptr, "cuda sdpa_forward: lse [B, H, Lq] is required");
  if (a.Lq == 0) return;
  if (detail::vendor_forward(a, o, o_f32, lse, s)) return;
  detail::KernelParams p;
  p.a = a;
  p.o = o;
  p.o_f32 = o_f32;
  p.lse = lse;
  detail::launch_forward(p, detail::forward_kernels(a.D, a.Dv), s);
}

void sdpa_row_delta(int B, int Lq, int H, int Dv, const __nv_bfloat16* o, const __nv_bfloat16* dout,
                    float* delta, cudaStream_t s) {
  require(B >= 0 && Lq >= 0 && H >= 1 && Dv >= 2 && Dv % 2 == 0,
          "cuda sdpa_row_delta: need B, Lq >= 0, H >= 1 and an even Dv; got B=", B, " Lq=", Lq,
          " H=", H, " Dv=", Dv);
  const int64_t rows = int64_t(B) * Lq * H;
  if (rows == 0) return;
  require(o && dout && delta, "cuda sdpa_row_delta: o, dout and delta must be device pointers");
  // The 16-byte form where it can: the warp-per-row form loads 4 bytes a lane.
  const bool vec =
      Dv % 8 == 0 && (reinterpret_cast<uintptr_t>(o) | reinterpret_cast<uintptr_t>(dout)) % 16 == 0;
  if (vec) {
    detail::launch_row_delta_vec<1>(B, Lq, H, Dv, o, dout, delta, s);
    LCR_CUDA_CHECK_LAUNCH();
    return;
  }
  constexpr int kWarps = 8;
  detail::row_delta_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(
      B, Lq, H, Dv, o, dout, delta);
  LCR_CUDA_CHECK_LAUNCH();
}

}  // namespace lcr::cuda
