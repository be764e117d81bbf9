#pragma once
// The trainer's side of the run directory (docs/run-file.md is the layout): the run file's
// tables for a config, its provenance, and checkpoints of the model and optimizer.
//
// A checkpoint holds: arrays `params`, `adam_m`, `adam_v` (the flat buffers, with the
// model's named slices as their layout), scalars `optimizer_steps` (AdamW's update count),
// `precision`, `loss` (of the step) and the resolved config. The data position needs no
// state: the sampler is a pure function of (seed, step).
#include <string>
#include <vector>

#include "core/config/train_config.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/run_file.hpp"
#include "core/model/model.hpp"
#include "core/model/optimizer.hpp"

namespace lcr::train {

// metrics (+ clip_scale, step_time_s), eval/perplexity, eval/passkey, the prior tables, and
// for tasks eval/task (length, loss, token_accuracy, sequence_accuracy).
io::RunLayout run_layout(const TrainConfig& cfg);

io::Provenance provenance(const TrainConfig& cfg, const std::string& config_toml,
                          const std::string& command_line, int world_size);

AdamWConfig adamw_config(const TrainConfig& cfg);

template <class T>
io::Checkpoint make_checkpoint(const Model<T>& model, const AdamW<T>& opt, int64_t step,
                               const TrainConfig& cfg, const std::string& config_toml, double loss);

// Loads params, moments and the update count; Error naming the mismatch when the
// checkpoint was written for another model ([model], [attention], train.precision).
template <class T>
void restore_checkpoint(const io::Checkpoint& c, const TrainConfig& cfg, Model<T>& model,
                        AdamW<T>* opt);

// Resume rules. A resume may change only resume_changeable_keys() (the table lives in
// run_io.cpp; docs/run-file.md repeats it); check_resume_config throws an Error listing
// every other changed key as "key: old -> new" and how to start a new run instead, and
// returns the allowed changes as "key: old -> new; ..." ("" when none) for the run file's
// /config/resume_log.
struct ConfigChange {
  std::string key, old_value, new_value;
};
const std::vector<std::string>& resume_changeable_keys();
std::vector<ConfigChange> config_changes(const std::string& old_toml, const std::string& new_toml);
std::string check_resume_config(const std::string& old_toml, const std::string& new_toml,
                                int64_t step, const std::string& run_dir);
// train.resume_from = "step-<N>" (or "step-<N>.h5") -> N; Error otherwise.
int64_t resume_from_step(const std::string& name);

// The config a checkpoint was written with (a checkpoint from before a convention's key
// reads as the rule it trained under where that differs from today's default).
TrainConfig checkpoint_config(const io::Checkpoint& c);

}  // namespace lcr::train
