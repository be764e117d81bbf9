#pragma once
// The data-parallel x context-parallel process grid (DESIGN.md section 2). The world's
// W ranks form dp x cp = W ranks; the cp ranks of one data-parallel replica are
// CONSECUTIVE world ranks (world rank w = dp_rank * cp + cp_rank), so on a cluster a
// replica's sequence shards sit on one node (or neighbouring nodes) where the ring's
// per-step traffic is cheapest, and the gradient all-reduce crosses nodes once per step.
//
//   cp()  communicator of this replica's context-parallel ranks (the ring runs here)
//   dp()  communicator of the ranks holding the same sequence shard in every replica
//         (gradient all-reduce over data parallelism)
#include <memory>

#include "parallel/comm/communicator.hpp"

namespace lcr {

class ProcessGrid {
 public:
  // Throws an Error (on every rank, so none hangs) when cp < 1 or cp does not divide
  // the world size.
  ProcessGrid(std::unique_ptr<Communicator> world, int cp_size);

  Communicator& world() const { return *world_; }
  Communicator& cp() const { return *cp_; }
  Communicator& dp() const { return *dp_; }
  int cp_size() const { return cp_size_; }
  int dp_size() const { return dp_size_; }
  int cp_rank() const { return cp_->rank(); }
  int dp_rank() const { return dp_->rank(); }

 private:
  std::unique_ptr<Communicator> world_, cp_, dp_;
  int cp_size_ = 1, dp_size_ = 1;
};

}  // namespace lcr
