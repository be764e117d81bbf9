#pragma once
// The team policy of the Kokkos attention kernels (SDPA, PaTH's blocks and scans).
#include "kernels/base/tensor.hpp"

namespace lcr {

// Dynamic: under a causal mask a team's work grows with its tile, so a static split of the
// league over CPU threads leaves the thread holding the last tiles working alone; threads
// take teams as they free up (GPU backends ignore the schedule).
using DynamicTeamPolicy = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;

}  // namespace lcr
