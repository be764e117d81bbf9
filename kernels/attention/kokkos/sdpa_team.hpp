#pragma once
// What the Kokkos SDPA kernels' teams share (sdpa.cpp, sdpa_backward_gpu.hpp): the team
// policy, scratch tiles, the order of work items, the per-tile transposes.
#include "kernels/attention/kokkos/sdpa_rows.hpp"
#include "kernels/base/team_policy.hpp"

namespace lcr::sdpa_detail {

using TeamPolicy = DynamicTeamPolicy;
using Member = TeamMember;

// Level-0 scratch is small on GPUs (48 KiB less Kokkos's share on CUDA); anything bigger
// goes to level 1 (global memory there; on a CPU both levels are host memory).
inline int scratch_level(size_t bytes) {
  return bytes <= size_t(Kokkos::TeamPolicy<ExecSpace>::scratch_size_max(0)) ? 0 : 1;
}

template <class T>
size_t scratch2(int rows, int cols) {
  return Scratch2<T>::shmem_size(rows, cols);
}

// x [B, L, Hx, Dx] -> [B Hx, ceil(L / block), Dx, block], zero past L: tile t's transpose,
// one contiguous [Dx, block] block, as the register blocks' right operand wants it (K^T for
// S = Q K^T). Blocks rather than one [Dx, L] row per head: rows L floats apart (a power of
// two at L = 4K, 16K) would all fall in the same few cache sets.
template <class T>
View4<const T> transpose_heads(const View4<const T>& x, int block = kTileK) {
  const int B = x.extent(0), L = x.extent(1), Hx = x.extent(2), Dx = x.extent(3);
  const int nt = (L + block - 1) / block;
  View4<T> out(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::sdpa_transposed"), B * Hx, nt,
               Dx, block);
  Kokkos::parallel_for(
      "lcr::sdpa_transpose",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B * Hx, nt * block, Dx}),
      KOKKOS_LAMBDA(int bh, int i, int d) {
        out(bh, i / block, d, i % block) = i < L ? x(bh / Hx, i, bh % Hx, d) : T(0);
      });
  return out;
}

// Work item t of a league of nbh * ntiles: tile-major, so with a descending tile order the
// dynamic schedule hands out the longest causal work first and short tiles fill in.
struct TileOf {
  int bh, tile;
};
KOKKOS_INLINE_FUNCTION TileOf tile_of(int rank, int league, int ntiles, bool descending) {
  const int nbh = league / ntiles;
  const int k = rank / nbh;
  return {rank % nbh, descending ? ntiles - 1 - k : k};
}

inline int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }

}  // namespace lcr::sdpa_detail
