#include "core/data/tasks/passkey_grid.hpp"

#include "core/data/tasks/task.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {

std::vector<double> evenly_spaced_depths(int count) {
  require(count >= 1, "passkey grid: depth count must be >= 1, got ", count);
  if (count == 1) return {0.5};
  std::vector<double> out(count);
  for (int i = 0; i < count; ++i) out[i] = static_cast<double>(i) / (count - 1);
  return out;
}

PasskeyCell passkey_cell(int64_t length, double depth, int64_t samples, uint64_t seed,
                         int32_t key_digits) {
  require(samples >= 1, "passkey grid: samples per cell must be >= 1, got ", samples);
  TaskOptions opt;
  opt.seq_len = length;
  opt.passkey.key_digits = key_digits;
  opt.passkey.random_depth = false;
  opt.passkey.depth = depth;
  const std::unique_ptr<Task> task = make_task("passkey", opt);
  PasskeyCell cell;
  cell.length = length;
  cell.depth = depth;
  cell.batch = task->samples(seed, data::Split::validation, 0, samples);
  return cell;
}

std::vector<PasskeyCell> passkey_grid(const PasskeyGridOptions& o) {
  require(!o.lengths.empty() && !o.depths.empty(),
          "passkey grid: needs at least one length and one depth");
  std::vector<PasskeyCell> cells;
  for (int64_t length : o.lengths)
    for (double depth : o.depths)
      cells.push_back(passkey_cell(length, depth, o.samples_per_cell, o.seed, o.key_digits));
  return cells;
}

}  // namespace lcr::tasks
