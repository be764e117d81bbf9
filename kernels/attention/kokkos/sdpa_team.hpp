#pragma once
// What the Kokkos SDPA kernels' teams share (sdpa.cpp, sdpa_backward_gpu.hpp): the team
// policy, scratch tiles, the order of work items, the per-tile transposes.
#include <cstring>

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

// A GPU-form team's shape (sdpa_forward_gpu.hpp, sdpa_backward_gpu.hpp): RG row groups of
// 4 rows of the side the team keeps, 8 SC columns of the side it walks a tile.
struct GpuShape {
  int rg, sc;
  KOKKOS_INLINE_FUNCTION int rows() const { return 4 * rg; }
  KOKKOS_INLINE_FUNCTION int cols() const { return 8 * sc; }
  KOKKOS_INLINE_FUNCTION int threads() const { return 8 * rg; }
  // A transposed tile of the kept side: rows padded by 4 so a warp's vector stores down its
  // columns spread over the banks.
  KOKKOS_INLINE_FUNCTION int ld() const { return 4 * rg + 4; }
};

// N consecutive elements, aligned to their size: device code reads and writes them with one
// vector instruction (ld.shared.v4 on CUDA); a CPU build (tests) copies them.
template <class T, int N>
struct alignas(N * sizeof(T)) Pack {
  T v[N];
};
template <int N, class T>
KOKKOS_FORCEINLINE_FUNCTION Pack<T, N> load_pack(const T* p) {
  if constexpr (tile::kGpuLayout) {
    return *reinterpret_cast<const Pack<T, N>*>(p);
  } else {
    Pack<T, N> x;
    std::memcpy(x.v, p, sizeof(x.v));
    return x;
  }
}
template <int N, class T>
KOKKOS_FORCEINLINE_FUNCTION void store_pack(T* p, const Pack<T, N>& x) {
  if constexpr (tile::kGpuLayout) {
    *reinterpret_cast<Pack<T, N>*>(p) = x;
  } else {
    std::memcpy(p, x.v, sizeof(x.v));
  }
}

// A GPU-form kernel's per-thread state lives in registers, one State a GPU thread. The GPU
// form on a CPU (tests) runs a team on one thread, which plays each of the team's `threads`
// in turn with a State of each: f(state, thread index).
constexpr int kMaxTeamThreads = tile::kGpuLayout ? 1 : 128;
template <class State, class F>
KOKKOS_FORCEINLINE_FUNCTION void each_thread(const Member& t, State* st, int threads, F&& f) {
  if constexpr (tile::kGpuLayout) {
    f(st[0], t.team_rank());
  } else {
    for (int v = 0; v < threads / t.team_size(); ++v) f(st[v], v * t.team_size() + t.team_rank());
  }
}

inline int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }

// acc[i][4 c + j] += sum_{k < n} A[k * lda + 4 ty + i] * B[k * ldb + 32 c + 4 tx + j]: a
// thread's 4 x 4 NC register block of a product over n rows of a scratch tile.
template <int NC, class T>
KOKKOS_INLINE_FUNCTION void accumulate_block(T (&acc)[4][4 * NC], const T* A, int lda, const T* B,
                                             int ldb, int n, int ty, int tx) {
  for (int k = 0; k < n; ++k) {
    const Pack<T, 4> x = load_pack<4>(A + k * lda + 4 * ty);
    LCR_UNROLL
    for (int c = 0; c < NC; ++c) {
      const Pack<T, 4> y = load_pack<4>(B + k * ldb + 32 * c + 4 * tx);
      LCR_UNROLL
      for (int i = 0; i < 4; ++i) LCR_UNROLL
      for (int j = 0; j < 4; ++j) acc[i][4 * c + j] += x.v[i] * y.v[j];
    }
  }
}

}  // namespace lcr::sdpa_detail
