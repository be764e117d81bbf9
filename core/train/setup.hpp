#pragma once
// What `lcr train` and `lcr eval` do before the first step, on every rank: the process
// grid from the world and [parallel], the data from [data], the model vocabulary resolved
// from the data, the sequence layout checked against train.seq_len. Any error here ends
// the command before training with a message naming the key; errors that only one rank
// can see (a file the writing rank cannot create) are agreed on by all ranks (agree()),
// so no rank is left waiting in a collective.
#include <functional>
#include <memory>
#include <string>

#include "core/config/train_config.hpp"
#include "core/train/data_feed.hpp"
#include "parallel/comm/process_grid.hpp"

namespace lcr::train {

struct Setup {
  TrainConfig cfg;          // resolved: model.vocab_size and parallel.dp filled in
  std::string config_toml;  // train_config_toml(cfg)
  std::unique_ptr<ProcessGrid> grid;
  std::unique_ptr<DataFeed> feed;
  bool writer() const { return !grid || grid->world().rank() == 0; }
};

// Builds the grid and the data feed and resolves the config; throws an Error (on every
// rank) naming the key at fault. With job_ranks > 0 it checks for a job of that many ranks
// instead of this one and builds no grid: `lcr train --check --ranks N`, which lcr-submit
// runs before sbatch.
Setup prepare(const TrainConfig& cfg, int job_ranks = 0);

// Runs fn on this rank, then all ranks learn whether any failed: every rank throws (the
// failing rank its own message, the others one saying which step failed elsewhere).
void agree(Communicator& world, const std::string& what, const std::function<void()>& fn);

// Provenance strings.
std::string lcr_version();
std::string git_revision();
std::string mpi_library_version();
std::string device_description();
// Non-empty when this rank runs more Kokkos threads than CPUs it may run on (mpirun binds
// each of 1-2 ranks to one core by default): says so and how to give each rank its cores.
std::string thread_binding_warning();
int64_t peak_memory_bytes();  // peak resident memory of this process

}  // namespace lcr::train
