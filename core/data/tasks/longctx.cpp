// Long-context tasks: the LongTask base, the registry, evaluation cells and span scoring
// (longctx.hpp). The generators are in niah.cpp, variable_tracking.cpp, cwe.cpp, fwe.cpp
// and phonebook.cpp; their shared parts in longctx_build.cpp.
#include "core/data/tasks/longctx.hpp"

#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {

std::string long_category_name(LongCategory category) {
  switch (category) {
    case LongCategory::SingleNeedle:
      return "single_needle";
    case LongCategory::MultiNeedle:
      return "multi_needle";
    case LongCategory::Aggregation:
      return "aggregation";
    case LongCategory::Tracking:
      return "tracking";
    case LongCategory::PhoneBook:
      return "phonebook";
  }
  return "unknown";
}

LongTask::LongTask(int64_t seq_len, const LongContextOptions& o)
    : Task(seq_len), random_depth_(o.random_depth), depth_(o.depth) {}

LongCategory LongTask::category() const { return long_task_category(name()); }

void LongTask::generate(data::Rng& rng, int32_t* tokens, int32_t* labels) const {
  AnswerSpans spans;
  generate_spans(rng, option_depth(), tokens, labels, spans);
}

data::Batch LongTask::samples_with_spans(uint64_t seed, data::Split split, uint64_t first,
                                         int64_t count, double depth,
                                         std::vector<AnswerSpans>& spans) const {
  require(count >= 1, name(), ": sample count must be >= 1, got ", count);
  require(depth < 0.0 || depth <= 1.0, name(),
          ": depth must be in [0, 1] (or < 0 to draw it), got ", depth);
  data::Batch out(count, seq_len(), vocab_size());
  spans.assign(count, {});
  for (int64_t b = 0; b < count; ++b) {
    data::Rng rng = sample_rng(seed, split, first + static_cast<uint64_t>(b));
    generate_spans(rng, depth, out.tokens_row(b), out.labels_row(b), spans[b]);
  }
  return out;
}

const std::vector<std::string>& long_task_names() {
  static const std::vector<std::string> names = {
      "niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "variable_tracking",
      "cwe",         "fwe",           "phonebook"};
  return names;
}

bool is_long_task(const std::string& name) {
  for (const std::string& n : long_task_names())
    if (n == name) return true;
  return false;
}

namespace {

[[noreturn]] void unknown_long_task(const std::string& name) {
  std::string list;
  for (const std::string& n : long_task_names()) list += (list.empty() ? "" : ", ") + n;
  throw_error("unknown long-context task '", name, "'; valid tasks: ", list);
}

}  // namespace

LongCategory long_task_category(const std::string& name) {
  if (name == "niah_single") return LongCategory::SingleNeedle;
  if (name == "niah_multikey" || name == "niah_multivalue" || name == "niah_multiquery")
    return LongCategory::MultiNeedle;
  if (name == "variable_tracking") return LongCategory::Tracking;
  if (name == "cwe" || name == "fwe") return LongCategory::Aggregation;
  if (name == "phonebook") return LongCategory::PhoneBook;
  unknown_long_task(name);
}

bool long_task_has_depth(const std::string& name) {
  return long_task_category(name) != LongCategory::Aggregation;
}

LongContextOptions& long_task_options(TaskOptions& o, const std::string& name) {
  if (name == "niah_single") return o.niah_single;
  if (name == "niah_multikey") return o.niah_multikey;
  if (name == "niah_multivalue") return o.niah_multivalue;
  if (name == "niah_multiquery") return o.niah_multiquery;
  if (name == "variable_tracking") return o.variable_tracking;
  if (name == "cwe") return o.cwe;
  if (name == "fwe") return o.fwe;
  if (name == "phonebook") return o.phonebook;
  unknown_long_task(name);
}

