#pragma once
// Communication volume and compute/communication overlap of one ring pass, per step,
// for scaling work. Times come from a steady clock on the host; the compute phase ends
// with a Kokkos::fence, so asynchronous device kernels are counted where they run.
//   compute_s  local kernels of the step (block attention, merges, accumulations)
//   wait_s     time blocked in Communicator::wait (communication not hidden by compute)
// A step whose wait_s is ~0 had its transfer fully overlapped by its compute.
#include <cstdint>
#include <string>
#include <vector>

namespace lcr {

struct RingStepStats {
  int step = 0;
  int64_t bytes_sent = 0, bytes_received = 0;
  int blocks_computed = 0;  // (query chunk, key chunk) pairs run through the kernel
  int blocks_skipped = 0;   // pairs skipped because causality masks them entirely
  double compute_s = 0, wait_s = 0;
};

struct RingStats {
  std::string pass;  // "forward" or "backward"
  std::vector<RingStepStats> steps;
  double prepare_s = 0;  // scheme lanes / packing before the ring (and lane backward after)
  double reduce_s = 0;   // parameter-gradient all-reduce (backward)
  double total_s = 0;    // wall time of the whole call

  int64_t bytes_sent() const;
  int64_t bytes_received() const;
  double compute_s() const;
  double wait_s() const;
  // compute / (compute + wait): 1 when communication is completely hidden.
  double overlap() const;
  std::string summary() const;  // one line
  std::string table() const;    // one line per step
};

}  // namespace lcr
