#pragma once
// `lcr train`: one training run, collective over the MPI world (DESIGN.md section 2).
//
// Per step s (0-based; "step N" in files = N updates completed):
//   batch(seed, s, dp_rank)  -> this CP rank's shard of every sequence (parallel.layout)
//   forward/backward         -> LocalAttention, or RingAttention over the CP group
//   all-reduce               -> the loss and the stop flag (one small vector), then the
//                               whole gradient buffer, summed over all DP x CP ranks
//   AdamW                    -> identical on every rank (same summed gradient)
//   every train.log_every    -> the writing rank (world rank 0) appends metrics and the
//                               per-layer prior statistics to run.h5 and prints a progress
//                               line; eval.every -> evaluation; train.ckpt_every -> a
//                               checkpoint (rank 0 writes it; its content is the same on
//                               every rank). Order at a step: log, evaluate, checkpoint.
// Stops:
//   non-finite loss          -> Error naming the step and the first non-finite stage
//                               (Model::locate_nonfinite); no checkpoint is written, the
//                               last one stays the newest.
//   SIGTERM / SIGUSR1        -> at the end of the step in which any rank saw it, all ranks
//                               log, checkpoint and return with stopped = true (exit 0).
// Resume: a complete checkpoint in <run>/ckpt continues the run from it (same losses as an
// uninterrupted run), and run.h5 drops its rows beyond the checkpoint's step.
#include <cstdint>
#include <string>

#include "core/config/train_config.hpp"

namespace lcr::train {

struct TrainOutcome {
  int64_t step = 0;      // updates completed when the command returned
  bool stopped = false;  // by a signal or train.stop_after, with a checkpoint at `step`
  int signal = 0;        // the signal number (0: none)
  double loss = 0;       // training loss of the last step run (NaN if none ran)
  std::string run_dir;
};

TrainOutcome train(const TrainConfig& cfg, const std::string& command_line);

}  // namespace lcr::train
