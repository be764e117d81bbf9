#include "core/train/trainer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <type_traits>

#include "core/model/ring_runner.hpp"
#include "core/train/evaluate.hpp"
#include "core/train/flops.hpp"
#include "core/train/gpu_engine.hpp"
#include "core/train/longctx_io.hpp"
#include "core/train/prior_stats.hpp"
#include "core/train/progress.hpp"
#include "core/train/run_io.hpp"
#include "core/train/run_lock.hpp"
#include "core/train/setup.hpp"
#include "core/train/signals.hpp"
#include "core/train/world.hpp"
#include "kernels/base/error.hpp"
#include "kernels/base/timer.hpp"
#include "parallel/ring/shard.hpp"

namespace lcr::train {
namespace fs = std::filesystem;
namespace {

// A failure every rank detects at the same point of the same step (from all-reduced
// values), so all of them can return normally with the message.
struct AgreedError : Error {
  using Error::Error;
};

// [B, L] int32 device view of a host row-major buffer.
View2<int32_t> device_rows(const std::vector<int32_t>& v, int64_t B, int64_t L, const char* name) {
  View2<int32_t> d(std::string(name), B, L);
  auto h = Kokkos::create_mirror_view(d);
  std::copy(v.begin(), v.end(), h.data());
  Kokkos::deep_copy(d, h);
  return d;
}

template <class T>
class Trainer {
 public:
  Trainer(Setup& s, const std::string& command_line)
      : s_(s),
        cfg_(s.cfg),
        grid_(*s.grid),
        world_(grid_.world()),
        model_(cfg_.model, uint64_t(cfg_.train.seed)),
        opt_(adamw_config(cfg_), model_param_ranges(model_.layout(), adamw_config(cfg_)),
             model_.layout().total()),
        store_(cfg_.run_dir() + "/ckpt"),
        command_line_(command_line) {
    if (grid_.cp_size() > 1) {
      seq_layout_.emplace(cfg_.parallel.layout, cfg_.train.seq_len, grid_.cp_size());
      runner_ = std::make_unique<RingAttention<T>>(grid_.cp(), *seq_layout_);
    } else {
      runner_ = std::make_unique<LocalAttention<T>>();
    }
    // Evaluation inputs are fixed now, so bad eval settings fail before the first step.
    eval_sets_ = s.feed->eval_sets(config::eval_lengths(cfg_));
    passkey_ = passkey_sets(cfg_, cfg_.model.vocab_size);
    longctx_ = longctx_plan(cfg_, *s.feed);
    if (s_.writer() && !longctx_.haystack.empty())
      spdlog::info("eval.longctx: {}", longctx_.haystack);
    shapes_ = prior_shapes(cfg_);
    layout_ = run_layout(cfg_);
    flops_ = model_flops_per_token(model_.config(), cfg_.train.seq_len);
    if (cfg_.train.device == "cuda") {
      // float only (check_train_config refuses float64 with cuda).
      if constexpr (std::is_same_v<T, float>)
        gpu_ = std::make_unique<GpuEngine>(cfg_, adamw_config(cfg_), grid_);
    }
  }

