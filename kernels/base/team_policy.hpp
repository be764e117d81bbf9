#pragma once
// The team policy of the Kokkos attention kernels (SDPA, PaTH's blocks and scans).
#include "kernels/base/tensor.hpp"

namespace lcr {

// Dynamic: under a causal mask a team's work grows with its tile, so a static split of the
// league over CPU threads leaves the thread holding the last tiles working alone; threads
// take teams as they free up (GPU backends ignore the schedule).
using DynamicTeamPolicy = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
using TeamMember = DynamicTeamPolicy::member_type;

// A team's scratch tiles (level 0: on-chip on a GPU; level 1: global memory there), row-major.
template <class T>
using Scratch2 = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace::scratch_memory_space,
                              Kokkos::MemoryUnmanaged>;
template <class T>
using Scratch1 =
    Kokkos::View<T*, Kokkos::LayoutRight, ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;

}  // namespace lcr
