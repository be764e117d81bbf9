#include "core/train/eval_rows.hpp"

#include <algorithm>

#include "core/model/ring_runner.hpp"
#include "parallel/ring/shard.hpp"

namespace lcr::train {
namespace {

// Runs rows `ids` of b (the ones this DP replica owns) through the model and adds this
// rank's shard of their sums into s.
template <class T>
void score_rows(Model<T>& model, const data::Batch& b, const std::vector<int64_t>& ids,
                const ProcessGrid& grid, LayoutKind kind, RowSums& s, const PositionHook& hook) {
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
  std::vector<int64_t> positions;  // global position of every local row (cp > 1)
  if (grid.cp_size() > 1) {
    SeqLayout layout(kind, n, grid.cp_size());
    ltok = shard_view(tok, layout, grid.cp_rank());
    llab = shard_view(lab, layout, grid.cp_rank());
    positions = layout.positions(grid.cp_rank());
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
      if (hook) hook(int64_t(id), positions.empty() ? t : positions[size_t(t)], best == label);
    }
  }
}

}  // namespace

template <class T>
RowSums score_batch(Model<T>& model, const data::Batch& b, const ProcessGrid& grid, LayoutKind kind,
                    int64_t batch_rows, const PositionHook& hook) {
  RowSums s(size_t(b.batch));
  std::vector<int64_t> mine;
  for (int64_t i = grid.dp_rank(); i < b.batch; i += grid.dp_size()) mine.push_back(i);
  for (size_t c = 0; c < mine.size(); c += size_t(batch_rows)) {
    const size_t e = std::min(mine.size(), c + size_t(batch_rows));
    score_rows(model, b, std::vector<int64_t>(mine.begin() + c, mine.begin() + e), grid, kind, s,
               hook);
  }
  Communicator& w = grid.world();
  w.allreduce_sum(s.nll.data(), s.nll.size());
  w.allreduce_sum(s.scored.data(), s.scored.size());
  w.allreduce_sum(s.correct.data(), s.correct.size());
  return s;
}

template RowSums score_batch<float>(Model<float>&, const data::Batch&, const ProcessGrid&,
                                    LayoutKind, int64_t, const PositionHook&);
template RowSums score_batch<double>(Model<double>&, const data::Batch&, const ProcessGrid&,
                                     LayoutKind, int64_t, const PositionHook&);

}  // namespace lcr::train
