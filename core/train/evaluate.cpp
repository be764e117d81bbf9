#include "core/train/evaluate.hpp"

#include <spdlog/spdlog.h>

#include <cmath>
#include <string>

#include "core/data/tasks/passkey_grid.hpp"
#include "core/train/eval_rows.hpp"
#include "core/train/progress.hpp"
#include "kernels/base/error.hpp"

namespace lcr::train {

std::vector<PasskeyCellSet> passkey_sets(const TrainConfig& cfg, int32_t model_vocab) {
  std::vector<PasskeyCellSet> out;
  if (!cfg.eval.passkey) return out;
  require(model_vocab >= 256, "eval.passkey = true needs a byte-level model (vocabulary >= 256), ",
          "this one has ", model_vocab, " tokens (data.source = \"", cfg.data.source,
          "\"); set eval.passkey = false");
  const auto depths = tasks::evenly_spaced_depths(cfg.eval.passkey_depths);
  for (int64_t n : config::eval_lengths(cfg)) {
    for (double d : depths) {
      try {
        auto c = tasks::passkey_cell(n, d, cfg.eval.passkey_samples, uint64_t(cfg.train.seed),
                                     cfg.eval.passkey_digits);
        out.push_back({c.length, c.depth, std::move(c.batch)});
      } catch (const Error&) {
        break;  // this length is too short for the needle and question; longer ones may fit
      }
    }
  }
  require(!out.empty(), "eval.passkey = true but no evaluation length (", cfg.train.seq_len, " .. ",
          cfg.train.seq_len * cfg.eval.max_length_factor,
          ") holds the passkey prompt; raise train.seq_len or eval.max_length_factor, or set "
          "eval.passkey = false");
  return out;
}

template <class T>
EvalResults evaluate(Model<T>& model, const std::vector<EvalSet>& sets,
                     const std::vector<PasskeyCellSet>& passkey, const LongCtxPlan& longctx,
                     const ProcessGrid& grid, LayoutKind layout, int64_t batch_rows) {
  EvalResults res;
  // A line when a part (a length, a passkey or long-context cell) ends 5 s or more after
  // the last.
  LogThrottle progress(grid.world().rank() == 0);
  const size_t parts = sets.size() + passkey.size() + longctx.cells.size();
  size_t done = 0;
  auto part_done = [&](const std::string& what) {
    ++done;
    if (progress.due())
      spdlog::info("eval: {} done ({}/{} parts, {:.0f} s)", what, done, parts, progress.elapsed());
  };
  for (const EvalSet& set : sets) {
    const RowSums s = score_batch(model, set.batch, grid, layout, batch_rows);
    LengthResult r;
    r.length = set.length;
    double nll = 0, scored = 0, correct = 0, rows = 0, rows_right = 0;
    for (size_t i = 0; i < s.nll.size(); ++i) {
      nll += s.nll[i];
      scored += s.scored[i];
      correct += s.correct[i];
      if (s.scored[i] > 0) {
        rows += 1;
        rows_right += s.correct[i] == s.scored[i] ? 1 : 0;
      }
    }
    r.loss = scored > 0 ? nll / scored : std::nan("");
    r.token_accuracy = scored > 0 ? correct / scored : std::nan("");
    r.sequence_accuracy = rows > 0 ? rows_right / rows : std::nan("");
    res.lengths.push_back(r);
    part_done("L=" + std::to_string(set.length));
  }
  for (const PasskeyCellSet& cell : passkey) {
    const RowSums s = score_batch(model, cell.batch, grid, layout, batch_rows);
    double rows = 0, right = 0;
    for (size_t i = 0; i < s.nll.size(); ++i)
      if (s.scored[i] > 0) {
        rows += 1;
        right += s.correct[i] == s.scored[i] ? 1 : 0;
      }
    res.passkey.push_back({cell.length, cell.depth, rows > 0 ? right / rows : std::nan("")});
    part_done("passkey L=" + std::to_string(cell.length) + " depth " +
              std::to_string(cell.depth).substr(0, 4));
  }
  res.longctx = evaluate_longctx(model, longctx, grid, layout, batch_rows, part_done);
  res.longctx_form = longctx.form;
  return res;
}

template EvalResults evaluate<float>(Model<float>&, const std::vector<EvalSet>&,
                                     const std::vector<PasskeyCellSet>&, const LongCtxPlan&,
                                     const ProcessGrid&, LayoutKind, int64_t);
template EvalResults evaluate<double>(Model<double>&, const std::vector<EvalSet>&,
                                      const std::vector<PasskeyCellSet>&, const LongCtxPlan&,
                                      const ProcessGrid&, LayoutKind, int64_t);

}  // namespace lcr::train
