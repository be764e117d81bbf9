#pragma once
// How a sequence of L positions is split over the N ranks of a context-parallel group
// (DESIGN.md section 5). The sequence is cut into C chunks of consecutive positions, in
// global order; each rank holds some chunks and stores their rows concatenated in chunk
// order (its "local" tensor, [B, L_local, ...]).
//
//   contiguous: C = N, rank r holds chunk r.          Needs L >= N.
//   zigzag:     C = 2N, rank r holds chunks r and 2N-1-r, so the causal work (which grows
//               with the chunk index) is even across ranks.     Needs L >= 2N.
//
// Lengths that do not divide: the first L % C chunks (in global order) get one extra
// position. For both layouts the ranks' local lengths then differ by at most one.
//
// split > 1 cuts each of those chunks into `split` consecutive pieces (the same remainder
// rule within the chunk) held by the same rank: local tensors and positions stay exactly
// those of split = 1, only the chunk list is finer. The PaTH ring uses it to turn more of
// the work into plain dot products (parallel/ring/cuda/path_ring_cuda.hpp); with one rank
// that is the chunked single-GPU PaTH.
#include <cstdint>
#include <string>
#include <vector>

namespace lcr {

enum class LayoutKind { Contiguous, Zigzag };

const char* layout_name(LayoutKind k);
// "contiguous" or "zigzag"; anything else is an Error listing both.
LayoutKind parse_layout(const std::string& name);

struct Chunk {
  int index = 0;             // global chunk index (chunks are in position order)
  int64_t start = 0;         // global position of the chunk's first row
  int64_t length = 0;        // rows (> 0)
  int owner = 0;             // rank holding the chunk
  int64_t local_offset = 0;  // row of the chunk's first position in the owner's local tensor
  int64_t end() const { return start + length; }  // one past the last position
};

class SeqLayout {
 public:
  // Throws an Error naming the layout, L and N when the layout cannot take the length.
  SeqLayout(LayoutKind kind, int64_t length, int ranks, int split = 1);

  LayoutKind kind() const { return kind_; }
  int64_t length() const { return length_; }
  int ranks() const { return ranks_; }
  int num_chunks() const { return int(chunks_.size()); }
  const Chunk& chunk(int c) const { return chunks_.at(size_t(c)); }
  const std::vector<Chunk>& chunks() const { return chunks_; }

  // Global chunk indices held by a rank, increasing (= their order in the local tensor).
  const std::vector<int>& chunks_of(int rank) const { return owned_.at(size_t(rank)); }
  int chunks_per_rank() const { return (kind_ == LayoutKind::Zigzag ? 2 : 1) * split_; }
  int split() const { return split_; }
  int64_t local_length(int rank) const;
  int64_t max_local_length() const;
  // Global position of every local row of a rank (the position-index shard).
  std::vector<int64_t> positions(int rank) const;

  std::string describe() const;  // "zigzag L=61 N=3 chunks [0,11) [11,21) ..."

 private:
  LayoutKind kind_;
  int64_t length_;
  int ranks_;
  int split_ = 1;
  std::vector<Chunk> chunks_;
  std::vector<std::vector<int>> owned_;
};

}  // namespace lcr
