// The tile-variant search of the CUDA SDPA (sdpa_tuning.hpp): per head-width class, variant 0
// is the shipped choice (sdpa_heuristics.hpp, run on lcr_cuda_sdpa's own kernels) and the
// rest are the alternatives, each a configuration per path (Plain, Opts, Bias; NoKernel: none
// of its own, see sdpa_heuristics.hpp) that only this library compiles.
// Names: the plain kernel's configuration, then "/opts_" and "/bias_" with the option and
// kBias paths' where they differ from it:
//   forward mma.sync  BMxBN_wNW             forward wgmma   wgNWGx64_mbMB_qrQREGS
//   backward mma.sync qBM_wNW[_pipe][_dqM]  backward wgmma  wgNWG_qBM_mbMB_kvKVREGS
#include <array>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/attention/cuda/device_code.hpp"
#include "kernels/attention/cuda/sdpa_backward_kernel.cuh"
#include "kernels/attention/cuda/sdpa_backward_wgmma.cuh"
#include "kernels/attention/cuda/sdpa_forward_kernel.cuh"
#include "kernels/attention/cuda/sdpa_forward_wgmma.cuh"
#include "kernels/attention/cuda/sdpa_heuristics.hpp"
#include "kernels/attention/cuda/sdpa_tuning.hpp"

