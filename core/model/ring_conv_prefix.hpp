#pragma once
// The rows PaTH's width-3 causal convolution reads across chunk boundaries under context
// parallelism (RingAttention::rows_before_segments, runner.hpp): for each chunk a rank
// holds, u at the two GLOBAL positions before the chunk's first one. Header-only like
// ring_runner.hpp (lcr_model has no MPI; its includer links lcr_parallel).
//
// Position start - 1 is the last row of the previous chunk; start - 2 is its second-to-last
// row, or the last row of the chunk before it when the previous chunk has one row. Either
// way it is among the LAST TWO rows of the chunk holding it. So every rank packs each of
// its chunks' last two rows [B, 2, Hkv d] (positions end - 2, end - 1; zero where a one-row
// chunk has no end - 2), one allgather brings every chunk's pair to every rank, and each
// rank picks the rows before its own chunks. Zigzag or contiguous, any chunk sizes.
// The backward is the same exchange reversed: every rank allgathers its chunks' prefix
// gradients, and each rank adds, in chunk order (deterministic), those that refer to rows
// it holds. Volume: 2 B Hkv d values per chunk, next to the ring's O(L_local B Hkv d).
#include <algorithm>
#include <vector>

#include "kernels/base/error.hpp"
#include "parallel/comm/communicator.hpp"
#include "parallel/ring/layout.hpp"
#include "parallel/ring/shard.hpp"

namespace lcr {
namespace ring_conv_detail {

// The chunk holding global position p (0 <= p < L).
inline int chunk_at(const SeqLayout& layout, int64_t p) {
  for (const Chunk& c : layout.chunks())
    if (p >= c.start && p < c.end()) return c.index;
  throw_error("position ", p, " lies outside ", layout.describe());
}

// Offset of chunk c's pair [B, 2, inner] in the gathered buffer (rank-major, then the
// rank's chunks in order).
inline size_t pair_offset(const SeqLayout& layout, int c, size_t pair) {
  const Chunk& ch = layout.chunk(c);
  const auto& owned = layout.chunks_of(ch.owner);
  size_t i = 0;
  while (owned[i] != c) ++i;
  return (size_t(ch.owner) * size_t(layout.chunks_per_rank()) + i) * pair;
}

// x[b, r0 + r, e] += add[b, r0_add + r, e] for r < n; x [B, L, inner], add [B, 2, inner].
template <class T>
void add_rows(const View1<T>& add, int64_t r0_add, T* x, int64_t L, int64_t r0, int64_t B,
              int64_t n, int64_t inner) {
  Kokkos::parallel_for(
      "lcr::ring_conv_add_rows",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(0, B * n * inner),
      KOKKOS_LAMBDA(int64_t t) {
        const int64_t e = t % inner, r = (t / inner) % n, b = t / (inner * n);
        x[(b * L + r0 + r) * inner + e] += add((b * 2 + r0_add + r) * inner + e);
      });
}

}  // namespace ring_conv_detail

// u [B, L_local, Hkv, d] (this rank's rows in layout order) -> one [B, 2, Hkv, d] per local
// chunk, in local order: u at positions start - 2, start - 1 (zeros before position 0).
template <class T>
std::vector<View4<T>> ring_rows_before_chunks(Communicator& comm, const SeqLayout& layout,
                                              const View4<const T>& u) {
  using namespace ring_conv_detail;
  const int me = comm.rank(), per = layout.chunks_per_rank();
  const int64_t B = u.extent(0), L = u.extent(1), inner = int64_t(u.extent(2) * u.extent(3));
  const size_t pair = size_t(B * 2 * inner);
  const auto& owned = layout.chunks_of(me);
  View1<T> dev("lcr::ring_conv_pairs", pair * size_t(per));  // zeros
  for (size_t i = 0; i < owned.size(); ++i) {
    const Chunk& ch = layout.chunk(owned[i]);
    const int64_t n = ch.length < 2 ? ch.length : 2;
    copy_rows<ExecSpace>(u.data(), L, ch.local_offset + ch.length - n, dev.data() + i * pair, 2,
                         2 - n, B, n, inner);
  }
  auto mine = Kokkos::create_mirror_view_and_copy(HostSpace(), dev);
  std::vector<T> all(pair * size_t(per) * size_t(comm.size()));
  comm.allgather(mine.data(), all.data(), pair * size_t(per));

  std::vector<View4<T>> out;
  for (int c : owned) {
    const Chunk& ch = layout.chunk(c);
    View4<T> rows("lcr::path_conv_prefix", B, 2, u.extent(2), u.extent(3));
    auto h = Kokkos::create_mirror_view(rows);  // zeros
    for (int k = 0; k < 2; ++k) {
      const int64_t p = ch.start - 2 + k;
      if (p < 0) continue;
      const int src = chunk_at(layout, p);
      const int64_t t = p - (layout.chunk(src).end() - 2);  // 0 or 1 (see the header)
      const T* from = all.data() + pair_offset(layout, src, pair);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t e = 0; e < inner; ++e)
          h.data()[(b * 2 + k) * inner + e] = from[(b * 2 + t) * inner + e];
    }
    Kokkos::deep_copy(rows, h);
    out.push_back(rows);
  }
  return out;
}

// drows: one [B, 2, Hkv, d] per local chunk (dL/d the rows ring_rows_before_chunks gave)
// -> ADDED into du [B, L_local, Hkv, d] on the ranks holding those rows.
template <class T>
void ring_rows_before_chunks_backward(Communicator& comm, const SeqLayout& layout,
                                      const std::vector<View4<T>>& drows, const View4<T>& du) {
  using namespace ring_conv_detail;
  const int me = comm.rank(), per = layout.chunks_per_rank();
  const int64_t B = du.extent(0), L = du.extent(1), inner = int64_t(du.extent(2) * du.extent(3));
  const size_t pair = size_t(B * 2 * inner);
  const auto& owned = layout.chunks_of(me);
  require(drows.size() == owned.size(), "PaTH conv prefix backward: ", drows.size(),
          " gradients for ", owned.size(), " local chunks");
  std::vector<T> mine(pair * size_t(per), T(0)), all(pair * size_t(per) * size_t(comm.size()));
  for (size_t i = 0; i < owned.size(); ++i) {
    if (drows[i].extent(0) == 0) continue;
    auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), drows[i]);
    std::copy(h.data(), h.data() + pair, mine.begin() + ptrdiff_t(i * pair));
  }
  comm.allgather(mine.data(), all.data(), mine.size());

  for (int dst : owned) {
    const Chunk& ch = layout.chunk(dst);
    View1<T> acc("lcr::ring_conv_dpairs", pair);
    auto h = Kokkos::create_mirror_view(acc);      // zeros
    for (int c = 0; c < layout.num_chunks(); ++c)  // chunk order: deterministic sums
      for (int k = 0; k < 2; ++k) {
        const int64_t p = layout.chunk(c).start - 2 + k;
        if (p < 0 || chunk_at(layout, p) != dst) continue;
        const int64_t t = p - (ch.end() - 2);
        const T* from = all.data() + pair_offset(layout, c, pair);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t e = 0; e < inner; ++e)
            h.data()[(b * 2 + t) * inner + e] += from[(b * 2 + k) * inner + e];
      }
    Kokkos::deep_copy(acc, h);
    const int64_t n = ch.length < 2 ? ch.length : 2;
    add_rows<T>(acc, 2 - n, du.data(), L, ch.local_offset + ch.length - n, B, n, inner);
  }
}

}  // namespace lcr