  TrainOutcome run() {
    load_checkpoint();
    TrainOutcome out;
    out.run_dir = cfg_.run_dir();
    out.step = start_;
    out.loss = std::numeric_limits<double>::quiet_NaN();
    if (start_ >= cfg_.train.steps) {
      // A writer killed after its last checkpoint leaves every row in run.h5 but the file
      // marked open for writing, which readers other than SWMR ones (h5py, h5dump) refuse.
      const std::string h5 = cfg_.run_dir() + "/run.h5";
      agree(world_, "closing " + h5, [&] {
        if (!s_.writer() || !fs::exists(h5)) return;
        if (const std::string how = io::recover_run_file(h5); how != "clean")
          spdlog::warn("{} was left open by a writer that was killed: {} its status flags", h5,
                       how == "cleared" ? "cleared" : "copied the file to clear");
      });
      if (s_.writer())
        spdlog::info("run {} is complete at step {} (train.steps = {}); nothing to do",
                     cfg_.run_dir(), start_, cfg_.train.steps);
      return out;
    }
    open_run_file();
    const AttentionSpec& a = cfg_.model.attention;
    if (s_.writer() && is_goat(a.scheme) && a.goat.train_len != cfg_.train.seq_len)
      spdlog::warn(
          "attention.goat.train_len = {} (L_train of GOAT's key-bias features) differs "
          "from train.seq_len = {}",
          a.goat.train_len, cfg_.train.seq_len);
    if (s_.writer() && cfg_.train.warmup > cfg_.train.steps)
      spdlog::warn(
          "train.warmup = {} exceeds train.steps = {}: the learning rate never reaches "
          "train.lr (its peak is {:.3g} of it)",
          cfg_.train.warmup, cfg_.train.steps,
          double(cfg_.train.steps) / double(cfg_.train.warmup));
    if (s_.writer())
      spdlog::info("training {} -> {}: {} | {} | dp {} x cp {} ({}) | {} parameters", start_,
                   cfg_.train.steps, describe(cfg_.model), s_.feed->describe(), grid_.dp_size(),
                   grid_.cp_size(), layout_name(cfg_.parallel.layout),
                   count_params(model_.layout(), false));
    if (s_.writer() && gpu_) spdlog::info("model on {}", gpu_->describe());
    if (s_.writer() && !gpu_) {
      spdlog::info("model on {}", device_description());
      if (const auto w = thread_binding_warning(); !w.empty()) spdlog::warn("{}", w);
    }
    try {
      train_loop(out);
    } catch (const AgreedError&) {
      throw;  // every rank raised it at the same point: a normal exit with status 1
    } catch (const std::exception& e) {
      // Raised on some ranks only (I/O, a kernel check): the others would wait forever in
      // the next collective, so the job ends here with the message.
      if (world_.size() > 1) world_.abort(e.what());
      throw;
    }
    if (run_file_) run_file_->close();
    world_.barrier();
    // One line a job log can be searched for (slurm/lib/job.sh repeats it at the job's end).
    if (s_.writer() && !out.stopped)
      spdlog::info("run {} finished: step {}/{} | loss {:.4f}{} | this job {}", cfg_.run_dir(),
                   out.step, cfg_.train.steps, out.loss,
                   last_eval_.empty() ? "" : " | " + last_eval_,
                   format_duration(seconds_since(started_)));
    return out;
  }

 private:
  void train_loop(TrainOutcome& out) {
    const int64_t tokens_per_step =
        cfg_.train.batch * cfg_.train.seq_len * int64_t(grid_.dp_size());
    double interval_time = 0;
    int64_t interval_steps = 0, ran = 0;
    for (int64_t step = start_; step < cfg_.train.steps; ++step) {
      const auto t0 = Clock::now();
      const StepResult r = train_step(step);
      const double dt = seconds_since(t0);
      interval_time += dt;
      ++interval_steps;
      ++ran;
      progress_.record_step(dt);
      const int64_t done = step + 1;
      out.step = done;
      out.loss = r.loss;
      const bool stop_after = cfg_.train.stop_after > 0 && ran >= cfg_.train.stop_after;
      const bool stop = r.signal != 0 || stop_after;
      const bool last = done == cfg_.train.steps;
      if (done % cfg_.train.log_every == 0 || last || stop) {
        const double tps = double(tokens_per_step * interval_steps) / interval_time;
        const int64_t pe = cfg_.train.probe_every;
        const bool probe = pe == 0 || done % pe == 0 || last || stop;
        const auto t_probe = Clock::now();
        log_step(done, r, tps, interval_time / double(interval_steps), probe);
        progress_.record_overhead(seconds_since(t_probe));
        if (s_.writer()) {
          std::string line = progress_.line(done, r.loss, r.lr, tps, stop ? 0 : evals_left(done));
          if (gpu_) {
            const double per_gpu = tps / double(world_.size()) / 1e12;
            // 3 significant digits: small demo models run at a fraction of a TFLOP/s.
            line += fmt::format(" | {:.3g} TFLOP/s/GPU, MFU {:.3g}% (PaLM count {:.3g}%)",
                                flops_.causal * per_gpu,
                                100.0 * flops_.causal * per_gpu / cfg_.train.peak_tflops,
                                100.0 * flops_.full * per_gpu / cfg_.train.peak_tflops);
          }
          spdlog::info("{}", line);
          if (cfg_.train.log_phases) spdlog::info("{}", phases_.line(interval_steps));
        }
        interval_time = 0;
        interval_steps = 0;
      }
      const bool eval_due =
          (cfg_.eval.every > 0 && done % cfg_.eval.every == 0) || (last && cfg_.eval.at_end);
      if (eval_due && !stop) run_eval(done);
      if ((cfg_.train.ckpt_every > 0 && done % cfg_.train.ckpt_every == 0) || last || stop) {
        const auto t_save = Clock::now();
        save(done, r.loss);
        progress_.record_overhead(seconds_since(t_save));
      }
      if (stop) {
        out.stopped = true;
        out.signal = r.signal;
        if (s_.writer())
          spdlog::info("stopping at step {} ({}); checkpoint {} written, exit 0 to requeue", done,
                       r.signal ? "signal " + std::to_string(r.signal) : "train.stop_after",
                       store_.file_for(done));
        break;
      }
    }
  }

