#include "parallel/comm/process_grid.hpp"

#include "kernels/base/error.hpp"

namespace lcr {

ProcessGrid::ProcessGrid(std::unique_ptr<Communicator> world, int cp_size)
    : world_(std::move(world)), cp_size_(cp_size) {
  require(world_ != nullptr, "ProcessGrid needs a world communicator");
  const int w = world_->size();
  require(cp_size >= 1, "context-parallel size must be >= 1 (got ", cp_size, ")");
  require(w % cp_size == 0, "context-parallel size ", cp_size, " does not divide the ", w,
          " ranks of the job: launch a multiple of ", cp_size, " ranks or choose a cp size that ",
          "divides ", w, " (dp x cp must equal the world size)");
  dp_size_ = w / cp_size;
  const int r = world_->rank();
  const int dp_index = r / cp_size, cp_index = r % cp_size;
  cp_ = world_->split(/*color=*/dp_index, /*key=*/cp_index);
  dp_ = world_->split(/*color=*/cp_index, /*key=*/dp_index);
}

}  // namespace lcr
