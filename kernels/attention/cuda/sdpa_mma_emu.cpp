// The mma.sync SDPA kernels (forward and backward, every path) built for the SIMT emulator
// (sdpa_mma_emu.hpp).
#define LCR_CUDA_EMU 1

#include "kernels/attention/cuda/sdpa_mma_emu.hpp"

#include <algorithm>
#include <type_traits>

#include "kernels/attention/cuda/sdpa_backward_kernel.cuh"
#include "kernels/attention/cuda/sdpa_forward_kernel.cuh"
#include "kernels/attention/cuda/sdpa_heuristics.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda::detail {
namespace {

namespace K = ::lcr::cuda::sdpamma_emu;

// One configuration on the emulator, launched as launch_fwd / launch_bwd launch it (NoKernel:
// never picked, backward_path / forward_path are told the class lacks it).
template <int DP, int DVP, bool kOpts, bool kBias>
void run_fwd(const KernelParams&, NoKernel) {}
template <int DP, int DVP, bool kOpts, bool kBias, int BM, int BN, int NW>
void run_fwd(KernelParams p, FwdMma<BM, BN, NW>) {
  using T = K::FwdTraits<DP, DVP, BM, BN, NW>;
  p.n_tiles = (p.a.Lq + BM - 1) / BM;
  const int64_t grid = int64_t(p.n_tiles) * p.a.B * p.a.H;
  if (grid > 0)
    ::lcr::emu::launch({unsigned(grid), 1, 1}, {unsigned(T::kThreads), 1, 1},
                       T::smem(kOpts || kBias),
                       [&] { K::sdpa_fwd_kernel<DP, DVP, BM, BN, NW, kOpts, kBias>(p); });
}

template <int DP, int DVP, bool kOpts, bool kBias>
void run_bwd(const KernelParams&, NoKernel) {}
template <int DP, int DVP, bool kOpts, bool kBias, int BM, int NW, bool kPipe, int DQM>
void run_bwd(KernelParams p, BwdMma<BM, NW, kPipe, DQM>) {
  using T = K::BwdTraits<DP, DVP, BM, NW, kPipe, DQM>;
  p.n_tiles = (p.a.Lk + T::BN - 1) / T::BN;
  const int64_t grid = int64_t(p.n_tiles) * p.a.B * p.a.Hkv;
  if (grid > 0)
    ::lcr::emu::launch({unsigned(grid), 1, 1}, {unsigned(T::kThreads), 1, 1}, T::kSmem,
                       [&] { K::sdpa_bwd_kernel<DP, DVP, BM, NW, kOpts, kPipe, DQM, kBias>(p); });
}

template <class C>
constexpr bool has = !std::is_same_v<C, NoKernel>;

// The class's kernel for the call's path, as launch_forward / launch_backward pick it.
template <int DP, int DVP>
void fwd_class(const KernelParams& p) {
  using C = FwdChoiceMma<DP, DVP>;
  static_assert(!uses_wgmma<C>, "the table without wgmma");
  switch (forward_path(p.a, has<typename C::Plain>, has<typename C::Bias>)) {
    case SdpaPath::kBias:
      return run_fwd<DP, DVP, false, true>(p, typename C::Bias{});
    case SdpaPath::kPlain:
      return run_fwd<DP, DVP, false, false>(p, typename C::Plain{});
    case SdpaPath::kOpts:
      return run_fwd<DP, DVP, true, false>(p, typename C::Opts{});
  }
}
template <int DP, int DVP>
void bwd_class(const KernelParams& p) {
  using C = BwdChoiceMma<DP, DVP>;
  static_assert(!uses_wgmma<C>, "the table without wgmma");
  switch (backward_path(p, has<typename C::Plain>, has<typename C::Bias>)) {
    case SdpaPath::kBias:
      return run_bwd<DP, DVP, false, true>(p, typename C::Bias{});
    case SdpaPath::kPlain:
      return run_bwd<DP, DVP, false, false>(p, typename C::Plain{});
    case SdpaPath::kOpts:
      return run_bwd<DP, DVP, true, false>(p, typename C::Opts{});
  }
}

// (width_class(D), width_class(Dv)) -> the class's function.
template <int DP>
void by_v(const KernelParams& p, int dvp, void (*f64)(const KernelParams&),
          void (*f128)(const KernelParams&), void (*f256)(const KernelParams&)) {
  (dvp == 64 ? f64 : dvp == 128 ? f128 : f256)(p);
}
void dispatch(const KernelParams& p, bool forward) {
  const int dp = width_class(p.a.D), dvp = width_class(p.a.Dv);
  if (forward) {
    if (dp == 64)
      return by_v<64>(p, dvp, fwd_class<64, 64>, fwd_class<64, 128>, fwd_class<64, 256>);
    if (dp == 128)
      return by_v<128>(p, dvp, fwd_class<128, 64>, fwd_class<128, 128>, fwd_class<128, 256>);
    return by_v<256>(p, dvp, fwd_class<256, 64>, fwd_class<256, 128>, fwd_class<256, 256>);
  }
  if (dp == 64) return by_v<64>(p, dvp, bwd_class<64, 64>, bwd_class<64, 128>, bwd_class<64, 256>);
  if (dp == 128)
    return by_v<128>(p, dvp, bwd_class<128, 64>, bwd_class<128, 128>, bwd_class<128, 256>);
  by_v<256>(p, dvp, bwd_class<256, 64>, bwd_class<256, 128>, bwd_class<256, 256>);
}

}  // namespace

void sdpa_forward_mma_emu(const SdpaArgs& a, __nv_bfloat16* o, float* o_f32, float* lse) {
  require(o || o_f32, "cuda sdpa (mma.sync, emulator): pass o (bf16), o_f32 or both");
  KernelParams p;
  p.a = a;
  p.o = o;
  p.o_f32 = o_f32;
  p.lse = lse;
  dispatch(p, true);
}

void sdpa_backward_mma_emu(const SdpaArgs& a, const float* lse, const float* delta,
                           const __nv_bfloat16* dout, float* dq, float* dk, float* dv,
                           bool accumulate, float* dbias_q, float* dbias_k, float* dbias_q_sums) {
  const KernelParams p =
      backward_params(a, lse, delta, dout, dq, dk, dv, accumulate, dbias_q, dbias_k, dbias_q_sums);
  if (!accumulate) {
    const int64_t rows = int64_t(a.B) * a.Lq * a.H;
    std::fill(dq, dq + rows * a.D, 0.f);
    if (dbias_q) std::fill(dbias_q, dbias_q + rows, 0.f);
    if (dbias_q_sums) std::fill(dbias_q_sums, dbias_q_sums + 3 * rows, 0.f);
  }
  dispatch(p, false);
}

}  // namespace lcr::cuda::detail