  // kill -9 of mpirun leaves its ranks running as orphans: a requeued job may already be
  // starting, so an orphan writes nothing more and ends at once (checked every step and
  // before each checkpoint write).
  void stop_if_orphaned() {
    if (!launcher_died()) return;
    spdlog::error("the launcher (mpirun) is gone: stopping without writing anything more");
    std::_Exit(1);
  }

  struct StepResult {
    double loss = 0, lr = 0, grad_norm = 0, clip_scale = 1;
    int signal = 0;
  };

  // Rank-0-only work: an exception there would leave the others waiting in the next
  // collective, so it ends the whole job (with one rank it is simply rethrown).
  template <class F>
  void on_writer(F&& fn) {
    if (!s_.writer()) return;
    try {
      fn();
    } catch (const std::exception& e) {
      if (world_.size() > 1) world_.abort(e.what());
      throw;
    }
  }

  // Prepares the run directory and resumes from its newest complete checkpoint, if any
  // (train.resume_from = "step-<N>": from that one; newer ones move to ckpt/abandoned/).
  // Resume rules (run_io.hpp): the checkpoint's config and this one may differ only in
  // resume_changeable_keys(); config.toml is written only after that check passes, and
  // run.h5's /config then gets the same text, so the two never disagree.
  void load_checkpoint() {
    const std::string dir = cfg_.run_dir();
    agree(world_, "preparing the run directory " + dir, [&] {
      if (!s_.writer()) return;
      lock_run_dir(dir, "train");  // one writer: before anything in dir is touched
      if (cfg_.run.overwrite) {
        fs::remove_all(dir + "/ckpt");
        fs::remove(dir + "/run.h5");
      }
      fs::create_directories(dir + "/ckpt");
      for (const auto& p : store_.remove_leftovers())
        spdlog::warn("removed {}, left by a checkpoint write that did not finish", p);
    });
    agree(world_, "loading the latest checkpoint", [&] {
      if (!cfg_.train.resume_from.empty())
        found_ = store_.load_step(resume_from_step(cfg_.train.resume_from));
      else
        found_ = store_.load_latest();
      if (found_) {
        resume_changes_ = check_resume_config(found_->checkpoint.config_toml, s_.config_toml,
                                              found_->checkpoint.step, dir);
        restore_checkpoint(found_->checkpoint, cfg_, model_, &opt_);
      }
    });
    agree(world_, "setting aside the checkpoints after train.resume_from", [&] {
      if (!s_.writer() || !found_ || cfg_.train.resume_from.empty()) return;
      for (const auto& p : store_.rewind_to(found_->checkpoint.step))
        spdlog::warn("resuming from {}: moved the newer checkpoint to {}", found_->path, p);
    });
    start_ = found_ ? found_->checkpoint.step : 0;
    if constexpr (std::is_same_v<T, float>)
      if (gpu_) gpu_->load(model_, opt_);  // initial or checkpointed state onto the GPU
    ckpt_norm_ = param_stats().norm;       // the divergence guard's reference
    if (found_ && s_.writer()) {
      for (const auto& sk : found_->skipped) spdlog::warn("skipped checkpoint {}", sk);
      spdlog::info("resuming from {} (step {}){}", found_->path, start_,
                   resume_changes_.empty() ? "" : "; config changes: " + resume_changes_);
    }
  }

