#include "core/data/tasks/task.hpp"

#include "core/data/tasks/longctx.hpp"
#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {

data::Rng Task::sample_rng(uint64_t seed, data::Split split, uint64_t index) const {
  // The task's name is part of the key, so two tasks with one seed draw unrelated streams.
  const uint64_t stream =
      data::derive_key(seed, data::fnv1a64(name()), static_cast<uint64_t>(split));
  return data::Rng(data::derive_key(stream, index));
}

data::Batch Task::samples(uint64_t seed, data::Split split, uint64_t first, int64_t count) const {
  require(count >= 1, name(), ": sample count must be >= 1, got ", count);
  data::Batch out(count, seq_len_, vocab_size());
  for (int64_t b = 0; b < count; ++b) {
    data::Rng rng = sample_rng(seed, split, first + static_cast<uint64_t>(b));
    generate(rng, out.tokens_row(b), out.labels_row(b));
  }
  return out;
}

data::Batch Task::batch(uint64_t seed, int64_t step, int dp_rank, int dp_size, int64_t rows) const {
  require(dp_size >= 1 && dp_rank >= 0 && dp_rank < dp_size, name(), ": dp_rank ", dp_rank,
          " is outside [0, dp_size = ", dp_size, ")");
  require(step >= 0 && rows >= 1, name(), ": need step >= 0 and rows >= 1, got step ", step,
          ", rows ", rows);
  const uint64_t first =
      (static_cast<uint64_t>(step) * dp_size + dp_rank) * static_cast<uint64_t>(rows);
  return samples(seed, data::Split::train, first, rows);
}

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"copy_mixture", "passkey", "indirect_indexing",
                                  "flip_flop",    "mqar",    "a5"};
    for (const std::string& l : long_task_names()) n.push_back(l);
    n.push_back("longctx_mix");
    return n;
  }();
  return names;
}

std::unique_ptr<Task> make_task(const std::string& name, const TaskOptions& o) {
  require(o.seq_len >= 1, "task.seq_len must be >= 1, got ", o.seq_len);
  if (name == "copy_mixture") return make_copy_mixture(o.seq_len, o.copy_mixture);
  if (name == "passkey") return make_passkey(o.seq_len, o.passkey);
  if (name == "indirect_indexing") return make_indirect_indexing(o.seq_len, o.indirect_indexing);
  if (name == "flip_flop") return make_flip_flop(o.seq_len, o.flip_flop);
  if (name == "mqar") return make_mqar(o.seq_len, o.mqar);
  if (name == "a5") return make_a5(o.seq_len, o.a5);
  if (is_long_task(name)) return make_long_task(name, o);
  if (name == "longctx_mix") return make_longctx_mix(o);
  std::string list;
  for (const std::string& n : task_names()) list += (list.empty() ? "" : ", ") + n;
  throw_error("unknown task '", name, "'; valid tasks: ", list);
}

double TaskScore::token_accuracy() const {
  return scored_tokens > 0 ? static_cast<double>(correct_tokens) / scored_tokens : 0.0;
}
double TaskScore::sequence_accuracy() const {
  return scored_rows > 0 ? static_cast<double>(correct_rows) / scored_rows : 0.0;
}

TaskScore score_predictions(const data::Batch& batch, const int32_t* predictions) {
  TaskScore s;
  for (int64_t b = 0; b < batch.batch; ++b) {
    const int32_t* labels = batch.labels_row(b);
    const int32_t* pred = predictions + b * batch.seq_len;
    int64_t scored = 0, correct = 0;
    for (int64_t t = 0; t < batch.seq_len; ++t) {
      if (labels[t] == data::kIgnoreLabel) continue;
      ++scored;
      correct += (pred[t] == labels[t]);
    }
    s.scored_tokens += scored;
    s.correct_tokens += correct;
    if (scored > 0) {
      ++s.scored_rows;
      s.correct_rows += (correct == scored);
    }
  }
  return s;
}

}  // namespace lcr::tasks
