#pragma once
// Evaluation of a model on fixed sets (DESIGN.md section 2, docs/training.md):
//   perplexity vs length   mean NLL of the scored labels at L, 2L, ... (text: validation
//                          windows; tasks: validation sequences), ppl = exp(NLL)
//   task accuracy          tasks: token accuracy on scored positions and the fraction of
//                          sequences entirely right, per length
//   passkey grid           byte-level models: fraction of samples whose key digits are all
//                          predicted (argmax) right, per (length, depth)
//   long-context tasks     eval.longctx: per (task, length, depth) cell, span-level scores
//                          (eval_longctx.hpp)
// Collective over the world: the DP replicas split the sequences (row i goes to replica
// i % dp), each replica's CP ranks run the sequence through the ring (every length is a
// multiple of the training length, so the layout always fits), and one all-reduce sums
// the per-sequence numbers. Every rank returns the same results.
#include <cstdint>
#include <vector>

#include "core/model/model.hpp"
#include "core/train/data_feed.hpp"
#include "core/train/eval_longctx.hpp"
#include "parallel/comm/process_grid.hpp"
#include "parallel/ring/layout.hpp"

namespace lcr::train {

struct LengthResult {
  int64_t length = 0;
  double loss = 0;  // mean NLL over scored positions (nats)
  double token_accuracy = 0;
  double sequence_accuracy = 0;
};

struct PasskeyResult {
  int64_t length = 0;
  double depth = 0;
  double accuracy = 0;  // exact-match fraction
};

struct EvalResults {
  std::vector<LengthResult> lengths;
  std::vector<PasskeyResult> passkey;
  std::vector<LongCellResult> longctx;  // in the plan's cell order
  std::string longctx_form;             // "byte" or "token" ("" when off)
};

struct PasskeyCellSet {
  int64_t length = 0;
  double depth = 0;
  data::Batch batch;
};

// The passkey cells of the config: lengths = the evaluation lengths the key fits in (an
// Error naming eval.passkey when none does or the model is not byte-level).
std::vector<PasskeyCellSet> passkey_sets(const TrainConfig& cfg, int32_t model_vocab);

template <class T>
EvalResults evaluate(Model<T>& model, const std::vector<EvalSet>& sets,
                     const std::vector<PasskeyCellSet>& passkey, const LongCtxPlan& longctx,
                     const ProcessGrid& grid, LayoutKind layout, int64_t batch_rows);

}  // namespace lcr::train