  struct ParamStats {
    double norm = 0, max_abs = 0;
    int64_t nonfinite = 0;
  };
  ParamStats param_stats() {
    sync_params_to_host();
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model_.params());
    ParamStats st;
    double ss = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      const double v = double(h.data()[i]);
      if (!std::isfinite(v)) {
        ++st.nonfinite;
        continue;
      }
      ss += v * v;
      st.max_abs = std::max(st.max_abs, std::abs(v));
    }
    st.norm = std::sqrt(ss);
    return st;
  }

  // The divergence guard (docs/run-file.md, "Checkpoints"): a checkpoint is written only
  // when every parameter is finite and the parameters' L2 norm is at most
  // kDivergenceGrowth times the norm at the previous checkpoint (or at the start of this
  // job). Every rank holds the same parameters, so every rank refuses together.
  static constexpr double kDivergenceGrowth = 100;
  void check_divergence(int64_t done) {
    const ParamStats st = param_stats();
    const double bound = kDivergenceGrowth * ckpt_norm_;
    if (st.nonfinite == 0 && st.norm <= bound) {
      ckpt_norm_ = st.norm;
      return;
    }
    throw AgreedError(fmt::format(
        "step {}: the parameters diverged ({} non-finite values; L2 norm {:.4g}, max |param| "
        "{:.4g}, against L2 norm {:.4g} at the previous checkpoint or start; the bound is {}x "
        "that). Refused to write checkpoint {}; {}. Lower train.lr or raise train.warmup and "
        "start the run again (a new run.name, or run.overwrite=true)",
        done, st.nonfinite, st.norm, st.max_abs, ckpt_norm_, kDivergenceGrowth,
        store_.file_for(done), newest_checkpoint_text()));
  }

  // What the newest checkpoint is, in words that claim only what was checked.
  std::string newest_checkpoint_text() const {
    const std::vector<int64_t> st = store_.steps();
    if (st.empty()) return "the run has no checkpoint yet";
    return fmt::format(
        "the newest checkpoint is {} (it passed the divergence guard when written, and a "
        "resume verifies its checksum); train.resume_from=step-<N> resumes from an earlier one",
        store_.file_for(st.back()));
  }

  // Continues run.h5 from the checkpoint's step (rows after it are dropped), or starts it.
  void open_run_file() {
    const std::string dir = cfg_.run_dir(), h5 = dir + "/run.h5";
    agree(world_, "opening " + h5, [&] {
      if (!s_.writer()) return;
      if (found_ && fs::exists(h5)) {
        io::ResumeRecord rec;
        rec.config_toml = s_.config_toml;
        rec.changes = resume_changes_;
        rec.command_line = command_line_;
        rec.checkpoint = found_->path;
        run_file_.emplace(io::RunFile::resume(h5, layout_, start_, &rec));
        return;
      }
      // (with a checkpoint but no run.h5 a new run file starts below, holding this config)
      if (fs::exists(h5))
        spdlog::warn("{} has no checkpoint to resume from: starting the run again", dir);
      else if (found_)
        spdlog::warn("{} is missing: starting a new run file at step {}", h5, start_);
      io::Provenance prov = provenance(cfg_, s_.config_toml, command_line_, world_.size());
      // GPU training: the GPU does the work; the Kokkos space only holds the host copies.
      if (gpu_) prov.devices = gpu_->describe() + "; host copies on " + prov.devices;
      run_file_.emplace(io::RunFile::create(h5, layout_, prov, true));
    });
    // config.toml last: only once run.h5's /config holds the same text (a failed resume
    // leaves both as they were). It is the run's current config; /config/resume_log in
    // run.h5 is the history.
    agree(world_, "writing " + dir + "/config.toml", [&] {
      if (!s_.writer()) return;
      const std::string p = dir + "/config.toml", tmp = p + ".tmp";
      {
        std::ofstream out(tmp, std::ios::trunc);
        out << s_.config_toml;
        if (!out.flush()) {
          out.close();
          fs::remove(tmp);
          throw_error("cannot write ", tmp, " (disk full?)");
        }
      }
      fs::rename(tmp, p);
    });
  }

