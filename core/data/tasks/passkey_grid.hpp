#pragma once
// The passkey evaluation grid: context lengths x needle depths, a fixed number of samples
// per cell, all deterministic. Every cell draws from the validation stream of one seed,
// so sample k carries the same key in every cell: cells differ only by length and depth.
//
//   PasskeyGridOptions g;
//   g.lengths = data::extrapolation_lengths(1024);   // 1K .. 16K
//   g.depths = evenly_spaced_depths(11);              // 0, 0.1, ..., 1
//   for (const PasskeyCell& c : passkey_grid(g)) { ...run the model on c.batch, then
//     score_predictions(c.batch, argmax) -> span-token accuracy of the cell... }
#include <cstdint>
#include <vector>

#include "core/data/batch.hpp"

namespace lcr::tasks {

struct PasskeyGridOptions {
  std::vector<int64_t> lengths;  // sequence lengths L (each >= the passkey minimum)
  std::vector<double> depths;    // needle depth fractions in [0, 1]
  int64_t samples_per_cell = 8;
  uint64_t seed = 0;
  int32_t key_digits = 8;
};

struct PasskeyCell {
  int64_t length = 0;
  double depth = 0.0;
  data::Batch batch;  // [samples_per_cell, length], labels on the key digits
};

// `count` depths evenly spaced over [0, 1] (count = 1 gives {0.5}).
std::vector<double> evenly_spaced_depths(int count);

// One cell; the grid below is these cells, length-major.
PasskeyCell passkey_cell(int64_t length, double depth, int64_t samples, uint64_t seed,
                         int32_t key_digits = 8);

std::vector<PasskeyCell> passkey_grid(const PasskeyGridOptions& options);

}  // namespace lcr::tasks
