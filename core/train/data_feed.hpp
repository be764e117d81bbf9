#pragma once
// Where a run's batches come from: byte text, token shards or a synthetic task, behind
// one interface. Training batches are a pure function of (seed, step, dp_rank, dp_size)
// (core/data/sampler.hpp, core/data/tasks/task.hpp), so a resumed run draws exactly
// what the uninterrupted one drew; the CP ranks of a replica call with the same dp_rank,
// get the same full sequences and each keeps its shard.
//
// Evaluation sets are fixed at setup (every rank builds the same ones, so bad settings
// fail before training): for text/shards the validation windows of perplexity_windows at
// each length; for a task, task_samples validation sequences generated at each length.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/train_config.hpp"
#include "core/data/batch.hpp"
#include "core/data/token_source.hpp"

namespace lcr::train {

struct EvalSet {
  int64_t length = 0;
  data::Batch batch;  // [rows, length] tokens and labels (-1 = not scored)
};

class DataFeed {
 public:
  // Opens the files / builds the task; Errors name the [data] / [task.<name>] key.
  explicit DataFeed(const TrainConfig& cfg);
  ~DataFeed();

  int32_t vocab_size() const;
  std::string describe() const;  // one line for the log and the run file
  bool is_task() const { return task_ != nullptr; }

  // The [batch, seq_len] training batch of DP rank dp_rank at `step`.
  data::Batch train_batch(int64_t step, int dp_rank, int dp_size) const;

  // One set per length (see the top of this file); Error naming eval.max_length_factor or
  // the task option when a length cannot be served.
  std::vector<EvalSet> eval_sets(const std::vector<int64_t>& lengths) const;

  // Byte text (data.source = "text"): the first max_bytes of the validation split as text,
  // the end-of-document token as '\n' (the long-context tasks' essay haystacks); null for
  // token shards and tasks.
  std::shared_ptr<const std::string> validation_text(int64_t max_bytes) const;

 private:
  TrainConfig cfg_;
  data::SourcePtr train_, validation_;       // text / shards
  std::unique_ptr<const tasks::Task> task_;  // a task
};

}  // namespace lcr::train
