#include "core/config/train_config.hpp"

#include <algorithm>
#include <cmath>

#include "core/config/attention_config.hpp"
#include "core/config/longctx_config.hpp"
#include "core/data/sampler.hpp"

namespace lcr {

const char* precision_name(Precision p) { return p == Precision::Float64 ? "float64" : "float32"; }

namespace config {
namespace {

void bind_model(Table& root, ModelConfig& m) {
  Table& t = root.table("model", "the transformer (its attention layer is [attention])");
  t.field("vocab_size", m.vocab_size, "V; 0 = the data's vocabulary (bytes: 256, a task: its own)");
  t.field("d_model", m.d_model, "D, residual width");
  t.field("n_layers", m.n_layers, "number of blocks");
  t.field("ffn_hidden", m.ffn_hidden, "SwiGLU width F; 0 = the multiple of 8 nearest 8 D / 3");
  t.field("norm_eps", m.norm_eps, "RMSNorm epsilon");
  t.field("tie_embeddings", m.tie_embeddings, "LM head = embedding^T");
  t.field("init_std", m.init_std, "std of the normal init of weight matrices");
  t.field("fox_bias_init", m.fox_bias_init, "FoX: initial forget-gate bias");
  t.field("path_w_silu", m.path_w_silu, "PaTH: SiLU after the w convolution");
}

void bind_train(Table& root, TrainOptions& o) {
  Table& t = root.table("train", "optimisation and logging");
  t.field("steps", o.steps, "optimizer updates in all (a resumed run continues to this)");
  t.field("batch", o.batch, "sequences per data-parallel rank per step");
  t.field("seq_len", o.seq_len, "L, tokens per training sequence");
  t.field("lr", o.lr, "peak learning rate");
  t.field("min_lr", o.min_lr, "cosine floor of the learning rate");
  t.field("warmup", o.warmup, "linear warmup steps");
  t.field("weight_decay", o.weight_decay, "AdamW decoupled decay (weight matrices only)");
  t.field("clip", o.clip, "max global gradient L2 norm; 0 = no clipping");
  t.field("beta1", o.beta1, "AdamW beta1");
  t.field("beta2", o.beta2, "AdamW beta2");
  t.field("decay_embeddings", o.decay_embeddings, "apply weight decay to the embeddings");
  t.field("seed", o.seed, "data sampling and parameter initialisation");
  t.choice("precision", o.precision,
           {{"float32", Precision::Float32}, {"float64", Precision::Float64}},
           "parameter and activation type");
  t.field("log_every", o.log_every, "metrics and prior statistics every this many steps");
  t.field("log_phases", o.log_phases,
          "log the mean time of a step's phases with each metrics row (fences each phase)");
  t.field("ckpt_every", o.ckpt_every, "checkpoint every this many steps; 0 = at the end only");
  t.field("keep_ckpts", o.keep_ckpts, "newest checkpoints kept; 0 = all");
  t.choice("sampling", o.sampling,
           {{"shuffled_chunks", std::string("shuffled_chunks")},
            {"random_offsets", std::string("random_offsets")}},
           "text/shards: how training windows are drawn");
  t.field("probe_rows", o.probe_rows, "query rows per head for the attention statistics");
  t.field("probe_len", o.probe_len,
          "tokens of the statistics probe (the first sequence of the step's batch, run on the "
          "CPU); 0 = train.seq_len");
  t.field("probe_every", o.probe_every,
          "prior statistics every this many steps (a multiple of log_every; also at the last "
          "step); 0 = with every metrics row");
  t.choice("device", o.device, {{"cpu", std::string("cpu")}, {"cuda", std::string("cuda")}},
           "where the model trains: cpu (the Kokkos model: every scheme, context parallelism; "
           "it runs on the GPU when lcr's Kokkos has CUDA as its default execution space) or "
           "cuda (the native CUDA model: one GPU per rank, data parallelism; a build with "
           "-DLCR_ENABLE_CUDA=ON)");
  t.field("gemm_tf32", o.gemm_tf32,
          "cuda: run the projections on TF32 tensor cores (false = exact fp32, ~8x slower)");
  t.choice(
      "cuda_attention", o.cuda_attention,
      {{"lcr", std::string("lcr")}, {"cudnn", std::string("cudnn")}, {"auto", std::string("auto")}},
      "cuda: attention kernels. auto: cuDNN 9's fused attention (loaded at run time) where "
      "it serves the call (NoPE, RoPE, GOAT, PoPE; GOAT's and PoPE's parameter gradients "
      "then take delta from the bf16 output), lcr's kernels elsewhere (ALiBi, FoX, "
      "softcap, sink); cudnn: cuDNN for every call, an error where it cannot; lcr: lcr's "
      "own kernels only (fp32 output for the parameter gradients)");
  t.field("gemm_bf16", o.gemm_bf16,
          "cuda: run the projections on bf16 tensor cores (operands rounded to bf16, fp32 "
          "accumulation and outputs; about twice TF32's rate); overrides gemm_tf32");
  t.field("peak_tflops", o.peak_tflops,
          "cuda: the GPU's dense bf16 peak TFLOP/s, the denominator of the logged MFU "
          "(H200/H100 SXM: 989)");
  t.field("path_chunk", o.path_chunk,
          "cuda, PaTH: attention in chunks of this many positions on one GPU, the pairs of "
          "chunks on the SDPA kernels (0 = automatic, -1 = whole-sequence kernels)");
  t.field("stop_after", o.stop_after,
          "checkpoint and exit 0 after this many steps of this job (0 = run to train.steps): "
          "splits a run over jobs of fixed length");
  t.field("inject_nan_step", o.inject_nan_step,
          "testing: make the last layer's output projection NaN before this step; -1 = off");
  t.field("resume_from", o.resume_from,
          "resume from this checkpoint, \"step-<N>\" in the run's ckpt/, instead of the newest; "
          "newer checkpoints move to ckpt/abandoned/ (\"\" = the newest)");
}

void bind_data(Table& root, DataOptions& o) {
  Table& t = root.table("data", "training and validation data");
  std::vector<std::pair<std::string, std::string>> sources = {{"text", "text"},
                                                              {"shards", "shards"}};
  for (const auto& n : tasks::task_names()) sources.emplace_back(n, n);
  t.choice("source", o.source, sources, "byte text, token shards, or a synthetic task");
  t.field("paths", o.paths,
          "text/shards: comma-separated files or directories; text without paths = the "
          "built-in corpus");
  t.field("end_of_document", o.end_of_document, "text: token 256 after each file");
  t.field("validation_fraction", o.validation_fraction,
          "text/shards: tail of the data held out for evaluation");
}

// [task.<name>]: named like the task generators' own error messages ("task.flip_flop.p_ignore").
void bind_tasks(Table& root, tasks::TaskOptions& o) {
  Table& t = root.table("task", "synthetic task options (used when data.source names the task)");
  Table& c = t.table("copy_mixture");
  c.field("vocab", o.copy_mixture.vocab, "symbols");
  c.field("p_first", o.copy_mixture.p_first, "P(token = the first token)");
  c.field("p_relative", o.copy_mixture.p_relative, "P(token = the token relative_offset back)");
  c.field("relative_offset", o.copy_mixture.relative_offset, "copy distance");
  Table& p = t.table("passkey");
  p.field("key_digits", o.passkey.key_digits, "digits of the key");
  p.field("random_depth", o.passkey.random_depth, "needle depth uniform in [0, 1]");
  p.field("depth", o.passkey.depth, "fixed needle depth when random_depth is false");
  Table& ii = t.table("indirect_indexing");
  ii.field("alphabet", o.indirect_indexing.alphabet, "symbols");
  ii.field("string_length", o.indirect_indexing.string_length, "distinct symbols per string");
  ii.field("max_offset", o.indirect_indexing.max_offset, "offsets in [-M, M] without 0");
  ii.field("queries", o.indirect_indexing.queries,
           "scored (source, offset, answer) triples per string; more supervision per sequence");
  t.table("flip_flop").field("p_ignore", o.flip_flop.p_ignore, "P(instruction = ignore)");
  Table& m = t.table("mqar");
  m.field("num_keys", o.mqar.num_keys, "key token ids");
  m.field("num_values", o.mqar.num_values, "value token ids");
  m.field("num_vars", o.mqar.num_vars, "variables per sequence");
  m.field("assignments", o.mqar.assignments, "assignments per variable");
  m.field("recall_n", o.mqar.recall_n, "N: recall the N-th most recent value");
  t.table("a5").field("final_only", o.a5.final_only, "score the last position only");
  bind_longctx_tasks(t, o);  // niah_single, ..., phonebook (longctx_config.hpp)
}

void bind_eval(Table& root, EvalOptions& o) {
  Table& t = root.table("eval", "perplexity vs length, the passkey grid, long-context tasks");
  t.field("every", o.every, "evaluate every this many steps; 0 = only at the end");
  t.field("at_end", o.at_end, "evaluate after the last step");
  t.field("max_length_factor", o.max_length_factor,
          "evaluate at L, 2L, 4L, ... up to this multiple of train.seq_len (1, 2, 4, ..., 64)");
  t.field("windows", o.windows, "text/shards: validation windows per length");
  t.field("task_samples", o.task_samples, "tasks: validation sequences per length");
  t.field("batch", o.batch, "sequences per evaluation forward pass");
  t.field("passkey", o.passkey, "run the passkey grid (byte-level models only)");
  t.field("passkey_depths", o.passkey_depths, "needle depths, evenly spaced over [0, 1]");
  t.field("passkey_samples", o.passkey_samples, "samples per (length, depth) cell");
  t.field("passkey_digits", o.passkey_digits, "digits of the key");
  bind_longctx_eval(t, o);
}

void bind_parallel(Table& root, ParallelOptions& o) {
  Table& t = root.table("parallel", "process grid: data parallel x context parallel");
  t.field("dp", o.dp, "data-parallel replicas; 0 = world size / cp");
  t.field("cp", o.cp, "context-parallel ranks per replica (ring attention)");
  t.choice("layout", o.layout,
           {{"zigzag", LayoutKind::Zigzag}, {"contiguous", LayoutKind::Contiguous}},
           "how a sequence is split over the CP ranks");
}

void bind_run(Table& root, RunOptions& o) {
  Table& t = root.table("run", "where the run lives");
  t.field("name", o.name, "run name");
  t.field("dir", o.dir, "run directory; empty = runs/<name>");
  t.field("overwrite", o.overwrite,
          "start afresh, deleting the run directory's run file and checkpoints");
}

void positive(int64_t v, const char* key, const char* what) {
  require(v > 0, key, " must be > 0 (", what, "), got ", v);
}

}  // namespace

void bind_train_config(Table& root, TrainConfig& cfg) {
  bind_model(root, cfg.model);
  bind_attention(root, cfg.model.attention);
  bind_train(root, cfg.train);
  bind_data(root, cfg.data);
  bind_tasks(root, cfg.data.task);
  bind_eval(root, cfg.eval);
  bind_parallel(root, cfg.parallel);
  bind_run(root, cfg.run);
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  TrainConfig cfg;
  Table root;
  bind_train_config(root, cfg);
  root.read(load_config(path, overrides));
  check_train_config(cfg);
  return cfg;
}

void check_train_config(const TrainConfig& c) {
  const TrainOptions& t = c.train;
  positive(t.steps, "train.steps", "optimizer updates");
  positive(t.batch, "train.batch", "sequences per data-parallel rank");
  positive(t.seq_len, "train.seq_len", "tokens per sequence");
  positive(t.log_every, "train.log_every", "steps between metric rows");
  require(t.ckpt_every >= 0, "train.ckpt_every must be >= 0 (0 = only at the end), got ",
          t.ckpt_every);
  require(t.keep_ckpts >= 0, "train.keep_ckpts must be >= 0 (0 = keep all), got ", t.keep_ckpts);
  require(t.path_chunk >= -1,
          "train.path_chunk must be a length in positions, 0 (automatic) or "
          "-1 (whole-sequence kernels); got ",
          t.path_chunk);
  require(t.path_chunk <= 0 || (t.path_chunk < t.seq_len && t.seq_len % t.path_chunk == 0),
          "train.path_chunk = ", t.path_chunk, " must divide train.seq_len = ", t.seq_len,
          " into two or more chunks (e.g. 4096 for 65536), or be 0 (automatic) or -1 "
          "(whole-sequence kernels)");
  require(t.stop_after >= 0, "train.stop_after must be >= 0 (0 = off), got ", t.stop_after);
  require(t.warmup >= 0, "train.warmup must be >= 0, got ", t.warmup);
  require(t.probe_rows >= 1, "train.probe_rows must be >= 1, got ", t.probe_rows);
  require(t.probe_len >= 0, "train.probe_len must be >= 0 (0 = train.seq_len), got ", t.probe_len);
  require(t.probe_every >= 0 && (t.probe_every == 0 || t.probe_every % t.log_every == 0),
          "train.probe_every must be 0 (with every metrics row) or a multiple of "
          "train.log_every = ",
          t.log_every, ", got ", t.probe_every);
  require(std::isfinite(t.peak_tflops) && t.peak_tflops > 0, "train.peak_tflops must be > 0, got ",
          t.peak_tflops);
  if (t.device == "cuda") {
    require(t.precision == Precision::Float32,
            "train.device = \"cuda\" trains in float32 (bf16 attention); set train.precision = "
            "\"float32\" or train.device = \"cpu\" for float64");
  }
  require(t.seed >= 0, "train.seed must be >= 0, got ", t.seed);
  require(std::isfinite(t.lr) && t.lr > 0, "train.lr must be > 0, got ", t.lr);
  require(t.min_lr >= 0 && t.min_lr <= t.lr, "train.min_lr must be in [0, train.lr = ", t.lr,
          "], got ", t.min_lr);
  require(t.weight_decay >= 0, "train.weight_decay must be >= 0, got ", t.weight_decay);
  require(t.clip >= 0, "train.clip must be >= 0 (0 = no clipping), got ", t.clip);
  require(t.beta1 >= 0 && t.beta1 < 1, "train.beta1 must be in [0, 1), got ", t.beta1);
  require(t.beta2 >= 0 && t.beta2 < 1, "train.beta2 must be in [0, 1), got ", t.beta2);

  const DataOptions& d = c.data;
  require(d.validation_fraction > 0 && d.validation_fraction < 1,
          "data.validation_fraction must be in (0, 1), got ", d.validation_fraction);
  require(d.source != "shards" || !split_paths(d.paths).empty(),
          "data.source = \"shards\" needs data.paths (token shard files or directories)");
  require(!c.is_task() || split_paths(d.paths).empty(), "data.paths is set but data.source = \"",
          d.source, "\" is a synthetic task; use data.source = \"text\" or \"shards\" for files");

  const EvalOptions& e = c.eval;
  const int64_t f = e.max_length_factor;
  require(f >= 1 && f <= 64 && (f & (f - 1)) == 0,
          "eval.max_length_factor must be 1, 2, 4, 8, 16, 32 or 64, got ", f);
  require(e.every >= 0, "eval.every must be >= 0 (0 = only at the end), got ", e.every);
  positive(e.windows, "eval.windows", "validation windows per length");
  positive(e.task_samples, "eval.task_samples", "validation sequences per length");
  positive(e.batch, "eval.batch", "sequences per evaluation forward");
  positive(e.passkey_depths, "eval.passkey_depths", "needle depths");
  positive(e.passkey_samples, "eval.passkey_samples", "samples per cell");
  require(e.passkey_digits >= 1 && e.passkey_digits <= 32,
          "eval.passkey_digits must be in [1, 32], got ", e.passkey_digits);
  check_longctx_config(c);

  require(c.parallel.cp >= 1, "parallel.cp must be >= 1, got ", c.parallel.cp);
  require(c.parallel.dp >= 0, "parallel.dp must be >= 0 (0 = world size / cp), got ",
          c.parallel.dp);
  require(!c.run.name.empty() && c.run.name.find('/') == std::string::npos,
          "run.name must be a non-empty name without '/', got '", c.run.name,
          "' (use run.dir for a path)");

  // The model's shape, with a stand-in vocabulary when it comes from the data.
  ModelConfig m = c.model;
  require(m.vocab_size >= 0, "model.vocab_size must be >= 0 (0 = from the data), got ",
          m.vocab_size);
  if (m.vocab_size == 0) m.vocab_size = 256;
  try {
    validate(m);
  } catch (const Error& err) {
    throw_error("bad [model]/[attention] configuration: ", err.what());
  }
}

std::string train_config_toml(const TrainConfig& cfg) {
  TrainConfig copy = cfg;
  Table root;
  bind_train_config(root, copy);
  return root.to_toml();
}

std::vector<int64_t> eval_lengths(const TrainConfig& cfg) {
  std::vector<int64_t> out;
  for (int64_t f = 1; f <= cfg.eval.max_length_factor; f *= 2) out.push_back(cfg.train.seq_len * f);
  return out;
}

std::vector<std::string> split_paths(const std::string& paths) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= paths.size()) {
    size_t end = paths.find(',', start);
    if (end == std::string::npos) end = paths.size();
    std::string p = paths.substr(start, end - start);
    const auto b = p.find_first_not_of(" \t"), e = p.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(p.substr(b, e - b + 1));
    start = end + 1;
  }
  return out;
}

}  // namespace config
}  // namespace lcr
