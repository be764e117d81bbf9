#include "core/train/evaluate.hpp"

#include <spdlog/spdlog.h>

#include <cmath>
#include <string>

#include "core/data/tasks/passkey_grid.hpp"
#include "core/model/ring_runner.hpp"
#include "core/train/progress.hpp"
#include "kernels/base/error.hpp"
#include "parallel/ring/shard.hpp"

namespace lcr::train {
namespace {

// Per-sequence sums over its scored positions: NLL, count, argmax hits.
struct RowSums {
  std::vector<double> nll, scored, correct;  // [rows], summed over the world at the end
  explicit RowSums(size_t n) : nll(n, 0.0), scored(n, 0.0), correct(n, 0.0) {}
};

// Runs rows [first, first + count) of b (the ones this DP replica owns are picked by the
// caller) through the model and adds this rank's shard of their sums into s at rows `ids`.
template <class T>
void score_rows(Model<T>& model, const data::Batch& b, const std::vector<int64_t>& ids,
                const ProcessGrid& grid, LayoutKind kind, RowSums& s) {
  const int64_t n = b.seq_len, rows = int64_t(ids.size());
  View2<int32_t> tok("eval_tokens", rows, n), lab("eval_labels", rows, n);
  auto ht = Kokkos::create_mirror_view(tok);
  auto hl = Kokkos::create_mirror_view(lab);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < n; ++t) {
      ht(r, t) = b.tokens_row(ids[size_t(r)])[t];
      hl(r, t) = b.labels_row(ids[size_t(r)])[t];
    }
  Kokkos::deep_copy(tok, ht);
  Kokkos::deep_copy(lab, hl);

  View2<int32_t> ltok = tok, llab = lab;
  if (grid.cp_size() > 1) {
    SeqLayout layout(kind, n, grid.cp_size());
    ltok = shard_view(tok, layout, grid.cp_rank());
    llab = shard_view(lab, layout, grid.cp_rank());
    RingAttention<T> ring(grid.cp(), layout);
    model.forward(ltok, llab, ring, 1.0);
  } else {
    LocalAttention<T> local;
    model.forward(ltok, llab, local, 1.0);
  }
  const int64_t Ll = ltok.extent(1), V = model.layout().V();
  const auto& acts = model.activations();
  auto loss = Kokkos::create_mirror_view_and_copy(HostSpace(), acts.row_loss);
  auto logits = Kokkos::create_mirror_view_and_copy(HostSpace(), acts.logits);
  auto y = Kokkos::create_mirror_view_and_copy(HostSpace(), llab);
  for (int64_t r = 0; r < rows; ++r) {
    const size_t id = size_t(ids[size_t(r)]);
    for (int64_t t = 0; t < Ll; ++t) {
      const int32_t label = y(r, t);
      if (label < 0) continue;
      const int64_t row = r * Ll + t;
      int64_t best = 0;
      for (int64_t v = 1; v < V; ++v)
        if (logits(row, v) > logits(row, best)) best = v;
      s.nll[id] += double(loss(row));
      s.scored[id] += 1;
      s.correct[id] += best == label ? 1 : 0;
    }
  }
}

// Every row of b, split over the DP replicas in chunks of batch_rows; sums over the world.
template <class T>
RowSums score_batch(Model<T>& model, const data::Batch& b, const ProcessGrid& grid, LayoutKind kind,
                    int64_t batch_rows) {
  RowSums s(size_t(b.batch));
  std::vector<int64_t> mine;
  for (int64_t i = grid.dp_rank(); i < b.batch; i += grid.dp_size()) mine.push_back(i);
  for (size_t c = 0; c < mine.size(); c += size_t(batch_rows)) {
    const size_t e = std::min(mine.size(), c + size_t(batch_rows));
    score_rows(model, b, std::vector<int64_t>(mine.begin() + c, mine.begin() + e), grid, kind, s);
  }
  Communicator& w = grid.world();
  w.allreduce_sum(s.nll.data(), s.nll.size());
  w.allreduce_sum(s.scored.data(), s.scored.size());
  w.allreduce_sum(s.correct.data(), s.correct.size());
  return s;
}

}  // namespace

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
                     const std::vector<PasskeyCellSet>& passkey, const ProcessGrid& grid,
                     LayoutKind layout, int64_t batch_rows) {
  EvalResults res;
  // A line when a part (one length, one passkey cell) ends 5 s or more after the last.
  LogThrottle progress(grid.world().rank() == 0);
  const size_t parts = sets.size() + passkey.size();
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
  return res;
}

template EvalResults evaluate<float>(Model<float>&, const std::vector<EvalSet>&,
                                     const std::vector<PasskeyCellSet>&, const ProcessGrid&,
                                     LayoutKind, int64_t);
template EvalResults evaluate<double>(Model<double>&, const std::vector<EvalSet>&,
                                      const std::vector<PasskeyCellSet>&, const ProcessGrid&,
                                      LayoutKind, int64_t);

}  // namespace lcr::train