namespace lcr::cuda::detail {
namespace {

std::string name_of(NoKernel) { return ""; }
template <int BM, int BN, int NW>
std::string name_of(FwdMma<BM, BN, NW>) {
  return std::to_string(BM) + "x" + std::to_string(BN) + "_w" + std::to_string(NW);
}
template <int NWG, int MB, bool kQRegs>
std::string name_of(FwdWg<NWG, MB, kQRegs>) {
  return "wg" + std::to_string(NWG) + "x64_mb" + std::to_string(MB) + "_qr" + (kQRegs ? "1" : "0");
}
template <int BM, int NW, bool kPipe, int DQM>
std::string name_of(BwdMma<BM, NW, kPipe, DQM>) {
  return "q" + std::to_string(BM) + "_w" + std::to_string(NW) + (kPipe ? "_pipe" : "") +
         (DQM > 1 ? "_dq" + std::to_string(DQM) : "");
}
template <int NWG, int BM, int MB, bool kKVRegs>
std::string name_of(BwdWg<NWG, BM, MB, kKVRegs>) {
  return "wg" + std::to_string(NWG) + "_q" + std::to_string(BM) + "_mb" + std::to_string(MB) +
         "_kv" + (kKVRegs ? "1" : "0");
}

template <class Plain, class Opts, class Bias>
std::string name_of() {
  constexpr bool plain = !std::is_same_v<Plain, NoKernel>, opts = !std::is_same_v<Opts, NoKernel>;
  std::string n = plain ? name_of(Plain{}) : name_of(Opts{});
  if (plain && opts && !std::is_same_v<Opts, Plain>) n += "/opts_" + name_of(Opts{});
  if (!std::is_same_v<Bias, NoKernel> && !std::is_same_v<Bias, Plain>)
    n += "/bias_" + name_of(Bias{});
  return n;
}

// An alternative: configurations Plain, Opts, Bias at width class (DP, DVP).
template <int DP, int DVP, class Plain, class Opts, class Bias>
SdpaVariant alt() {
  return {name_of<Plain, Opts, Bias>(), kernels_of<DP, DVP, Plain, Opts, Bias>(),
          is_wgmma<Plain> || is_wgmma<Opts> || is_wgmma<Bias>};
}
// A width class's variants: the shipped Choice (the library's kernels for code with wgmma, or
// without), then the alternatives that code can run (less the one the Choice repeats: the
// mma.sync choices are alternatives of the wgmma tables).
template <class Choice>
std::vector<SdpaVariant> variants(const SdpaKernels& shipped, std::vector<SdpaVariant> alts,
                                  bool wgmma) {
  std::vector<SdpaVariant> v{
      {name_of<typename Choice::Plain, typename Choice::Opts, typename Choice::Bias>(), shipped,
       uses_wgmma<Choice>}};
  for (auto& a : alts)
    if ((wgmma || !a.wgmma) && a.name != v[0].name) v.push_back(std::move(a));
  return v;
}

using NK = NoKernel;

// The forward's alternatives per width class (the generic widths have none).
template <int DP, int DVP>
std::vector<SdpaVariant> fwd_alternatives() {
  if constexpr (DP == 64 && DVP == 64) {
    using Wg = FwdWg<2, 2, true>;
    using M64 = FwdMma<64, 64, 4>;
    using M128 = FwdMma<128, 64, 4>;
    return {alt<64, 64, Wg, M64, M128>(),  // mma.sync kBias
            alt<64, 64, M128, M64, M128>(),
            alt<64, 64, M128, M128, NK>(),
            alt<64, 64, M64, NK, M64>(),
            alt<64, 64, FwdMma<128, 128, 8>, NK, NK>(),
            alt<64, 64, FwdMma<128, 32, 4>, NK, NK>(),
            alt<64, 64, FwdMma<64, 128, 4>, NK, NK>(),
            alt<64, 64, NK, FwdMma<128, 64, 8>, NK>(),
            alt<64, 64, FwdWg<2, 2, false>, FwdWg<2, 2, false>, FwdWg<2, 2, false>>(),
            alt<64, 64, Wg, Wg, Wg>(),  // the wgmma option path
            alt<64, 64, FwdWg<2, 1, true>, FwdWg<2, 1, true>, FwdWg<2, 1, true>>(),
            alt<64, 64, FwdWg<1, 4, true>, FwdWg<1, 4, true>, FwdWg<1, 4, true>>()};
  } else if constexpr (DP == 128 && DVP == 128) {
    using M4 = FwdMma<128, 64, 4>;
    using M8 = FwdMma<128, 64, 8>;
    return {alt<128, 128, M4, M8, M4>(),
            alt<128, 128, M8, NK, M8>(),
            alt<128, 128, FwdMma<128, 32, 4>, NK, NK>(),
            alt<128, 128, FwdMma<64, 64, 4>, NK, NK>(),
            alt<128, 128, FwdMma<128, 128, 8>, NK, NK>(),
            alt<128, 128, FwdWg<2, 1, false>, FwdWg<2, 1, false>, FwdWg<2, 1, false>>(),
            alt<128, 128, FwdWg<1, 2, true>, FwdWg<1, 2, true>, FwdWg<1, 2, true>>()};
  } else if constexpr (DP == 128 && DVP == 64) {
    return {alt<128, 64, FwdMma<128, 64, 4>, FwdMma<128, 64, 8>, NK>(),
            alt<128, 64, FwdMma<128, 64, 8>, NK, NK>(),
            alt<128, 64, FwdWg<2, 2, true>, FwdWg<2, 2, true>, FwdWg<2, 2, true>>(),
            alt<128, 64, FwdWg<2, 1, true>, FwdWg<2, 1, true>, FwdWg<2, 1, true>>()};
  } else if constexpr (DP == 256 && DVP == 128) {
    using M64 = FwdMma<64, 64, 4>;
    return {alt<256, 128, FwdMma<128, 32, 4>, M64, NK>(), alt<256, 128, M64, M64, NK>(),
            alt<256, 128, FwdMma<128, 64, 8>, NK, NK>(),
            alt<256, 128, FwdWg<2, 1, false>, FwdWg<2, 1, false>, FwdWg<2, 1, false>>()};
  } else {
    return {};
  }
}

// The backward's alternatives per width class (the generic widths have none).
template <int DP, int DVP>
std::vector<SdpaVariant> bwd_alternatives() {
  if constexpr (DP == 64 && DVP == 64) {
    using Opts = BwdMma<64, 8, true>;
    using Bias = BwdMma<128, 8, true>;  // the mma.sync kBias kernel
    return {alt<64, 64, Bias, Opts, Bias>(),
            alt<64, 64, BwdMma<128, 8>, BwdMma<64, 8>, NK>(),
            alt<64, 64, BwdMma<64, 8, true>, NK, NK>(),
            alt<64, 64, BwdMma<64, 8>, NK, NK>(),
            alt<64, 64, BwdMma<64, 4>, NK, NK>(),
            alt<64, 64, BwdMma<32, 8>, NK, NK>(),
            alt<64, 64, BwdWg<1, 64, 2, false>, Opts, Bias>(),
            alt<64, 64, BwdWg<2, 64, 1, true>, Opts, Bias>()};
  } else if constexpr (DP == 128 && DVP == 128) {
    using Dq2 = BwdMma<64, 8, true, 2>;
    return {alt<128, 128, Dq2, Dq2, Dq2>(),
            alt<128, 128, BwdMma<64, 8, true>, BwdMma<64, 8, true>, NK>(),
            alt<128, 128, BwdMma<64, 8>, BwdMma<64, 8>, NK>(),
            alt<128, 128, BwdMma<64, 4>, NK, NK>(),
            alt<128, 128, BwdMma<32, 8>, NK, NK>(),
            alt<128, 128, BwdMma<32, 4>, NK, NK>()};
  } else if constexpr (DP == 128 && DVP == 64) {
    return {alt<128, 64, BwdMma<64, 8>, BwdMma<64, 8>, NK>(),
            alt<128, 64, BwdWg<2, 64, 1, false>, BwdMma<64, 8>, NK>()};
  } else if constexpr (DP == 256 && DVP == 128) {
    using Opts = BwdMma<32, 4>;
    return {alt<256, 128, BwdMma<16, 8, true>, Opts, NK>(), alt<256, 128, BwdMma<16, 8>, NK, NK>(),
            alt<256, 128, BwdMma<16, 4>, NK, NK>(), alt<256, 128, BwdMma<32, 4>, NK, NK>()};
  } else {
    return {};
  }
}

template <template <int, int> class Choice, std::size_t... I>
std::array<std::vector<SdpaVariant>, kWidthPairs> fwd_tables(bool wgmma,
                                                             std::index_sequence<I...>) {
  return {variants<Choice<pair_dp(I), pair_dvp(I)>>(forward_kernels(pair_dp(I), pair_dvp(I), wgmma),
                                                    fwd_alternatives<pair_dp(I), pair_dvp(I)>(),
                                                    wgmma)...};
}
template <template <int, int> class Choice, std::size_t... I>
std::array<std::vector<SdpaVariant>, kWidthPairs> bwd_tables(bool wgmma,
                                                             std::index_sequence<I...>) {
  return {variants<Choice<pair_dp(I), pair_dvp(I)>>(
      backward_kernels(pair_dp(I), pair_dvp(I), wgmma), bwd_alternatives<pair_dp(I), pair_dvp(I)>(),
      wgmma)...};
}

const SdpaVariant* pick(const std::vector<SdpaVariant>& v, int i) {
  return i >= 0 && i < int(v.size()) ? &v[i] : nullptr;
}

}  // namespace

const SdpaVariant* forward_variant(int D, int Dv, int i, bool wgmma) {
  static const auto hopper = fwd_tables<FwdChoice>(true, std::make_index_sequence<kWidthPairs>());
  static const auto mma = fwd_tables<FwdChoiceMma>(false, std::make_index_sequence<kWidthPairs>());
  return pick((wgmma ? hopper : mma)[width_pair(D, Dv)], i);
}
const SdpaVariant* forward_variant(int D, int Dv, int i) {
  return forward_variant(D, Dv, i, device_has_wgmma());
}

const SdpaVariant* backward_variant(int D, int Dv, int i, bool wgmma) {
  static const auto hopper = bwd_tables<BwdChoice>(true, std::make_index_sequence<kWidthPairs>());
  static const auto mma = bwd_tables<BwdChoiceMma>(false, std::make_index_sequence<kWidthPairs>());
  return pick((wgmma ? hopper : mma)[width_pair(D, Dv)], i);
}
const SdpaVariant* backward_variant(int D, int Dv, int i) {
  return backward_variant(D, Dv, i, device_has_wgmma());
}

}  // namespace lcr::cuda::detail
