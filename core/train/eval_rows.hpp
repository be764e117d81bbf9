#pragma once
// The collective scoring every evaluation runs (evaluate.hpp, eval_longctx.hpp): the rows of
// a batch split over the DP replicas (row i to replica i % dp) in chunks of batch_rows, each
// replica's CP ranks running the rows through the ring, and the per-row sums all-reduced
// over the world, so every rank returns the same numbers.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/data/batch.hpp"
#include "core/model/model.hpp"
#include "parallel/comm/process_grid.hpp"
#include "parallel/ring/layout.hpp"

namespace lcr::train {

// Per-row sums over the scored positions (label >= 0): NLL, count, argmax hits.
struct RowSums {
  std::vector<double> nll, scored, correct;  // [rows], summed over the world
  explicit RowSums(size_t n) : nll(n, 0.0), scored(n, 0.0), correct(n, 0.0) {}
};

// Called on the rank that computed it for every scored position of the rows this rank
// scores: the row, its global position in the sequence, and whether the argmax was right.
// What the caller gathers this way is its own to all-reduce.
using PositionHook = std::function<void(int64_t row, int64_t position, bool right)>;

template <class T>
RowSums score_batch(Model<T>& model, const data::Batch& b, const ProcessGrid& grid,
                    LayoutKind layout, int64_t batch_rows, const PositionHook& hook = nullptr);

}  // namespace lcr::train