  StepResult train_step(int64_t step) {
    stop_if_orphaned();
    if (step == cfg_.train.inject_nan_step) poison();
    // train.log_phases: each phase ends at a fence, so the next one starts on an idle device.
    auto phase_done = [&](const char* name) {
      if (!cfg_.train.log_phases) return;
      Kokkos::fence();
      phases_.mark(name);
    };
    if (cfg_.train.log_phases) phases_.start();
    const data::Batch b = s_.feed->train_batch(step, grid_.dp_rank(), grid_.dp_size());
    double scored = double(b.scored());
    grid_.dp().allreduce_sum(&scored, 1);  // labelled positions of the global batch
    View2<int32_t> tok = device_rows(b.tokens, b.batch, b.seq_len, "tokens");
    View2<int32_t> lab = device_rows(b.labels, b.batch, b.seq_len, "labels");
    if (seq_layout_) {
      tok = shard_view(tok, *seq_layout_, grid_.cp_rank());
      lab = shard_view(lab, *seq_layout_, grid_.cp_rank());
    }
    phase_done("data");
    double local = 0;
    if constexpr (std::is_same_v<T, float>) {
      if (gpu_) {  // this rank's rows (host views: Kokkos' default space here is the host)
        local = gpu_->forward_backward(tok.data(), lab.data(), int64_t(tok.extent(0)),
                                       int64_t(tok.extent(1)), scored);
        phase_done("forward+backward");
      }
    }
    if (!gpu_) {
      model_.zero_grad();
      local = model_.forward(tok, lab, *runner_, scored);
      phase_done("forward");
      model_.backward(*runner_);
      phase_done("backward");
    }
    // Loss and stop flag in one all-reduce; the flag makes every rank stop at this step.
    double packed[2] = {local, double(StopSignals::received())};
    world_.allreduce_sum(packed, 2);
    phase_done("loss all-reduce");
    StepResult r;
    r.loss = packed[0];
    // The signal number (for the log) only when some rank saw one: then all ranks ask.
    r.signal = packed[1] > 0 ? int(allreduce_max(world_, double(StopSignals::received()))) : 0;
    if (!std::isfinite(r.loss)) {
      const std::string where = gpu_ ? gpu_->locate_nonfinite() : model_.locate_nonfinite();
      throw AgreedError(fmt::format(
          "non-finite training loss ({}) at step {}; first non-finite activation: {}. Stopped "
          "without writing a checkpoint for this step; {}. Lower train.lr or raise "
          "train.warmup and start the run again (a new run.name, or run.overwrite=true)",
          r.loss, step + 1, where.empty() ? "none on this rank (another rank's shard)" : where,
          newest_checkpoint_text()));
    }
    try {
      typename AdamW<T>::StepInfo info;
      if constexpr (std::is_same_v<T, float>) {
        if (gpu_) info = gpu_->allreduce_and_step();
      }
      if (!gpu_) {
        allreduce_view(world_, model_.grads());
        phase_done("grad all-reduce");
        zero_frozen_grads(opt_.ranges(), model_.grads());
        info = opt_.step(model_.params(), model_.grads());
      }
      phase_done("optimizer");
      r.lr = info.lr;
      r.grad_norm = info.grad_norm;
      r.clip_scale = info.clip_scale;
    } catch (const Error& e) {
      // The gradient was all-reduced, so every rank refuses the same step.
      throw AgreedError(fmt::format("step {}: {} (no checkpoint written for it; {})", step + 1,
                                    e.what(), newest_checkpoint_text()));
    }
    probe_batch_ = b;
    return r;
  }

