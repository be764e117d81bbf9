#include "core/train/eval_longctx.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/config/longctx_config.hpp"
#include "core/data/tasks/passkey_grid.hpp"
#include "core/train/eval_rows.hpp"
#include "kernels/base/error.hpp"

namespace lcr::train {
namespace {

// At most this much of the validation text is kept for essay haystacks.
constexpr int64_t kMaxHaystackText = int64_t(64) << 20;

tasks::HaystackOptions* haystack_options(tasks::TaskOptions& o, const std::string& task) {
  if (task == "niah_single") return &o.niah_single;
  if (task == "niah_multikey") return &o.niah_multikey;
  if (task == "niah_multivalue") return &o.niah_multivalue;
  if (task == "niah_multiquery") return &o.niah_multiquery;
  if (task == "variable_tracking") return &o.variable_tracking;
  return nullptr;
}

// Byte-form essay haystacks of a byte-text run: the run's own validation text when it holds
// the longest evaluation length, else the built-in sentences.
void set_haystacks(const TrainConfig& cfg, const DataFeed& feed,
                   const std::vector<std::string>& names, LongCtxPlan& plan) {
  std::vector<tasks::HaystackOptions*> essay;
  for (const std::string& t : names)
    if (auto* h = haystack_options(plan.options, t); h && h->haystack == "essay")
      essay.push_back(h);
  if (essay.empty() || plan.form != "byte") return;
  const int64_t longest = config::eval_lengths(cfg).back();
  const auto text = feed.validation_text(kMaxHaystackText);
  if (text && int64_t(text->size()) >= longest) {
    for (auto* h : essay) h->haystack_text = text;
    plan.haystack = fmt::format("essay haystacks: windows of the run's validation text ({} bytes)",
                                text->size());
  } else if (text) {
    plan.haystack = fmt::format(
        "essay haystacks: the built-in sentences (the run's validation text, {} bytes, is "
        "shorter than the longest evaluation length {})",
        text->size(), longest);
  } else {
    plan.haystack = "essay haystacks: the built-in sentences (data.source is not byte text)";
  }
}

// eval.longctx_set: the set's cells, after every check the run allows before compute.
LongCtxPlan set_plan(const TrainConfig& cfg) {
  const std::string& path = cfg.eval.longctx_set;
  LongCtxPlan plan;
  plan.form = "text";
  plan.set = std::make_shared<const data::LongSet>(data::LongSet::open(path, cfg.model.vocab_size));
  const int cp = cfg.parallel.cp;
  for (int64_t L : plan.set->lengths()) {
    try {
      SeqLayout check(cfg.parallel.layout, L, cp);
    } catch (const Error& e) {
      throw_error(path, ": its length ", L, " cannot be split over parallel.cp = ", cp,
                  " ranks: ", e.what(), "; or make the set with longer --lengths");
    }
  }
  const auto& cells = plan.set->cells();
  for (size_t k = 0; k < cells.size(); ++k)
    plan.cells.push_back({cells[k].task, cells[k].length, cells[k].depth, int64_t(k)});
  plan.haystack =
      fmt::format("the text-form set {} ({} cells; {})", path, cells.size(), plan.set->source());
  return plan;
}

}  // namespace

LongCtxPlan longctx_plan(const TrainConfig& cfg, const DataFeed& feed) {
  if (!cfg.eval.longctx_set.empty()) return set_plan(cfg);
  LongCtxPlan plan;
  const std::vector<std::string> names = config::longctx_tasks(cfg.eval);
  if (names.empty()) return plan;
  config::check_longctx_config(cfg);  // the model's vocabulary is known by now
  plan.options = config::longctx_task_options(cfg);
  plan.form = config::longctx_form(cfg);
  plan.samples = cfg.eval.longctx_samples;
  plan.seed = uint64_t(cfg.train.seed);
  set_haystacks(cfg, feed, names, plan);
  const std::vector<double> depths = tasks::evenly_spaced_depths(cfg.eval.longctx_depths);
  for (const std::string& t : names)
    for (int64_t L : config::longctx_task_lengths(cfg, t)) {
      if (!tasks::long_task_has_depth(t)) {
        plan.cells.push_back({t, L, std::numeric_limits<double>::quiet_NaN()});
        continue;
      }
      for (double d : depths) plan.cells.push_back({t, L, d});
    }
  return plan;
}

tasks::LongCell longctx_cell(const LongCtxPlan& plan, const LongCellSpec& spec) {
  if (spec.set_cell >= 0) return plan.set->read(size_t(spec.set_cell));
  // cwe and fwe ignore the depth (and draw nothing for it): any value gives the same cell.
  const double depth = std::isnan(spec.depth) ? 0.5 : spec.depth;
  return tasks::long_cell(spec.task, plan.options, spec.length, depth, plan.samples, plan.seed);
}

template <class T>
std::vector<LongCellResult> evaluate_longctx(
    Model<T>& model, const LongCtxPlan& plan, const ProcessGrid& grid, LayoutKind layout,
    int64_t batch_rows, const std::function<void(const std::string&)>& on_cell) {
  std::vector<LongCellResult> out;
  for (const LongCellSpec& spec : plan.cells) {
    const tasks::LongCell c = longctx_cell(plan, spec);
    const int64_t rows = c.batch.batch;
    // Right tokens of every answer span, flat: row b's spans at [first[b], first[b + 1]).
    std::vector<size_t> first(size_t(rows) + 1, 0);
    for (int64_t b = 0; b < rows; ++b) first[size_t(b) + 1] = first[size_t(b)] + c.spans[b].size();
    std::vector<double> right(first.back(), 0.0);
    const PositionHook hook = [&](int64_t row, int64_t pos, bool ok) {
      if (!ok) return;
      const tasks::AnswerSpans& sp = c.spans[size_t(row)];
      for (size_t k = 0; k < sp.size(); ++k)
        if (pos >= sp[k].begin && pos < sp[k].end) right[first[size_t(row)] + k] += 1;
    };
    const RowSums sums = score_batch(model, c.batch, grid, layout, batch_rows, hook);
    grid.world().allreduce_sum(right.data(), right.size());  // exact: counts below 2^53

    LongCellResult r{spec.task, c.category, spec.length, spec.depth, {}};
    tasks::LongScore& s = r.score;
    double hits = 0;
    for (int64_t b = 0; b < rows; ++b) {
      const tasks::AnswerSpans& sp = c.spans[size_t(b)];
      int64_t right_spans = 0;
      for (size_t k = 0; k < sp.size(); ++k) {
        const int64_t n = int64_t(right[first[size_t(b)] + k]);
        s.scored_tokens += sp[k].size();
        s.correct_tokens += n;
        right_spans += n == sp[k].size();
      }
      const int64_t n = int64_t(sp.size());
      ++s.rows;
      s.all_match_sum += (n > 0 && right_spans == n) ? 1.0 : 0.0;
      s.part_match_sum += n > 0 ? double(right_spans) / double(n) : 0.0;
      hits += sums.correct[size_t(b)];
    }
    // Only the answer spans carry labels (core/data/tasks/longctx.hpp): both counts agree.
    require(hits == double(s.correct_tokens), "internal error: ", spec.task, " at length ",
            spec.length, ": ", hits, " right labelled positions but ", s.correct_tokens,
            " right answer-span positions");
    out.push_back(std::move(r));
    on_cell(std::isnan(spec.depth)
                ? fmt::format("{} L={}", spec.task, spec.length)
                : fmt::format("{} L={} depth {:.2f}", spec.task, spec.length, spec.depth));
  }
  return out;
}

std::vector<LongRow> longctx_rows(const std::vector<LongCellResult>& cells) {
  std::vector<LongRow> out;
  for (const LongCellResult& c : cells)
    out.push_back({c.task, tasks::long_category_name(c.category), c.length, c.depth, c.score.rows,
                   c.score.token_accuracy(), c.score.all_match(), c.score.part_match()});
  return out;
}

template std::vector<LongCellResult> evaluate_longctx<float>(
    Model<float>&, const LongCtxPlan&, const ProcessGrid&, LayoutKind, int64_t,
    const std::function<void(const std::string&)>&);
template std::vector<LongCellResult> evaluate_longctx<double>(
    Model<double>&, const LongCtxPlan&, const ProcessGrid&, LayoutKind, int64_t,
    const std::function<void(const std::string&)>&);

}  // namespace lcr::train
