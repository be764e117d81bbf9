#pragma once
// The tile-variant search of the CUDA SDPA: lcr_cuda_sdpa_tuning, a library apart from
// lcr_cuda_sdpa that only the benchmark (bench_cuda_sdpa --variants all) and the variant tests
// (tests/cuda/test_sdpa.cpp) link. Per head-width class, variant 0 is the configuration the
// library ships (sdpa_heuristics.hpp, the library's own kernels); the others are the
// alternatives it was chosen against, compiled only here. Run one with launch_forward /
// launch_backward (sdpa_internal.hpp), which pick its kernel for the call's path.
#include <string>

#include "kernels/attention/cuda/sdpa_internal.hpp"

namespace lcr::cuda::detail {

struct SdpaVariant {
  std::string name;  // the tile configuration per path, e.g. "wg2x64_mb2_qr1/opts_64x64_w4"
  SdpaKernels kernels;
  bool wgmma = false;  // some path runs on wgmma (needs the sm_90a code)
};

// Variant i of the width class of (D, Dv) for code with wgmma or without (device_code.hpp;
// without it, variant 0 is the mma.sync choice and no variant uses wgmma); the three-argument
// forms for the code the current device runs. Null past the last.
const SdpaVariant* forward_variant(int D, int Dv, int i, bool wgmma);
const SdpaVariant* backward_variant(int D, int Dv, int i, bool wgmma);
const SdpaVariant* forward_variant(int D, int Dv, int i);
const SdpaVariant* backward_variant(int D, int Dv, int i);

}  // namespace lcr::cuda::detail
