#include "core/train/run_io.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <map>
#include <sstream>

#include "core/config/longctx_config.hpp"
#include "core/train/longctx_io.hpp"
#include "core/train/prior_stats.hpp"
#include "core/train/setup.hpp"
#include "kernels/base/error.hpp"

namespace lcr::train {
namespace {

std::vector<io::Slice> slices_of(const ModelLayout& layout) {
  std::vector<io::Slice> out;
  for (const ParamEntry& e : layout.params().entries()) out.push_back({e.name, e.offset, e.shape});
  return out;
}

// [model] and [attention] as TOML: what must agree between a checkpoint and the config.
std::string model_toml(const TrainConfig& cfg) {
  TrainConfig c = cfg;
  config::Table root;
  config::bind_train_config(root, c);
  return root.table("model").to_toml() + root.table("attention").to_toml();
}

}  // namespace

io::RunLayout run_layout(const TrainConfig& cfg) {
  io::RunLayout layout = io::standard_layout(
      prior_shapes(cfg), {"clip_scale", "step_time_s", "model_tflops", "mfu", "mfu_palm"});
  if (cfg.is_task())
    layout.tables.push_back(
        {"eval/task",
         "task accuracy vs evaluation length, one row per (step, length)",
         {{"length", {}, io::DType::I64, "evaluation sequence length (tokens)"},
          {"loss", {}, io::DType::F64, "mean cross-entropy on the scored positions (nats)"},
          {"token_accuracy", {}, io::DType::F64, "argmax accuracy on the scored positions"},
          {"sequence_accuracy",
           {},
           io::DType::F64,
           "fraction of sequences whose scored positions are all right"}}});
  if (config::longctx_on(cfg.eval)) add_longctx_table(layout);
  return layout;
}

io::Provenance provenance(const TrainConfig& cfg, const std::string& config_toml,
                          const std::string& command_line, int world_size) {
  io::Provenance p;
  p.config_toml = config_toml;
  p.lcr_version = lcr_version();
  p.git_revision = git_revision();
  p.command_line = command_line;
  p.devices = device_description();
  p.kokkos_version = std::to_string(KOKKOS_VERSION / 10000) + "." +
                     std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
                     std::to_string(KOKKOS_VERSION % 100);
  p.mpi_version = mpi_library_version();
  p.world_size = world_size;
  p.dp = cfg.parallel.dp;
  p.cp = cfg.parallel.cp;
  p.extra["model"] = describe(cfg.model);
  p.extra["precision"] = precision_name(cfg.train.precision);
  return p;
}

AdamWConfig adamw_config(const TrainConfig& cfg) {
  const TrainOptions& t = cfg.train;
  AdamWConfig a;
  a.lr = t.lr;
  a.min_lr = t.min_lr;
  a.warmup_steps = t.warmup;
  a.total_steps = t.steps;
  a.beta1 = t.beta1;
  a.beta2 = t.beta2;
  a.weight_decay = t.weight_decay;
  a.grad_clip = t.clip;
  a.decay_embeddings = t.decay_embeddings;
  try {
    validate(a);
  } catch (const Error& e) {
    throw_error("bad [train] optimizer settings: ", e.what());
  }
  return a;
}

template <class T>
io::Checkpoint make_checkpoint(const Model<T>& model, const AdamW<T>& opt, int64_t step,
                               const TrainConfig& cfg, const std::string& config_toml,
                               double loss) {
  io::Checkpoint c;
  c.step = step;
  c.seed = uint64_t(cfg.train.seed);
  c.config_toml = config_toml;
  const auto slices = slices_of(model.layout());
  c.put_view("params", model.params(), slices);
  c.put_view("adam_m", opt.m(), slices);
  c.put_view("adam_v", opt.v(), slices);
  c.scalars["optimizer_steps"] = int64_t(opt.steps_taken());
  c.scalars["precision"] = std::string(precision_name(cfg.train.precision));
  c.scalars["loss"] = loss;
  return c;
}

TrainConfig checkpoint_config(const io::Checkpoint& c) {
  TrainConfig cfg;
  config::Table root;
  config::bind_train_config(root, cfg);
  try {
    const config::Document doc = config::Document::parse(c.config_toml, "checkpoint config");
    root.read(doc);
    // A checkpoint written before a convention had its key trained under the rule lcr had
    // then: the geometric ALiBi slopes, the paper's YaRN ramp. Where that rule gives another
    // function than today's default, read the checkpoint as it trained (restore_checkpoint
    // then names the key a config must set to resume it).
    AttentionSpec& a = cfg.model.attention;
    if (!doc.has("attention.alibi.slopes") && a.scheme == Scheme::ALiBi &&
        (a.heads & (a.heads - 1)) != 0)
      a.alibi.slopes = AlibiSlopes::Geometric;
    if (!doc.has("attention.rope.yarn_convention") && a.scheme == Scheme::RoPE &&
        a.rope.yarn_factor > 1)
      a.rope.yarn_convention = YarnConvention::Paper;
  } catch (const std::exception& e) {
    throw_error("the checkpoint's config does not parse: ", e.what());
  }
  return cfg;
}

template <class T>
void restore_checkpoint(const io::Checkpoint& c, const TrainConfig& cfg, Model<T>& model,
                        AdamW<T>* opt) {
  const TrainConfig saved = checkpoint_config(c);
  const AttentionSpec &sa = saved.model.attention, &ca = cfg.model.attention;
  require(sa.scheme != Scheme::ALiBi || sa.alibi.slopes == ca.alibi.slopes,
          "the checkpoint of step ", c.step, " trained ALiBi with attention.alibi.slopes = \"",
          sa.alibi.slopes == AlibiSlopes::Geometric ? "geometric" : "published",
          "\" (checkpoints from before that key used the geometric slopes); set it so in the "
          "run's config.toml or on the command line to resume");
  require(sa.scheme != Scheme::RoPE || sa.rope.yarn_convention == ca.rope.yarn_convention,
          "the checkpoint of step ", c.step,
          " trained YaRN with attention.rope.yarn_convention = \"",
          sa.rope.yarn_convention == YarnConvention::Paper ? "paper" : "released",
          "\" (checkpoints from before that key used the paper's ramp); set it so in the run's "
          "config.toml or on the command line to resume");
  require(model_toml(saved) == model_toml(cfg), "the checkpoint of step ", c.step,
          " was written for another model: its [model] / "
          "[attention] sections differ from this config's (",
          describe(saved.model), " vs ", describe(cfg.model),
          "); use the run's own config.toml or set run.overwrite = true");
  require(saved.train.precision == cfg.train.precision, "the checkpoint holds ",
          precision_name(saved.train.precision),
          " values but train.precision = ", precision_name(cfg.train.precision));
  c.copy_to_view("params", model.params());
  if (!opt) return;
  c.copy_to_view("adam_m", opt->m());
  c.copy_to_view("adam_v", opt->v());
  const auto it = c.scalars.find("optimizer_steps");
  require(it != c.scalars.end() && std::holds_alternative<int64_t>(it->second),
          "checkpoint of step ", c.step, " has no int64 scalar 'optimizer_steps'");
  // Cross-check (also for checkpoints older than the `checksum` attribute): one AdamW
  // update per completed step.
  require(std::get<int64_t>(it->second) == c.step, "checkpoint of step ", c.step,
          " says optimizer_steps = ", std::get<int64_t>(it->second),
          "; a checkpoint of step N has N updates (edited by hand?). Resume from an earlier "
          "checkpoint by name (train.resume_from=step-<N>)");
  opt->set_steps_taken(std::get<int64_t>(it->second));
}

namespace {

std::map<std::string, std::string> flat_config(const std::string& toml_text, const char* what) {
  std::map<std::string, std::string> out;
  try {
    out = config::Document::parse(toml_text, what).leaves();
  } catch (const std::exception& e) {
    throw_error("the ", what, " does not parse: ", e.what());
  }
  return out;
}

}  // namespace

const std::vector<std::string>& resume_changeable_keys() {
  // THE table of keys a resume may change (docs/run-file.md repeats it). Everything else
  // must equal the checkpoint's config. These change when and how the run is logged,
  // checkpointed, evaluated or stopped, or how long it runs -- not what a step computes.
  // train.steps may grow (or shrink): the cosine schedule then ends at the new value.
  // run.overwrite and train.resume_from are never stored (they act on this job only).
  static const std::vector<std::string> keys = {
      "train.steps",      "train.stop_after",  "train.log_every",   "train.probe_every",
      "train.ckpt_every", "train.keep_ckpts",  "train.peak_tflops", "train.inject_nan_step",
      "eval.every",       "eval.at_end",       "run.name",          "run.dir",
      "run.overwrite",    "train.resume_from", "train.log_phases"};
  return keys;
}

std::vector<ConfigChange> config_changes(const std::string& old_toml, const std::string& new_toml) {
  const auto a = flat_config(old_toml, "checkpoint's config"), b = flat_config(new_toml, "config");
  // A key the checkpoint's config lacks (written before the key existed) that is at its
  // default now is no change: the run computed what the default computes.
  static const auto defaults = flat_config(config::train_config_toml(TrainConfig()), "default");
  std::vector<ConfigChange> out;
  for (const auto& [k, v] : a) {
    const auto it = b.find(k);
    const std::string nv = it == b.end() ? "(absent)" : it->second;
    if (nv != v) out.push_back({k, v, nv});
  }
  for (const auto& [k, v] : b) {
    const auto d = defaults.find(k);
    if (!a.count(k) && (d == defaults.end() || d->second != v)) out.push_back({k, "(absent)", v});
  }
  return out;
}

std::string check_resume_config(const std::string& old_toml, const std::string& new_toml,
                                int64_t step, const std::string& run_dir) {
  const auto& ok = resume_changeable_keys();
  std::string refused, allowed;
  for (const auto& c : config_changes(old_toml, new_toml)) {
    const bool may = std::find(ok.begin(), ok.end(), c.key) != ok.end();
    (may ? allowed : refused) += (may ? std::string(allowed.empty() ? "" : "; ") : "\n  ") + c.key +
                                 ": " + c.old_value + " -> " + c.new_value;
  }
  std::string keys;
  for (const auto& k : ok) keys += (keys.empty() ? "" : ", ") + k;
  require(refused.empty(), "cannot resume ", run_dir, " from its checkpoint of step ", step,
          ": the config differs from the run's in keys a resume may not change (checkpoint "
          "-> now):",
          refused, "\nA resume continues the same run; only these keys may change: ", keys,
          ". To train with the new values start a new run: choose a new run.name (or run.dir), "
          "or set run.overwrite=true to delete this run and start it again.");
  return allowed;
}

int64_t resume_from_step(const std::string& name) {
  int64_t step = -1;
  size_t used = 0;
  if (name.rfind("step-", 0) == 0 && name.size() > 5) {
    try {
      step = std::stoll(name.substr(5), &used);
    } catch (const std::exception&) {
      step = -1;
    }
  }
  const std::string tail = name.size() > 5 + used ? name.substr(5 + used) : "";
  require(step >= 0 && (tail.empty() || tail == ".h5"), "train.resume_from = \"", name,
          "\": expected a checkpoint name like \"step-200\" (a file step-200.h5 in the run's "
          "ckpt/ directory)");
  return step;
}

#define LCR_RUN_IO(T)                                                                         \
  template io::Checkpoint make_checkpoint<T>(const Model<T>&, const AdamW<T>&, int64_t,       \
                                             const TrainConfig&, const std::string&, double); \
  template void restore_checkpoint<T>(const io::Checkpoint&, const TrainConfig&, Model<T>&,   \
                                      AdamW<T>*);
LCR_RUN_IO(float)
LCR_RUN_IO(double)
#undef LCR_RUN_IO

}  // namespace lcr::train
