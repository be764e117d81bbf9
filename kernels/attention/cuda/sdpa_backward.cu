// Public backward entry point of the CUDA SDPA (sdpa.hpp): the kernel per head-width class and
// path that sdpa_heuristics.hpp chooses (the alternatives: the tuning library, sdpa_tuning.hpp).
// dq, dbias_q and dbias_q_sums are accumulated with fp32 atomics or bulk reductions
// (sdpa_backward_kernel.cuh says why); without `accumulate` they are zeroed first on the same
// stream.
#include <array>
#include <utility>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/device_code.hpp"
#include "kernels/attention/cuda/sdpa_backward_kernel.cuh"
#include "kernels/attention/cuda/sdpa_backward_wgmma.cuh"
#include "kernels/attention/cuda/sdpa_heuristics.hpp"

namespace lcr::cuda {
namespace detail {
namespace {

template <template <int, int> class Choice, std::size_t... I>
std::array<SdpaKernels, kWidthPairs> shipped_backward(std::index_sequence<I...>) {
  static_assert(!(uses_wgmma<BwdChoiceMma<pair_dp(I), pair_dvp(I)>> || ...),
                "the tables without wgmma take mma.sync kernels only");
  return {kernels_of<pair_dp(I), pair_dvp(I), Choice<pair_dp(I), pair_dvp(I)>>()...};
}

}  // namespace

const SdpaKernels& backward_kernels(int D, int Dv, bool wgmma) {
  static const std::array<SdpaKernels, kWidthPairs> hopper =
      shipped_backward<BwdChoice>(std::make_index_sequence<kWidthPairs>());
  static const std::array<SdpaKernels, kWidthPairs> mma =
      shipped_backward<BwdChoiceMma>(std::make_index_sequence<kWidthPairs>());
  return (wgmma ? hopper : mma)[width_pair(D, Dv)];
}
const SdpaKernels& backward_kernels(int D, int Dv) {
  return backward_kernels(D, Dv, device_has_wgmma());
}

bool launch_backward(const KernelParams& p, const SdpaKernels& k, cudaStream_t s) {
  const SdpaPath path = backward_path(p, k.plain != nullptr, k.bias != nullptr);
  const auto fn = path == SdpaPath::kBias ? k.bias : path == SdpaPath::kPlain ? k.plain : k.opts;
  if (!fn) return false;  // a tuning variant without the option path, options asked
  if (!p.accumulate) {
    const auto& a = p.a;
    if (p.dq) LCR_CUDA_CHECK(cudaMemsetAsync(p.dq, 0, sizeof(float) * a.B * a.Lq * a.H * a.D, s));
    if (p.dbias_q)
      LCR_CUDA_CHECK(cudaMemsetAsync(p.dbias_q, 0, sizeof(float) * a.B * a.Lq * a.H, s));
    if (p.dbias_q_sums)
      LCR_CUDA_CHECK(cudaMemsetAsync(p.dbias_q_sums, 0, sizeof(float) * 3 * a.B * a.Lq * a.H, s));
  }
  fn(p, s);
  return true;
}

}  // namespace detail

void sdpa_backward(const SdpaArgs& a, const float* lse, const float* delta,
                   const __nv_bfloat16* dout, float* dq, float* dk, float* dv, float* dbias_q,
                   float* dbias_k, bool accumulate, cudaStream_t s, float* dbias_q_sums,
                   const __nv_bfloat16* o) {
  check(a);
  require(a.Lq == 0 || (lse && (delta || o) && dout && dq),
          "cuda sdpa_backward: lse, delta (or o), dout and dq must be device pointers when "
          "Lq > 0");
  require(a.Lk == 0 || (dk && dv),
          "cuda sdpa_backward: dk and dv must be device pointers when Lk > 0");
  auto aligned8 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7u) == 0; };
  require(aligned8(dq) && aligned8(dk) && aligned8(dv),
          "cuda sdpa_backward: dq, dk, dv must be 8-byte aligned (they are updated as float2)");
  detail::KernelParams p = detail::backward_params(a, lse, delta, dout, dq, dk, dv, accumulate,
                                                   dbias_q, dbias_k, dbias_q_sums);
  if (a.Lk == 0) {  // no key: every gradient that exists is zero
    if (!accumulate) {
      if (p.dq) LCR_CUDA_CHECK(cudaMemsetAsync(p.dq, 0, sizeof(float) * a.B * a.Lq * a.H * a.D, s));
      if (p.dbias_q)
        LCR_CUDA_CHECK(cudaMemsetAsync(p.dbias_q, 0, sizeof(float) * a.B * a.Lq * a.H, s));
      if (p.dbias_q_sums)
        LCR_CUDA_CHECK(cudaMemsetAsync(p.dbias_q_sums, 0, sizeof(float) * 3 * a.B * a.Lq * a.H, s));
    }
    return;
  }
  if (detail::vendor_backward(a, lse, o, dout, dq, dk, dv, dbias_q, dbias_k, dbias_q_sums,
                              accumulate, s))
    return;
  float* own_delta = nullptr;  // delta left to this call (sdpa.hpp): formed from o here
  if (!delta) {
    LCR_CUDA_CHECK(cudaMallocAsync(&own_delta, sizeof(float) * a.B * a.H * a.Lq, s));
    sdpa_row_delta(a.B, a.Lq, a.H, a.Dv, o, dout, own_delta, s);
    p.delta = own_delta;
  }
  detail::launch_backward(p, detail::backward_kernels(a.D, a.Dv), s);
  if (own_delta) LCR_CUDA_CHECK(cudaFreeAsync(own_delta, s));
}

}  // namespace lcr::cuda
