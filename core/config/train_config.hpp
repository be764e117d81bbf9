#pragma once
// The configuration of a training run (`lcr train`, `lcr eval`): the sections [model],
// [attention], [train], [data], [task.<name>], [eval], [parallel], [run], each bound field by field
// to the structs below with config::Table (core/config/table.hpp), so a TOML file, the
// `section.key=value` overrides and the resolved runs/<name>/config.toml all use the same
// names. docs/training.md lists every key.
//
//   TrainConfig cfg = config::load_train_config("experiments/configs/default.toml",
//                                                {"train.steps=50"});   // parse + check
//   std::string resolved = config::train_config_toml(cfg);          // every default
//
// Checks happen in two stages, both before any training step:
//   check_train_config   the config on its own: types and unknown keys (while reading),
//                        ranges, choices, the model/attention shape (impossible head split,
//                        GOAT d_c <= 0, ...), eval settings.
//   the trainer's setup  what needs the outside world: the data files, the data's
//                        vocabulary, the world size vs [parallel].
// Every error names the key ("train.seq_len", "attention.head_dim") and the valid choices.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/table.hpp"
#include "core/data/tasks/task.hpp"
#include "core/model/config.hpp"
#include "parallel/ring/layout.hpp"

namespace lcr {

enum class Precision { Float32, Float64 };
const char* precision_name(Precision p);

struct TrainOptions {
  int64_t steps = 200;    // optimizer updates in all (a resumed run continues to this)
  int64_t batch = 8;      // sequences per DP rank per step (CP ranks share them)
  int64_t seq_len = 128;  // L, tokens per training sequence
  double lr = 1e-3;       // peak learning rate
  double min_lr = 1e-4;   // cosine floor
  int64_t warmup = 20;    // linear warmup steps
  double weight_decay = 0.1;
  double clip = 1.0;  // global gradient-norm clip (0 = off)
  double beta1 = 0.9, beta2 = 0.95;
  bool decay_embeddings = false;
  int64_t seed = 1234;  // data sampler and parameter init
  Precision precision = Precision::Float32;
  int64_t log_every = 10;  // metrics + prior statistics every this many steps
  // With each metrics row, rank 0 logs the mean time of a step's phases (data, forward,
  // backward, the all-reduces, the optimizer); each phase then ends with a Kokkos fence.
  bool log_phases = false;
  int64_t ckpt_every = 100;  // checkpoint every this many steps (0 = only at the end)
  int keep_ckpts = 3;        // newest checkpoints kept (0 = all)
  std::string sampling = "shuffled_chunks";  // text/shards: shuffled_chunks | random_offsets
  int probe_rows = 32;                       // query rows per head for attention statistics
  int64_t probe_len = 0;  // tokens of the statistics probe sequence (0 = train.seq_len)
  // Prior statistics every this many steps (a multiple of log_every; also at the last and a
  // stopping step); 0 = at every metrics row. The probe runs on the CPU copy of the model,
  // seconds per probe for a 125M model, so GPU runs space it out.
  int64_t probe_every = 0;
  // Where the model trains: "cpu" (Kokkos, every scheme, context parallelism) or "cuda"
  // (core/model/cuda: one GPU per rank, data parallelism; needs -DLCR_ENABLE_CUDA=ON).
  std::string device = "cpu";
  bool gemm_tf32 = true;   // cuda: projections on TF32 tensor cores (false = exact fp32)
  bool gemm_bf16 = false;  // cuda: projections on bf16 tensor cores (overrides gemm_tf32)
  // cuda: which SDPA kernels the attention asks for (Workspace::set_sdpa_impl): "auto"
  // (cuDNN wherever it serves the call, lcr's kernels elsewhere), "cudnn" (cuDNN for every
  // call, an error where it cannot) or "lcr".
  std::string cuda_attention = "auto";
  double peak_tflops = 989;  // cuda: the GPU's dense bf16 peak, for the logged MFU (H200)
  // cuda, PaTH: attention in chunks of this many positions on one GPU (cuda::path::Chunked);
  // 0 = automatic, -1 = always the whole-sequence kernels.
  int path_chunk = 0;
  int64_t stop_after = 0;  // checkpoint and exit 0 after this many steps of this job (0 = off)
  int64_t inject_nan_step = -1;  // testing: poison a weight before this step (-1 = off)
  // Resume from this checkpoint ("step-<N>") instead of the newest; newer ones are moved
  // to ckpt/abandoned/. "" = the newest complete one. Not kept in config.toml.
  std::string resume_from;
};

struct DataOptions {
  // "text" (byte-level; no paths = the built-in corpus), "shards" (token shards at paths),
  // or a task name (copy_mixture, passkey, indirect_indexing, flip_flop, mqar, a5, or a
  // long-context task: niah_single, ..., phonebook).
  std::string source = "text";
  std::string paths;                 // comma-separated files or directories (text, shards)
  bool end_of_document = false;      // text: token 256 after each file (vocabulary 257)
  double validation_fraction = 0.1;  // text/shards: the tail held out for evaluation
  tasks::TaskOptions task;           // the task's options: [task.<name>] (seq_len = train's)
};

struct EvalOptions {
  int64_t every = 0;              // evaluate every this many steps (0 = only at the end)
  bool at_end = true;             // evaluate after the last step
  int64_t max_length_factor = 4;  // lengths L, 2L, 4L, ... up to this multiple (<= 64)
  int64_t windows = 4;            // text: validation windows per length
  int64_t task_samples = 64;      // tasks: validation sequences per length
  int64_t batch = 4;              // sequences per evaluation forward pass
  bool passkey = false;           // passkey grid (byte-level models: vocabulary >= 256)
  int passkey_depths = 5;         // depths evenly spaced over [0, 1]
  int64_t passkey_samples = 4;    // samples per (length, depth) cell
  int passkey_digits = 8;         // digits of the key
  // Long-context tasks (core/config/longctx_config.hpp, docs/training.md): "" = off, "all",
  // or comma-separated task names (niah_single, ..., phonebook).
  std::string longctx;
  std::string longctx_form = "auto";  // "auto" (the model's), "byte" or "token"
  int longctx_depths = 11;            // needle depths evenly spaced over [0, 1]
  int64_t longctx_samples = 8;        // samples per (task, length, depth) cell
  double longctx_threshold = 0.5;     // effective length: category-average score >= this
  // A text-form set (experiments/data/prepare_longctx.py): its cells are evaluated instead
  // of eval.longctx's generated ones; "" = none.
  std::string longctx_set;
};

struct ParallelOptions {
  int dp = 0;  // data-parallel replicas; 0 = world size / cp
  int cp = 1;  // context-parallel ranks per replica (the ring)
  LayoutKind layout = LayoutKind::Zigzag;
};

struct RunOptions {
  std::string name = "default";
  std::string dir;         // "" = runs/<name>
  bool overwrite = false;  // start afresh even if the directory holds a run
};

struct TrainConfig {
  ModelConfig model;  // model.vocab_size 0 = from the data; attention = [attention]
  TrainOptions train;
  DataOptions data;
  EvalOptions eval;
  ParallelOptions parallel;
  RunOptions run;

  TrainConfig() { model.vocab_size = 0; }  // the data's vocabulary unless set
  std::string run_dir() const { return run.dir.empty() ? "runs/" + run.name : run.dir; }
  bool is_task() const { return data.source != "text" && data.source != "shards"; }
};

namespace config {

// Adds every section to `root`, bound to `cfg` (its current values are the defaults).
void bind_train_config(Table& root, TrainConfig& cfg);

// Defaults <- the file (none when path is empty) <- the overrides; then
// check_train_config. Errors name the key, its source line and the valid keys/values.
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides);

// The checks that need nothing but the config (see the top of this file).
void check_train_config(const TrainConfig& cfg);

// The whole config as TOML, every default filled in.
std::string train_config_toml(const TrainConfig& cfg);

// The evaluation lengths: L * {1, 2, 4, ..., 64} up to eval.max_length_factor.
std::vector<int64_t> eval_lengths(const TrainConfig& cfg);

// Comma-separated data.paths split into paths (blanks trimmed, empty entries dropped).
std::vector<std::string> split_paths(const std::string& paths);

}  // namespace config
}  // namespace lcr
