#pragma once
// The per-layer, per-head statistics the trainer logs into run.h5's /priors tables
// (docs/run-file.md has the columns): for every scheme the attention entropy, max logit
// and first-token mass (core/model/stats.hpp); GOAT's alpha, beta, per-mode amplitude,
// |beta|/|alpha|, relative prior curve over lags and key prior u(j) over positions; PoPE's
// per-frequency query/key magnitude usage and delta; RoPE's per-pair query/key norms; PaTH's
// beta per KV head (mean, std, min, max over the probe sequence).
//
// Measured on a PROBE forward pass: one full training sequence through a model copy with
// LocalAttention (the attention statistics need every key of a row, which a CP shard does
// not have), run by the writing rank only.
#include <string>
#include <utility>
#include <vector>

#include "core/config/train_config.hpp"
#include "core/io/run_file.hpp"
#include "core/io/run_layout.hpp"
#include "core/model/model.hpp"

namespace lcr::train {

// Lags (and key positions) where the GOAT curves are sampled: every value in [0, 32), then
// about 8 per octave up to max_len - 1 (the longest evaluation length), so the curve shows
// both the fine structure near the diagonal and the extrapolation range.
std::vector<int64_t> prior_lags(int64_t max_len);

// The prior tables' shapes for this config (scheme, layers, heads, lags, ...).
io::PriorShapes prior_shapes(const TrainConfig& cfg);

// The rows of priors/layer_<l> for every layer, from the model's last forward (which must
// have used one LocalAttention segment) and its current parameters.
template <class T>
std::vector<std::pair<std::string, io::Row>> prior_rows(const Model<T>& model,
                                                        const io::PriorShapes& shapes,
                                                        int probe_rows);

}  // namespace lcr::train
