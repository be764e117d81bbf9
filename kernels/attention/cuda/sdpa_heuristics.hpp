#pragma once
// Which tile configuration the CUDA SDPA (sdpa.hpp) runs, per padded head-width class
// (DP, DVP) = (width_class(D), width_class(Dv)) and per path, and why. sdpa_forward.cu and
// sdpa_backward.cu compile and dispatch exactly these kernels; the alternatives the choices
// were measured against live in the bench-only library lcr_cuda_sdpa_tuning (sdpa_tuning.hpp:
// bench_cuda_sdpa --variants all), whose variant 0 is this file's choice. To change a choice:
// time it there, against the shipped one, at the benchmark shapes (1x16x16384, 1x8x65536).
//
// The paths (launch_forward / launch_backward, sdpa_internal.hpp, pick a call's):
//   Plain: no ALiBi, bias lane or softcap, scale > 0 (backward: and no dbias_q, dbias_k).
//   Opts:  every option (softcap, dbias_q, dbias_q_sums, any scale): the general kernel.
//   Bias:  the kBias form for a row term plus a column term (FoX's bias lanes, ALiBi), no
//          softcap, scale > 0 (backward: dbias_k only, no dbias_q, no dbias_q_sums).
// NoKernel for Plain or Bias: those calls take the Opts kernel.
#include "kernels/attention/cuda/sdpa_internal.hpp"