std::unique_ptr<LongTask> make_long_task(const std::string& name, const TaskOptions& o) {
  if (!is_long_task(name)) unknown_long_task(name);
  require(o.seq_len >= 1, "task.seq_len must be >= 1, got ", o.seq_len);
  if (name == "niah_single") return make_niah(name, o.seq_len, o.niah_single);
  if (name == "niah_multikey") return make_niah(name, o.seq_len, o.niah_multikey);
  if (name == "niah_multivalue") return make_niah(name, o.seq_len, o.niah_multivalue);
  if (name == "niah_multiquery") return make_niah(name, o.seq_len, o.niah_multiquery);
  if (name == "variable_tracking") return make_variable_tracking(o.seq_len, o.variable_tracking);
  if (name == "cwe") return make_cwe(o.seq_len, o.cwe);
  if (name == "fwe") return make_fwe(o.seq_len, o.fwe);
  return make_phonebook(o.seq_len, o.phonebook);
}

LongCell long_cell(const std::string& task, const TaskOptions& base, int64_t length, double depth,
                   int64_t samples, uint64_t seed) {
  require(depth >= 0.0 && depth <= 1.0, "long_cell: depth must be in [0, 1], got ", depth);
  require(samples >= 1, "long_cell: samples per cell must be >= 1, got ", samples);
  TaskOptions o = base;
  o.seq_len = length;
  LongContextOptions& common = long_task_options(o, task);
  common.random_depth = false;
  common.depth = depth;
  const std::unique_ptr<LongTask> t = make_long_task(task, o);
  LongCell cell;
  cell.task = task;
  cell.category = t->category();
  cell.length = length;
  cell.depth = depth;
  cell.batch = t->samples_with_spans(seed, data::Split::validation, 0, samples, depth, cell.spans);
  return cell;
}

std::vector<LongCell> long_grid(const std::string& task, const TaskOptions& base,
                                const std::vector<int64_t>& lengths,
                                const std::vector<double>& depths, int64_t samples, uint64_t seed) {
  require(!lengths.empty() && !depths.empty(),
          "long_grid: needs at least one length and one depth");
  std::vector<LongCell> cells;
  for (int64_t length : lengths)
    for (double depth : depths)
      cells.push_back(long_cell(task, base, length, depth, samples, seed));
  return cells;
}

// ---------------------------------------------------------------------------------------
// Scoring

double LongScore::token_accuracy() const {
  return scored_tokens > 0 ? static_cast<double>(correct_tokens) / scored_tokens : 0.0;
}
double LongScore::all_match() const { return rows > 0 ? all_match_sum / rows : 0.0; }
double LongScore::part_match() const { return rows > 0 ? part_match_sum / rows : 0.0; }

LongScore& LongScore::operator+=(const LongScore& o) {
  rows += o.rows;
  scored_tokens += o.scored_tokens;
  correct_tokens += o.correct_tokens;
  all_match_sum += o.all_match_sum;
  part_match_sum += o.part_match_sum;
  return *this;
}

LongScore score_spans(const data::Batch& batch, const std::vector<AnswerSpans>& spans,
                      const int32_t* predictions) {
  require(static_cast<int64_t>(spans.size()) == batch.batch, "score_spans: ", spans.size(),
          " span lists for a batch of ", batch.batch, " rows");
  LongScore s;
  for (int64_t b = 0; b < batch.batch; ++b) {
    const int32_t* labels = batch.labels_row(b);
    const int32_t* pred = predictions + b * batch.seq_len;
    int64_t right_spans = 0;
    for (const AnswerSpan& span : spans[b]) {
      require(span.begin >= 0 && span.begin < span.end && span.end <= batch.seq_len,
              "score_spans: span [", span.begin, ", ", span.end, ") of row ", b, " is outside [0, ",
              batch.seq_len, ")");
      int64_t right = 0;
      for (int64_t t = span.begin; t < span.end; ++t) right += pred[t] == labels[t];
      s.scored_tokens += span.size();
      s.correct_tokens += right;
      right_spans += right == span.size();
    }
    const int64_t n = static_cast<int64_t>(spans[b].size());
    ++s.rows;
    s.all_match_sum += (n > 0 && right_spans == n) ? 1.0 : 0.0;
    s.part_match_sum += n > 0 ? static_cast<double>(right_spans) / n : 0.0;
  }
  return s;
}

LongScore score_long(const LongCell& cell, const int32_t* predictions) {
  return score_spans(cell.batch, cell.spans, predictions);
}

}  // namespace lcr::tasks
