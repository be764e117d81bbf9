#pragma once
// Sharding and unsharding along the sequence axis in a SeqLayout. A tensor is seen as
// [outer, L, inner] around its sequence axis: q [B, L, H, d] has seq_dim 1 (outer = B,
// inner = H d); lse [B, H, L] has seq_dim 2 (outer = B H, inner = 1); tokens, labels and
// position indices [B, L] have seq_dim 1. Works on views of any rank, any memory space
// (LayoutRight); the copy runs in the view's own execution space.
#include <vector>

#include "kernels/base/error.hpp"
#include "kernels/base/tensor.hpp"
#include "parallel/comm/communicator.hpp"
#include "parallel/ring/layout.hpp"

namespace lcr {

// Rows [src_r0, src_r0 + n) of src [outer, src_L, inner] -> rows [dst_r0, dst_r0 + n) of
// dst [outer, dst_L, inner]. Raw pointers so it serves any view rank and packed buffers.
template <class Exec, class T>
void copy_rows(const T* src, int64_t src_L, int64_t src_r0, T* dst, int64_t dst_L, int64_t dst_r0,
               int64_t outer, int64_t n, int64_t inner) {
  const int64_t total = outer * n * inner;
  if (total == 0) return;
  Kokkos::parallel_for(
      "lcr::copy_rows", Kokkos::RangePolicy<Exec, Kokkos::IndexType<int64_t>>(0, total),
      KOKKOS_LAMBDA(int64_t t) {
        const int64_t e = t % inner, r = (t / inner) % n, o = t / (inner * n);
        dst[(o * dst_L + dst_r0 + r) * inner + e] = src[(o * src_L + src_r0 + r) * inner + e];
      });
}

// Sizes of the axes before and after seq_dim.
template <class V>
void split_extents(const V& v, int seq_dim, int64_t& outer, int64_t& inner) {
  require(seq_dim >= 0 && unsigned(seq_dim) < V::rank, "sequence axis ", seq_dim,
          " out of range for a rank-", V::rank, " tensor");
  outer = 1;
  inner = 1;
  for (int d = 0; d < seq_dim; ++d) outer *= int64_t(v.extent(d));
  for (unsigned d = unsigned(seq_dim) + 1; d < V::rank; ++d) inner *= int64_t(v.extent(d));
}

// A new view of type Out shaped like v with the sequence axis resized to n.
template <class Out, class V>
Out resized_like(const V& v, int seq_dim, int64_t n, const std::string& label) {
  auto lay = v.layout();
  lay.dimension[seq_dim] = size_t(n);
  return Out(label, lay);
}

// This rank's shard of a full tensor (every rank holds the full tensor).
template <class V>
typename V::non_const_type shard_view(const V& full, const SeqLayout& layout, int rank,
                                      int seq_dim = 1) {
  using Out = typename V::non_const_type;
  using Exec = typename V::execution_space;
  require(int64_t(full.extent(seq_dim)) == layout.length(), "tensor to shard has ",
          full.extent(seq_dim), " positions on axis ", seq_dim, " but the layout is ",
          layout.describe());
  int64_t outer, inner;
  split_extents(full, seq_dim, outer, inner);
  Out local = resized_like<Out>(full, seq_dim, layout.local_length(rank), "lcr::shard");
  for (int c : layout.chunks_of(rank)) {
    const Chunk& ch = layout.chunk(c);
    copy_rows<Exec>(full.data(), layout.length(), ch.start, local.data(), layout.local_length(rank),
                    ch.local_offset, outer, ch.length, inner);
  }
  return local;
}

// Writes a rank's local rows into their global places in full (no communication).
template <class VL, class VF>
void place_shard(const VL& local, const SeqLayout& layout, int rank, const VF& full,
                 int seq_dim = 1) {
  using Exec = typename VF::execution_space;
  require(int64_t(local.extent(seq_dim)) == layout.local_length(rank), "shard of rank ", rank,
          " has ", local.extent(seq_dim), " positions, the layout gives it ",
          layout.local_length(rank));
  int64_t outer, inner;
  split_extents(local, seq_dim, outer, inner);
  for (int c : layout.chunks_of(rank)) {
    const Chunk& ch = layout.chunk(c);
    copy_rows<Exec>(local.data(), layout.local_length(rank), ch.local_offset, full.data(),
                    layout.length(), ch.start, outer, ch.length, inner);
  }
}

// Unshards: every rank of comm gets the full tensor [.., L, ..] assembled from all
// ranks' shards. Shards are padded to the longest local length so one allgather (equal
// counts) carries them; staged through host memory (the MPI backend moves host buffers).
template <class V>
typename V::non_const_type gather_view(Communicator& comm, const V& local, const SeqLayout& layout,
                                       int seq_dim = 1) {
  using Out = typename V::non_const_type;
  using T = typename Out::value_type;
  const int N = comm.size(), me = comm.rank();
  require(layout.ranks() == N, "layout is for ", layout.ranks(), " ranks, communicator has ", N);
  int64_t outer, inner;
  split_extents(local, seq_dim, outer, inner);
  const int64_t Lmax = layout.max_local_length(), Lme = layout.local_length(me);
  require(int64_t(local.extent(seq_dim)) == Lme, "shard of rank ", me, " has ",
          local.extent(seq_dim), " positions, the layout gives it ", Lme);
  auto h_local = Kokkos::create_mirror_view_and_copy(HostSpace(), local);
  using HExec = Kokkos::DefaultHostExecutionSpace;
  const int64_t block = outer * Lmax * inner;
  std::vector<T> send(size_t(block), T(0)), recv(size_t(block) * size_t(N));
  copy_rows<HExec>(h_local.data(), Lme, 0, send.data(), Lmax, 0, outer, Lme, inner);
  comm.allgather(send.data(), recv.data(), size_t(block));
  Out full = resized_like<Out>(local, seq_dim, layout.length(), "lcr::gathered");
  auto h_full = Kokkos::create_mirror_view(full);
  for (int r = 0; r < N; ++r)
    for (int c : layout.chunks_of(r)) {
      const Chunk& ch = layout.chunk(c);
      copy_rows<HExec>(recv.data() + size_t(r) * size_t(block), Lmax, ch.local_offset,
                       h_full.data(), layout.length(), ch.start, outer, ch.length, inner);
    }
  Kokkos::deep_copy(full, h_full);
  return full;
}

// Position indices of a rank's rows for a batch: [B, L_local] int64, row b = positions.
inline View2<int64_t, HostSpace> shard_positions(const SeqLayout& layout, int rank, int batch) {
  const auto p = layout.positions(rank);
  View2<int64_t, HostSpace> out("lcr::positions", batch, p.size());
  for (int b = 0; b < batch; ++b)
    for (size_t i = 0; i < p.size(); ++i) out(b, i) = p[i];
  return out;
}

}  // namespace lcr
