// The wgmma SDPA kernels (forward; backward, plain and kBias paths) built for the SIMT emulator
// (sdpa_wgmma_emu.hpp).
#define LCR_CUDA_EMU 1

#include "kernels/attention/cuda/sdpa_wgmma_emu.hpp"

#include <algorithm>

#include "kernels/attention/cuda/sdpa_backward_wgmma.cuh"
#include "kernels/attention/cuda/sdpa_forward_wgmma.cuh"
#include "kernels/base/error.hpp"

namespace lcr::cuda::detail {
namespace {

namespace K = ::lcr::cuda::sdpawg_emu;

template <int DP, int DVP, int NWG, int kMode, bool kQRegs>
void run(KernelParams p) {
  const int64_t grid = K::wg_fwd_grid<NWG>(p);
  if (grid == 0) return;
  ::lcr::emu::launch({unsigned(grid), 1, 1}, {unsigned(128 * NWG), 1, 1},
                     K::wg_fwd_smem_bytes<DP, DVP, NWG>(),
                     [&] { K::sdpa_fwd_wg_kernel<DP, DVP, NWG, 1, kMode, kQRegs>(p); });
}

template <int DP, int DVP, int NWG>
void by_mode(const KernelParams& p) {
  // Q from registers with two warpgroups, from shared memory with one: both forms run (QK 256:
  // from shared memory, its fragments would take 64 registers).
  constexpr bool kQRegs = NWG == 2 && DP <= 128;
  switch (forward_path(p.a)) {  // as launch_forward picks (one kernel serves every path)
    case SdpaPath::kBias:
      return run<DP, DVP, NWG, K::kWgBias, kQRegs>(p);
    case SdpaPath::kOpts:
      return run<DP, DVP, NWG, K::kWgOpts, kQRegs>(p);
    case SdpaPath::kPlain:
      return run<DP, DVP, NWG, K::kWgPlain, kQRegs>(p);
  }
}

template <int NWG>
void by_width(const KernelParams& p) {
  const int dp = width_class(p.a.D), dvp = width_class(p.a.Dv);
  if (dp == 64 && dvp == 64) return by_mode<64, 64, NWG>(p);
  if (dp == 128 && dvp == 128) return by_mode<128, 128, NWG>(p);
  if (dp == 128 && dvp == 64) return by_mode<128, 64, NWG>(p);
  if (dp == 256 && dvp == 128) return by_mode<256, 128, NWG>(p);
  throw_error("cuda sdpa (wgmma, emulator): no kernel for QK width ", p.a.D, " / V width ", p.a.Dv,
              "; the wgmma forward serves QK 64 / V 64, QK 128 / V 128, QK 128 / V 64 and "
              "QK 256 / V 128 (padded classes)");
}

template <int DP, int DVP, int NWG, int BM, bool kKVRegs>
void run_bwd(KernelParams p) {
  const int64_t grid = K::wg_bwd_grid<DP, DVP, NWG, BM>(p);
  if (grid == 0) return;
  const bool bias = backward_path(p) == SdpaPath::kBias;  // as launch_backward picks it
  // dq by tensor reductions (dq 16-byte aligned) or atomics, as launch_bwd_wg picks
  if constexpr (K::WgBwdShape<DP, DVP, NWG, BM>::kBulkDqShape) {
    if (K::wg_bwd_bulk_dq<DP, DVP, NWG, BM>(p))
      return ::lcr::emu::launch(
          {unsigned(grid), 1, 1}, {unsigned(128 * NWG), 1, 1},
          K::wg_bwd_smem_bytes<DP, DVP, NWG, BM, true>(),
          [&, map = emu_tensor_map(K::wg_bwd_dq_map<BM>(p))] {
            if (bias)
              K::sdpa_bwd_wg_kernel<DP, DVP, NWG, BM, 1, kKVRegs, true, true>(p, map);
            else
              K::sdpa_bwd_wg_kernel<DP, DVP, NWG, BM, 1, kKVRegs, false, true>(p, map);
          });
  }
  ::lcr::emu::launch({unsigned(grid), 1, 1}, {unsigned(128 * NWG), 1, 1},
                     K::wg_bwd_smem_bytes<DP, DVP, NWG, BM>(), [&] {
                       if (bias)
                         K::sdpa_bwd_wg_kernel<DP, DVP, NWG, BM, 1, kKVRegs, true>(p, {});
                       else
                         K::sdpa_bwd_wg_kernel<DP, DVP, NWG, BM, 1, kKVRegs, false>(p, {});
                     });
}

template <int DP, int DVP>
void bwd_by_shape(const KernelParams& p, int nwg, int bm, bool kv_regs) {
  auto fail = [&] {
    throw_error("cuda sdpa backward (wgmma, emulator): no instantiation for ", nwg,
                " warpgroup(s), ", bm, "-query steps, K/V fragments ", kv_regs ? "in" : "not in",
                " registers at QK ", DP, " / V ", DVP);
  };
  if constexpr (DP == 256) {  // the column-split form: two warpgroups, 64-query steps
    if (bm == 64 && nwg == 2 && !kv_regs) return run_bwd<DP, DVP, 2, 64, false>(p);
  } else {
    if (bm == 64) {
      if (nwg == 1)
        return kv_regs ? run_bwd<DP, DVP, 1, 64, true>(p) : run_bwd<DP, DVP, 1, 64, false>(p);
      return kv_regs ? run_bwd<DP, DVP, 2, 64, true>(p) : run_bwd<DP, DVP, 2, 64, false>(p);
    }
    if constexpr (DP == 64)  // 128-query steps: the 64-wide class only (registers)
      if (bm == 128 && nwg == 2 && !kv_regs) return run_bwd<DP, DVP, 2, 128, false>(p);
  }
  fail();
}

}  // namespace

void sdpa_backward_wgmma_emu(const SdpaArgs& a, const float* lse, const float* delta,
                             const __nv_bfloat16* dout, float* dq, float* dk, float* dv,
                             bool accumulate, int warpgroups, int query_step, bool kv_regs,
                             float* dbias_k) {
  const KernelParams p =
      backward_params(a, lse, delta, dout, dq, dk, dv, accumulate, nullptr, dbias_k, nullptr);
  require(!has_options(a) || row_col_terms_only(a),
          "cuda sdpa backward (wgmma, emulator): the plain and kBias paths only (no softcap)");
  if (!accumulate) std::fill(dq, dq + int64_t(a.B) * a.Lq * a.H * a.D, 0.f);
  const int dp = width_class(a.D), dvp = width_class(a.Dv);
  if (dp == 64 && dvp == 64) return bwd_by_shape<64, 64>(p, warpgroups, query_step, kv_regs);
  if (dp == 128 && dvp == 128) return bwd_by_shape<128, 128>(p, warpgroups, query_step, kv_regs);
  if (dp == 128 && dvp == 64) return bwd_by_shape<128, 64>(p, warpgroups, query_step, kv_regs);
  if (dp == 256 && dvp == 128) return bwd_by_shape<256, 128>(p, warpgroups, query_step, kv_regs);
  throw_error("cuda sdpa backward (wgmma, emulator): no kernel for QK width ", a.D, " / V width ",
              a.Dv,
              "; it serves QK 64 / V 64, QK 128 / V 128, QK 128 / V 64 and QK 256 / V 128 "
              "(padded classes)");
}

void sdpa_forward_wgmma_emu(const SdpaArgs& a, __nv_bfloat16* o, float* o_f32, float* lse,
                            int warpgroups) {
  require(warpgroups == 1 || warpgroups == 2,
          "cuda sdpa (wgmma, emulator): warpgroups must be 1 or 2, got ", warpgroups);
  KernelParams p;
  p.a = a;
  p.o = o;
  p.o_f32 = o_f32;
  p.lse = lse;
  if (warpgroups == 1)
    by_width<1>(p);
  else
    by_width<2>(p);
}

}  // namespace lcr::cuda::detail
