#pragma once
// Summaries of the long-context cells (eval/longctx rows; docs/training.md, "Long-context
// evaluation"), the same for `lcr eval`, the trainer's log line and `lcr inspect`:
//
//   score of a cell      part_match: the mean over its samples of the fraction of the
//                        sample's answers reproduced exactly (every token of the answer
//                        span right) -- RULER's string_match_all on these tasks; all_match
//                        (every answer right) is reported beside it
//   task at a length     the mean over its depths
//   category at a length the mean over its tasks evaluated at that length
//   average at a length  the mean over the categories evaluated at that length
//   effective length     the longest evaluated length L with average >= threshold at L and
//                        at every shorter evaluated length (0 when the shortest is below)
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lcr::train {

// One cell (one row of eval/longctx).
struct LongRow {
  std::string task, category;
  int64_t length = 0;
  double depth = 0;  // NaN: cwe and fwe (no needle)
  int64_t samples = 0;
  double token_accuracy = 0, all_match = 0, part_match = 0;
};

struct LongSummary {
  double threshold = 0;
  std::vector<int64_t> lengths;         // increasing; each has at least one cell
  std::vector<std::string> tasks;       // present ones, in long_task_names() order
  std::vector<std::string> categories;  // present ones, in LongCategory order
  // [name] -> [length index]; NaN where the task (category) has no cell at that length.
  std::map<std::string, std::vector<double>> task_score, task_all_match, task_token_accuracy;
  std::map<std::string, std::vector<double>> category_score;
  std::vector<double> average;   // [length index]
  int64_t effective_length = 0;  // 0: below the threshold at the shortest length
};

LongSummary summarize_longctx(const std::vector<LongRow>& rows, double threshold);

// The rule above on its own: lengths increasing, average[i] at lengths[i].
int64_t effective_length(const std::vector<int64_t>& lengths, const std::vector<double>& average,
                         double threshold);

// The tables as text, each line starting with `indent`: score per task and length, per
// category and length, the average, and the effective length with its rule.
std::string format_longctx(const LongSummary& s, const std::string& indent);

// One line for the trainer's log: "longctx avg 0.91@256 0.40@512 | effective length 256".
std::string longctx_line(const LongSummary& s);

}  // namespace lcr::train