  // train.inject_nan_step: the last layer's attention output projection becomes NaN.
  void poison() {
    sync_params_to_host();
    const ModelLayout& L = model_.layout();
    const int l = cfg_.model.n_layers - 1;
    const int64_t n = int64_t(L.H()) * L.dv() * L.D();
    auto p = Kokkos::subview(model_.params(), std::make_pair(L.layer(l).wo, L.layer(l).wo + n));
    Kokkos::deep_copy(p, std::numeric_limits<T>::quiet_NaN());
    if constexpr (std::is_same_v<T, float>)
      if (gpu_) gpu_->upload_params(model_);
  }

  // With train.device = "cuda" the parameters (and moments) live on the GPU: bring them
  // into the host model (and optimizer) before a probe, an evaluation or a checkpoint.
  void sync_params_to_host(bool with_optimizer = false) {
    if constexpr (std::is_same_v<T, float>)
      if (gpu_) gpu_->store(model_, with_optimizer ? &opt_ : nullptr);
  }

  // The evaluation / probe model gets the current parameters.
  Model<T>& eval_model() {
    if (!eval_model_) eval_model_ = std::make_unique<Model<T>>(cfg_.model, 0);
    sync_params_to_host();
    Kokkos::deep_copy(eval_model_->params(), model_.params());
    return *eval_model_;
  }

  // The metrics row; with `probe` also the prior statistics rows (train.probe_every).
  void log_step(int64_t done, const StepResult& r, double tokens_per_s, double step_time,
                bool probe) {
    if (!s_.writer()) return;
    // Model TFLOP/s per device (flops.hpp), and its fraction of the GPU's peak (cuda only).
    const double per_gpu = tokens_per_s / double(world_.size()) / 1e12;
    const double model_tflops = flops_.causal * per_gpu;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double mfu = gpu_ ? model_tflops / cfg_.train.peak_tflops : nan;
    const double mfu_palm = gpu_ ? flops_.full * per_gpu / cfg_.train.peak_tflops : nan;
    std::vector<std::pair<std::string, io::Row>> rows;
    if (probe) {
      // The probe: the first sequence of this step's batch (its first train.probe_len
      // tokens), on this rank alone, on the CPU.
      Model<T>& pm = eval_model();
      const int64_t L = cfg_.train.probe_len > 0
                            ? std::min(cfg_.train.probe_len, probe_batch_.seq_len)
                            : probe_batch_.seq_len;
      std::vector<int32_t> tok(probe_batch_.tokens.begin(), probe_batch_.tokens.begin() + L);
      std::vector<int32_t> lab(probe_batch_.labels.begin(), probe_batch_.labels.begin() + L);
      LocalAttention<T> local;
      pm.forward(device_rows(tok, 1, L, "probe_tokens"), device_rows(lab, 1, L, "probe_labels"),
                 local);
      rows = prior_rows(pm, shapes_, cfg_.train.probe_rows);
    }
    io::Row m = {{"loss", {r.loss}},
                 {"lr", {r.lr}},
                 {"grad_norm", {r.grad_norm}},
                 {"tokens_per_s", {tokens_per_s}},
                 {"memory_bytes", {double(peak_memory_bytes())}},
                 {"clip_scale", {r.clip_scale}},
                 {"step_time_s", {step_time}},
                 {"model_tflops", {model_tflops}},
                 {"mfu", {mfu}},
                 {"mfu_palm", {mfu_palm}}};
    rows.insert(rows.begin(), {"metrics", std::move(m)});
    on_writer([&] { run_file_->append(done, rows); });
  }

  // The evaluations from step `done` (its own included) to the end of the run.
  int64_t evals_left(int64_t done) const {
    return evaluations_from(done, cfg_.train.steps, cfg_.eval.every, cfg_.eval.at_end);
  }