namespace lcr::cuda::detail {

// ---- Tile configurations (the launchers: sdpa_forward_kernel.cuh, sdpa_forward_wgmma.cuh,
// sdpa_backward_kernel.cuh, sdpa_backward_wgmma.cuh).
struct NoKernel {};
// Forward, mma.sync m16n8k16: BM query rows x BN-key tiles, NW warps (launch_fwd).
template <int BM, int BN, int NW>
struct FwdMma {};
// Forward, wgmma: NWG warpgroups of 64 query rows, 64-key tiles, at least MB CTAs per SM, Q's
// fragments in registers or read from shared memory (launch_fwd_wg).
template <int NWG, int MB, bool kQRegs>
struct FwdWg {};
// Backward, mma.sync: 16 keys per warp (NW warps) x BM-query steps; kPipe: dQ one step late
// (one barrier per step); DQM m-tiles per warp in the dQ product (launch_bwd).
template <int BM, int NW, bool kPipe = false, int DQM = 1>
struct BwdMma {};
// Backward, wgmma: NWG warpgroups of 64 keys x BM-query steps, at least MB CTAs per SM, K / V
// fragments in registers or in shared memory (launch_bwd_wg). Plain and Bias paths only.
template <int NWG, int BM, int MB, bool kKVRegs>
struct BwdWg {};

// ---- The forward. Generic widths (QK / V 64 / 256, 128 / 256, 256 / 64, 256 / 256): the
// option path serves plain calls too (rare widths; a few % slower than a plain kernel), with
// 64 x 64 tiles and 4 warps (Q re-read from shared memory: registers hold O).
template <int DP, int DVP>
struct FwdChoice {
  using Plain = NoKernel;
  using Opts = FwdMma<64, 64, 4>;
  using Bias = NoKernel;
};
template <>
struct FwdChoice<64, 64> {
  using Plain = FwdWg<2, 2, true>;  // fastest plain forward measured at 64 wide (H200)
  using Opts = FwdMma<64, 64, 4>;   // Q in registers: faster than 128 x 64 tiles with options
  using Bias = FwdWg<2, 2, true>;   // column term starts S's accumulators: beats mma.sync kBias
};
template <>
struct FwdChoice<128, 128> {
  using Plain = FwdWg<2, 1, true>;  // every path: faster than each mma.sync tiling measured
  using Opts = FwdWg<2, 1, true>;
  using Bias = FwdWg<2, 1, true>;
};
template <>
struct FwdChoice<128, 64> {          // PoPE at d = 64
  using Plain = FwdWg<2, 2, false>;  // Q from shared memory: Q in registers spills here
  using Opts = FwdWg<2, 2, false>;   // every path: faster than each mma.sync tiling measured
  using Bias = FwdWg<2, 2, false>;
};
template <>
struct FwdChoice<256, 128> {         // PoPE at d = 128
  using Plain = FwdWg<2, 1, false>;  // Q from shared memory (its fragments would take 64
                                     // registers): faster than the mma.sync 128 x 32 tiles
  using Opts = FwdMma<64, 64, 4>;    // kept for the option path (Q re-read from shared memory)
  using Bias = NoKernel;             // bias lanes / ALiBi take the option path at this width
};
template <>
struct FwdChoice<64, 128> {
  using Plain = NoKernel;
  using Opts = FwdMma<128, 64, 8>;  // 128 x 64 tiles, 8 warps of 16 rows, for every call
  using Bias = NoKernel;
};

// ---- The backward. dq (and dbias_q, dbias_q_sums) are accumulated with fp32 atomics or the
// wgmma kernels' tensor bulk reductions. Generic widths: the option path serves every call,
// 64 keys (4 warps) x 32-query steps (dK / dV of 256 lanes partly spill even so).
template <int DP, int DVP>
struct BwdChoice {
  using Plain = NoKernel;
  using Opts = BwdMma<32, 4>;
  using Bias = NoKernel;
};
template <>
struct BwdChoice<64, 64> {
  using Plain = BwdWg<2, 128, 1, false>;  // fastest plain backward measured at 64 wide (H200)
  using Opts = BwdMma<64, 8, true>;       // 128 keys x 64-query steps, dQ pipelined (kPipe)
  using Bias = BwdWg<2, 128, 1, false>;   // beats the mma.sync kBias kernel at every shape timed
};
template <>
struct BwdChoice<128, 128> {
  using Plain = BwdWg<2, 64, 1, false>;  // faster than every mma.sync tiling measured
  using Opts = BwdMma<64, 8, true, 2>;   // kPipe; dQ in two m-tiles a warp (DQM = 2): faster
  using Bias = BwdWg<2, 64, 1, false>;   // as Plain
};
template <>
struct BwdChoice<128, 64> {             // PoPE at d = 64
  using Plain = BwdWg<2, 64, 1, true>;  // K / V fragments in registers: the fastest here
  using Opts = BwdMma<64, 8>;           // 128 keys (8 warps) x 64-query steps
  using Bias = BwdWg<2, 64, 1, false>;  // kBias with K / V read from shared memory
};
template <>
struct BwdChoice<256, 128> {  // PoPE at d = 128
  // The two warpgroups share one 64-key tile and split dK's and dV's columns and S^T's query
  // columns: faster than the mma.sync 16-query tilings and than each warpgroup forming S^T.
  using Plain = BwdWg<2, 64, 1, false>;
  using Opts = BwdMma<32, 4>;  // 64 keys (4 warps) x 32-query steps: dK, dV spill least
  using Bias = BwdWg<2, 64, 1, false>;
};
template <>
struct BwdChoice<64, 128> {
  using Plain = NoKernel;
  using Opts = BwdMma<64, 8>;  // 128 keys (8 warps) x 64-query steps
  using Bias = NoKernel;
};

// ---- Without wgmma (the code loaded is compute_80 .. sm_89, or sm_90 without "a":
// device_code.hpp): mma.sync kernels only, the fastest mma.sync tiling of each class measured
// (on the H100, against each other: the tuning library's mma.sync alternatives). The generic
// widths take FwdChoice / BwdChoice, which are mma.sync already.
template <int DP, int DVP>
struct FwdChoiceMma : FwdChoice<DP, DVP> {};
template <>
struct FwdChoiceMma<64, 64> {
  using Plain = FwdMma<128, 64, 4>;
  using Opts = FwdMma<64, 64, 4>;
  using Bias = FwdMma<128, 64, 4>;
};
template <>
struct FwdChoiceMma<128, 128> {
  using Plain = FwdMma<128, 64, 4>;
  using Opts = FwdMma<128, 64, 8>;
  using Bias = FwdMma<128, 64, 4>;
};
template <>
struct FwdChoiceMma<128, 64> {
  using Plain = FwdMma<128, 64, 4>;
  using Opts = FwdMma<128, 64, 8>;
  using Bias = NoKernel;
};
template <>
struct FwdChoiceMma<256, 128> {
  using Plain = FwdMma<128, 32, 4>;
  using Opts = FwdMma<64, 64, 4>;
  using Bias = NoKernel;
};
template <int DP, int DVP>
struct BwdChoiceMma : BwdChoice<DP, DVP> {};
template <>
struct BwdChoiceMma<64, 64> {
  // 64-query steps: 220 TFLOP/s against 212 for 128-query steps (compute_80 code on an H100,
  // bench_cuda_sdpa --bwd-only --variants all, 1x16x16384)
  using Plain = BwdMma<64, 8, true>;
  using Opts = BwdMma<64, 8, true>;
  using Bias = BwdMma<128, 8, true>;
};
template <>
struct BwdChoiceMma<128, 128> {
  using Plain = BwdMma<64, 8, true, 2>;
  using Opts = BwdMma<64, 8, true, 2>;
  using Bias = BwdMma<64, 8, true, 2>;
};
template <>
struct BwdChoiceMma<128, 64> {
  using Plain = BwdMma<64, 8>;
  using Opts = BwdMma<64, 8>;
  using Bias = NoKernel;
};
template <>
struct BwdChoiceMma<256, 128> {
  using Plain = BwdMma<16, 8, true>;
  using Opts = BwdMma<32, 4>;
  using Bias = NoKernel;
};

// Whether a configuration runs on wgmma (so needs the sm_90a code).
template <class T>
constexpr bool is_wgmma = false;
template <int NWG, int MB, bool kQRegs>
constexpr bool is_wgmma<FwdWg<NWG, MB, kQRegs>> = true;
template <int NWG, int BM, int MB, bool kKVRegs>
constexpr bool is_wgmma<BwdWg<NWG, BM, MB, kKVRegs>> = true;
template <class Choice>
constexpr bool uses_wgmma = is_wgmma<typename Choice::Plain> || is_wgmma<typename Choice::Opts> ||
                            is_wgmma<typename Choice::Bias>;

// ---- Configuration -> kernels. launcher<DP, DVP, path>(config) is defined next to each
// launcher (the kernel headers); NoKernel has none.
template <int DP, int DVP, SdpaPath kPath>
constexpr SdpaLauncher launcher(NoKernel) {
  return nullptr;
}
// The kernels of configurations Plain, Opts, Bias at width class (DP, DVP).
template <int DP, int DVP, class Plain, class Opts, class Bias>
SdpaKernels kernels_of() {
  return {launcher<DP, DVP, SdpaPath::kPlain>(Plain{}), launcher<DP, DVP, SdpaPath::kOpts>(Opts{}),
          launcher<DP, DVP, SdpaPath::kBias>(Bias{})};
}
template <int DP, int DVP, class Choice>
SdpaKernels kernels_of() {
  return kernels_of<DP, DVP, typename Choice::Plain, typename Choice::Opts,
                    typename Choice::Bias>();
}

}  // namespace lcr::cuda::detail
