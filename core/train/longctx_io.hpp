#pragma once
// The run file's eval/longctx table (docs/run-file.md): one row per (step, task, length,
// depth) cell; the task and the category are stored as codes (int64) whose names are the
// group's attributes task_names and category_names (comma-separated; the codes are
// positions in long_task_names() and LongCategory).
#include <cstdint>
#include <vector>

#include "core/io/run_file.hpp"
#include "core/train/longctx_summary.hpp"

namespace lcr::train {

// Adds the table and its name attributes (run_layout does, when eval.longctx is on).
void add_longctx_table(io::RunLayout& layout);

// One cell as a row of the table.
io::Row longctx_row(const LongRow& r);

// The rows of eval/longctx logged at `step` (-1: the newest step), names decoded with the
// group's attributes; {} when the file has none. *step_out receives the step read.
std::vector<LongRow> read_longctx_rows(const io::RunReader& r, int64_t step = -1,
                                       int64_t* step_out = nullptr);

}  // namespace lcr::train
