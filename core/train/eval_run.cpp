#include "core/train/eval_run.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/io/checkpoint.hpp"
#include "core/io/output_path.hpp"
#include "core/train/run_io.hpp"
#include "core/train/setup.hpp"
#include "core/train/world.hpp"
#include "kernels/base/error.hpp"

namespace lcr::train {
namespace {

template <class T>
EvalResults run_eval(Setup& s, const io::Checkpoint& c, const LongCtxPlan& longctx) {
  Model<T> model(s.cfg.model, 0);
  restore_checkpoint(c, s.cfg, model, static_cast<AdamW<T>*>(nullptr));
  const auto sets = s.feed->eval_sets(config::eval_lengths(s.cfg));
  const auto passkey = passkey_sets(s.cfg, s.cfg.model.vocab_size);
  return evaluate(model, sets, passkey, longctx, *s.grid, s.cfg.parallel.layout, s.cfg.eval.batch);
}

}  // namespace

EvalResults eval_checkpoint(const EvalCommand& cmd, std::ostream& out) {
  const std::string cfg_path = cmd.run_dir + "/config.toml";
  require(std::filesystem::exists(cfg_path), cmd.run_dir,
          " is not a run directory (no config.toml); pass --run runs/<name>");
  TrainConfig cfg = config::load_train_config(cfg_path, cmd.overrides);
  // Set directly, not as an override: the directory's name is kept as given (quotes,
  // backslashes, spaces at its ends included).
  cfg.run.dir = cmd.run_dir;
  // Evaluation may use another grid than training did: dp follows the world, and a cp the
  // world cannot hold (the run trained with more ranks) becomes 1 unless asked for.
  cfg.parallel.dp = 0;
  const int world = world_communicator()->size();
  bool cp_given = false;
  for (const auto& o : cmd.overrides) cp_given = cp_given || o.rfind("parallel.cp=", 0) == 0;
  if (!cp_given && world % cfg.parallel.cp != 0) cfg.parallel.cp = 1;
  Setup s = prepare(cfg);  // refuses a model whose vocabulary cannot hold eval.longctx's form
  const LongCtxPlan longctx = longctx_plan(s.cfg, *s.feed);

  io::CheckpointStore store(cmd.run_dir + "/ckpt");
  io::Checkpoint c;
  agree(s.grid->world(), "loading the checkpoint", [&] {
    if (cmd.step >= 0) {
      c = io::read_checkpoint(store.file_for(cmd.step), cmd.step);
    } else {
      auto found = store.load_latest();
      require(found.has_value(), cmd.run_dir, "/ckpt holds no checkpoint to evaluate");
      c = std::move(found->checkpoint);
    }
  });
  // Before the evaluation, not after it: an --output that is the run's own file, or whose
  // .tmp is not a file, is refused now (core/io/output_path.hpp).
  if (!cmd.output.empty()) {
    io::check_output_path(cmd.output, {store.file_for(c.step), cmd.run_dir + "/run.h5"});
    io::check_tmp_path(cmd.output + ".tmp");
  }
  if (s.writer())
    spdlog::info("evaluating {} at step {}: lengths {}{}{} ...", cmd.run_dir, c.step,
                 fmt::join(config::eval_lengths(s.cfg), ", "),
                 s.cfg.eval.passkey ? ", and the passkey grid" : "",
                 longctx.empty() ? ""
                                 : fmt::format(", {} long-context cells ({} form)",
                                               longctx.cells.size(), longctx.form));
  if (s.writer() && !longctx.haystack.empty()) spdlog::info("eval.longctx: {}", longctx.haystack);
  const EvalResults res = s.cfg.train.precision == Precision::Float64
                              ? run_eval<double>(s, c, longctx)
                              : run_eval<float>(s, c, longctx);
  if (!s.writer()) return res;
  if (!cmd.output.empty()) {
    const std::string tmp = cmd.output + ".tmp";
    {
      std::ofstream f(tmp);
      f << eval_json(cmd, c.step, res, s.cfg.eval.longctx_threshold);
      require(bool(f.flush()), "cannot write ", tmp, " (--output)");
    }
    require(std::rename(tmp.c_str(), cmd.output.c_str()) == 0, "cannot rename ", tmp, " to ",
            cmd.output, " (--output)");
  }
  out << fmt::format("evaluation of {} at step {} ({})\n", cmd.run_dir, c.step,
                     describe(s.cfg.model));
  for (const LengthResult& r : res.lengths) {
    out << fmt::format("  length {:>6}  loss {:.4f}  ppl {:9.3f}", r.length, r.loss,
                       std::exp(r.loss));
    if (s.cfg.is_task())
      out << fmt::format("  token_accuracy {:.3f}  sequence_accuracy {:.3f}", r.token_accuracy,
                         r.sequence_accuracy);
    out << "\n";
  }
  if (!res.passkey.empty()) {
    std::map<int64_t, std::vector<const PasskeyResult*>> by_len;
    for (const auto& p : res.passkey) by_len[p.length].push_back(&p);
    out << "  passkey accuracy (rows: length, columns: depth)\n";
    for (const auto& [len, cells] : by_len) {
      out << fmt::format("    {:>6}", len);
      for (const auto* p : cells) out << fmt::format("  {:.2f}@{:.2f}", p->accuracy, p->depth);
      out << "\n";
    }
  }
  if (!res.longctx.empty())
    out << format_longctx(
        summarize_longctx(longctx_rows(res.longctx), s.cfg.eval.longctx_threshold), "  ");
  return res;
}

namespace {

std::string json_number(double x) {
  return std::isfinite(x) ? fmt::format("{:.17g}", x) : std::string("null");
}

// {"form", "threshold", "effective_length", "cells": [...], "tasks": [...], "categories":
// [...], "average": [...]}: the cells and the summaries of longctx_summary.hpp.
std::string longctx_json(const EvalResults& res, double threshold) {
  const std::vector<LongRow> rows = longctx_rows(res.longctx);
  const LongSummary s = summarize_longctx(rows, threshold);
  std::string out = fmt::format(
      "{{\"form\": \"{}\", \"threshold\": {}, \"effective_length\": {},\n  \"cells\": [",
      res.longctx_form, json_number(threshold), s.effective_length);
  for (size_t i = 0; i < rows.size(); ++i) {
    const LongRow& r = rows[i];
    out += fmt::format(
        "{}\n   {{\"task\": \"{}\", \"category\": \"{}\", \"length\": {}, \"depth\": {}, "
        "\"samples\": {}, \"token_accuracy\": {}, \"all_match\": {}, \"part_match\": {}}}",
        i ? "," : "", r.task, r.category, r.length, json_number(r.depth), r.samples,
        json_number(r.token_accuracy), json_number(r.all_match), json_number(r.part_match));
  }
  out += "],\n  \"tasks\": [";
  bool first = true;
  for (const std::string& t : s.tasks)
    for (size_t i = 0; i < s.lengths.size(); ++i) {
      if (!std::isfinite(s.task_score.at(t)[i])) continue;
      out += fmt::format(
          "{}\n   {{\"task\": \"{}\", \"length\": {}, \"score\": {}, \"all_match\": {}, "
          "\"token_accuracy\": {}}}",
          first ? "" : ",", t, s.lengths[i], json_number(s.task_score.at(t)[i]),
          json_number(s.task_all_match.at(t)[i]), json_number(s.task_token_accuracy.at(t)[i]));
      first = false;
    }
  out += "],\n  \"categories\": [";
  first = true;
  for (const std::string& c : s.categories)
    for (size_t i = 0; i < s.lengths.size(); ++i) {
      if (!std::isfinite(s.category_score.at(c)[i])) continue;
      out += fmt::format("{}\n   {{\"category\": \"{}\", \"length\": {}, \"score\": {}}}",
                         first ? "" : ",", c, s.lengths[i], json_number(s.category_score.at(c)[i]));
      first = false;
    }
  out += "],\n  \"average\": [";
  for (size_t i = 0; i < s.lengths.size(); ++i)
    out += fmt::format("{}\n   {{\"length\": {}, \"score\": {}}}", i ? "," : "", s.lengths[i],
                       json_number(s.average[i]));
  return out + "]}";
}

}  // namespace

std::string eval_json(const EvalCommand& cmd, int64_t step, const EvalResults& res,
                      double longctx_threshold) {
  // TOML's basic-string escapes (\", \\, \uXXXX) are JSON's too.
  std::string out = fmt::format("{{\"run\": {}, \"step\": {}, \"overrides\": [",
                                config::format_value(cmd.run_dir), step);
  for (size_t i = 0; i < cmd.overrides.size(); ++i)
    out += (i ? ", " : "") + config::format_value(cmd.overrides[i]);
  out += "],\n \"lengths\": [";
  for (size_t i = 0; i < res.lengths.size(); ++i) {
    const LengthResult& r = res.lengths[i];
    out += fmt::format(
        "{}\n  {{\"length\": {}, \"loss\": {}, \"ppl\": {}, \"token_accuracy\": {}, "
        "\"sequence_accuracy\": {}}}",
        i ? "," : "", r.length, json_number(r.loss), json_number(std::exp(r.loss)),
        json_number(r.token_accuracy), json_number(r.sequence_accuracy));
  }
  out += "],\n \"passkey\": [";
  for (size_t i = 0; i < res.passkey.size(); ++i) {
    const PasskeyResult& p = res.passkey[i];
    out += fmt::format("{}\n  {{\"length\": {}, \"depth\": {}, \"accuracy\": {}}}", i ? "," : "",
                       p.length, json_number(p.depth), json_number(p.accuracy));
  }
  out += "]";
  if (!res.longctx.empty()) out += ",\n \"longctx\": " + longctx_json(res, longctx_threshold);
  return out + "}\n";
}

}  // namespace lcr::train
