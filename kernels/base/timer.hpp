#pragma once
// Wall-clock timing for stats and logs: the steady clock and the seconds since a start
// (header-only, so the CUDA libraries use it too).
#include <chrono>

namespace lcr {

using Clock = std::chrono::steady_clock;

// Seconds elapsed on the steady clock since t0.
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace lcr
