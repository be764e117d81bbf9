#pragma once
// Which code of lcr's CUDA kernels runs on the current device. One binary may carry sm_90a
// SASS (wgmma, TMA) beside compute_80 PTX (mma.sync), or only the PTX, which the driver
// compiles for whatever GPU it finds (CMAKE_CUDA_ARCHITECTURES="80;90a", or "80-virtual").
// The device's compute capability does not say which the runtime loaded: an H100 runs the
// compute_80 PTX of a build without 90a. A probe kernel, compiled like every other, reports
// the __CUDA_ARCH__ and the sm_90a features of the code actually loaded; the SDPA picks its
// kernel tables from it (sdpa_heuristics.hpp), and the PaTH kernels compile their wgmma
// products to mma.sync where wgmma is absent (device/wgmma.cuh).
#include <string>

namespace lcr::cuda {

struct DeviceCode {
  int arch = 0;        // __CUDA_ARCH__ of the loaded code: 800, 860, 890, 900, ...
  bool wgmma = false;  // compiled with the sm_90a features (wgmma, TMA bulk reductions)
  int cc_major = 0;    // the device's compute capability
  int cc_minor = 0;
  std::string name() const;  // e.g. "sm_90a code on cc 9.0", "sm_80 code on cc 9.0"
};

// The current device's (cudaGetDevice), probed once per device and cached; thread-safe.
// Throws, naming the fix, when the binary has no code this device can run.
const DeviceCode& device_code();

// device_code().wgmma, or true where no GPU is visible (then no kernel runs, and host-only
// tests inspect the Hopper tables).
bool device_has_wgmma();

}  // namespace lcr::cuda
