#pragma once
// Evaluation on the long-context tasks (eval.longctx; docs/training.md, "Long-context
// evaluation"): cells (task, length, depth) of eval.longctx_samples validation samples,
// scored per answer span under teacher forcing (argmax), collectively like every evaluation
// (eval_rows.hpp); or the cells of a text-form set (eval.longctx_set, read with
// core/data/longctx_set.hpp). Under context parallelism each rank sees only its shard of a
// row, so each rank counts the right tokens of every answer span on its positions and the
// per-span counts are all-reduced: integers, so the cell's numbers are those of one rank
// exactly (given the same argmax at every position).
//
//   LongCtxPlan plan = longctx_plan(cfg, feed);     // at setup: Errors before any compute
//   auto cells = evaluate_longctx(model, plan, grid, layout, batch_rows, on_cell);
//   LongSummary s = summarize_longctx(longctx_rows(cells), cfg.eval.longctx_threshold);
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/data/longctx_set.hpp"
#include "core/data/tasks/longctx.hpp"
#include "core/model/model.hpp"
#include "core/train/data_feed.hpp"
#include "core/train/longctx_summary.hpp"
#include "parallel/comm/process_grid.hpp"
#include "parallel/ring/layout.hpp"

namespace lcr::train {

struct LongCellSpec {
  std::string task;
  int64_t length = 0;
  double depth = 0;       // NaN for cwe and fwe (no needle)
  int64_t set_cell = -1;  // the cell's index in plan.set (text form), -1 when generated
};

// What to evaluate; the cells' samples are generated (or read from the set) when they are
// scored (every rank makes the same ones), so a long grid is never held in memory at once.
struct LongCtxPlan {
  tasks::TaskOptions options;  // [task.<name>], the form applied, haystack_text where used
  std::string form;            // "byte", "token", or "text" (cells read from `set`)
  std::vector<LongCellSpec> cells;
  int64_t samples = 0;  // per generated cell (a set's cells have their own)
  uint64_t seed = 0;
  std::string haystack;  // one line: where the haystacks come from ("" = no essay task)
  std::shared_ptr<const data::LongSet> set;  // eval.longctx_set, opened and checked
  bool empty() const { return cells.empty(); }
};

// The cells of eval.longctx: for each task, its lengths (config::longctx_task_lengths) x
// (needle tasks) the depths of eval.longctx_depths. Byte-form essay haystacks of a byte-text
// run (data.source = "text") are cut from the run's validation text when it holds the
// longest evaluation length, else from the built-in sentences (plan.haystack says which).
// With eval.longctx_set, the set's cells instead, in the file's order: the set is checked
// whole against the model's vocabulary (data::LongSet::open) and its every length against
// the ring (parallel.layout over parallel.cp ranks). Empty when both are off. Errors name
// eval.longctx... or the set's file, and the fix.
LongCtxPlan longctx_plan(const TrainConfig& cfg, const DataFeed& feed);

struct LongCellResult {
  std::string task;
  tasks::LongCategory category = tasks::LongCategory::SingleNeedle;
  int64_t length = 0;
  double depth = 0;  // NaN for cwe and fwe
  tasks::LongScore score;
};

// Every cell of the plan, in order; on_cell(what) after each (progress lines). Collective.
template <class T>
std::vector<LongCellResult> evaluate_longctx(
    Model<T>& model, const LongCtxPlan& plan, const ProcessGrid& grid, LayoutKind layout,
    int64_t batch_rows, const std::function<void(const std::string&)>& on_cell);

// One cell's samples, exactly as evaluate_longctx scores them.
tasks::LongCell longctx_cell(const LongCtxPlan& plan, const LongCellSpec& spec);

// The per-cell numbers the summaries and the run file use.
std::vector<LongRow> longctx_rows(const std::vector<LongCellResult>& cells);

}  // namespace lcr::train