  void run_eval(int64_t done) {
    const auto t0 = Clock::now();
    if (s_.writer())
      spdlog::info(
          "eval at step {}: {} length(s){}{}, ETA of the run {}", done, eval_sets_.size(),
          passkey_.empty() ? "" : fmt::format(", {} passkey cells", passkey_.size()),
          longctx_.empty() ? "" : fmt::format(", {} long-context cells", longctx_.cells.size()),
          progress_.eta(done, evals_left(done)));
    const EvalResults res = evaluate(eval_model(), eval_sets_, passkey_, longctx_, grid_,
                                     cfg_.parallel.layout, cfg_.eval.batch);
    on_writer([&] {
      std::string line = "eval at step " + std::to_string(done) + ":";
      for (const LengthResult& x : res.lengths) {
        run_file_->append(
            "eval/perplexity", done,
            {{"length", {double(x.length)}}, {"loss", {x.loss}}, {"ppl", {std::exp(x.loss)}}});
        if (cfg_.is_task())
          run_file_->append("eval/task", done,
                            {{"length", {double(x.length)}},
                             {"loss", {x.loss}},
                             {"token_accuracy", {x.token_accuracy}},
                             {"sequence_accuracy", {x.sequence_accuracy}}});
        line += fmt::format(" L={} loss {:.4f}", x.length, x.loss);
        if (cfg_.is_task()) line += fmt::format(" acc {:.3f}", x.token_accuracy);
      }
      for (const PasskeyResult& p : res.passkey)
        run_file_->append(
            "eval/passkey", done,
            {{"length", {double(p.length)}}, {"depth", {p.depth}}, {"accuracy", {p.accuracy}}});
      if (!res.passkey.empty()) {
        double mean = 0;
        for (const auto& p : res.passkey) mean += p.accuracy;
        line += fmt::format(" | passkey {:.3f} over {} cells", mean / double(res.passkey.size()),
                            res.passkey.size());
      }
      if (!res.longctx.empty()) {
        const std::vector<LongRow> rows = longctx_rows(res.longctx);
        for (const LongRow& x : rows) run_file_->append("eval/longctx", done, longctx_row(x));
        line += " | " + longctx_line(summarize_longctx(rows, cfg_.eval.longctx_threshold));
      }
      spdlog::info("{} ({:.1f} s)", line, seconds_since(t0));
      last_eval_ = line;
    });
    progress_.record_eval(seconds_since(t0));
  }

  void save(int64_t done, double loss) {
    stop_if_orphaned();
    check_divergence(done);
    on_writer([&] {
      sync_params_to_host(true);
      store_.save(make_checkpoint(model_, opt_, done, cfg_, s_.config_toml, loss),
                  cfg_.train.keep_ckpts);
    });
  }

  Setup& s_;
  const TrainConfig& cfg_;
  const ProcessGrid& grid_;
  Communicator& world_;
  Model<T> model_;
  AdamW<T> opt_;
  io::CheckpointStore store_;
  std::string command_line_;
  std::optional<SeqLayout> seq_layout_;
  std::unique_ptr<AttentionRunner<T>> runner_;
  std::unique_ptr<Model<T>> eval_model_;
  std::vector<EvalSet> eval_sets_;
  std::vector<PasskeyCellSet> passkey_;
  LongCtxPlan longctx_;
  io::PriorShapes shapes_;
  io::RunLayout layout_;
  std::optional<io::RunFile> run_file_;
  data::Batch probe_batch_;
  PhaseTimes phases_;  // train.log_phases
  std::optional<io::CheckpointStore::Found> found_;
  int64_t start_ = 0;
  std::string resume_changes_;           // "key: old -> new; ..." allowed changes of this resume
  double ckpt_norm_ = 0;                 // parameter L2 norm at the last checkpoint (or the start)
  TokenFlops flops_;                     // model FLOPs per training token (flops.hpp)
  std::unique_ptr<GpuEngine> gpu_;       // train.device = "cuda"
  Progress progress_{cfg_.train.steps};  // the writer's progress lines and ETA
  std::string last_eval_;                // the last evaluation's line, for the summary
  Clock::time_point started_ = Clock::now();
};

}  // namespace

TrainOutcome train(const TrainConfig& cfg, const std::string& command_line) {
  StopSignals signals;  // before setup: a signal during setup still stops cleanly
  remember_launcher();
  Setup s = prepare(cfg);
  if (s.cfg.train.precision == Precision::Float64) {
    Trainer<double> t(s, command_line);
    return t.run();
  }
  Trainer<float> t(s, command_line);
  return t.run();
}

}  // namespace lcr::train
