#pragma once
// Long-context evaluation tasks: RULER-style retrieval (niah_*), tracking
// (variable_tracking) and aggregation (cwe, fwe), and the PaTH paper's PhoneBook, as
// deterministic generators whose answers are known as label spans, with a scorer.
//
//   TaskOptions base;                                  // base.niah_multikey.value = "uuid"...
//   for (int64_t L : lengths) for (double d : depths) {
//     LongCell c = long_cell("niah_multikey", base, L, d, 32, seed);
//     ...argmax predictions [32, L] under teacher forcing...
//     total += score_long(c, argmax);                  // token accuracy, all/part match
//   }
//
// Each task is also a Task (make_task(name, ...)), so it can be trained on; generate()
// draws the depth or uses the option's. Layouts, templates, token ids, option defaults,
// depth rules and minimum lengths: docs/data.md, "Long-context evaluation tasks".
//
// Two forms (option `form`):
//   byte   vocabulary 256, ASCII text with RULER-like templates
//   token  the compact vocabulary below, shared by every task (one model can learn them all)
//
// Token ids of the token form:
//   0 PAD     fills what whole items leave over (list tasks), right after BOS
//   1 BOS     first token of every sequence
//   2 NEEDLE  starts a needle or assignment: NEEDLE key IS value
//   3 IS      between a needle's key and its value
//   4 QUERY   starts the question
//   5 ANSWER  ends the question; the answers follow
//   6 SEP     between answers (not scored)
//   7 DASH    between the groups of a uuid
//   8 ITEM    starts a list entry (cwe, fwe, phonebook)
//   9..15     reserved
//   16 + h    hex digit h (0..15); decimal digits are 16..25
//   32 + k    key k (0..255): niah keys, variables, phonebook first and last names
//   288 + w   value word w (0..63)
//   352 + n   noise symbol n (0..63): the haystack
//   416 + s   syllable s (0..69): cwe and fwe words are three syllables
// vocabulary 486.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/batch.hpp"
#include "core/data/rng.hpp"
#include "core/data/tasks/task.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {

namespace token_ids {
constexpr int32_t kPad = 0, kBos = 1, kNeedle = 2, kIs = 3, kQuery = 4, kAnswer = 5, kSep = 6,
                  kDash = 7, kItem = 8;
constexpr int32_t kDigit0 = 16, kKey0 = 32, kValueWord0 = 288, kNoise0 = 352, kSyllable0 = 416;
constexpr int32_t kKeys = 256, kValueWords = 64, kNoise = 64, kSyllables = 70;
constexpr int32_t kVocab = 486;
}  // namespace token_ids

// The RULER / PaTH Fig. 4 grouping of the tasks.
enum class LongCategory { SingleNeedle, MultiNeedle, Aggregation, Tracking, PhoneBook };

// "single_needle", "multi_needle", "aggregation", "tracking", "phonebook".
std::string long_category_name(LongCategory category);

// One answer: the label positions [begin, end), i.e. the positions right before each of the
// answer's tokens, labelled with that token.
struct AnswerSpan {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
using AnswerSpans = std::vector<AnswerSpan>;

class LongTask : public Task {
 public:
  LongCategory category() const;  // long_task_category(name())

  // One sequence and its answer spans, in answer order, using only `rng`. depth < 0: drawn
  // uniform in [0, 1) from rng (training); else the needle depth in [0, 1]. cwe and fwe
  // ignore depth (no draw either). The answer content is drawn first, so sample k of a
  // stream carries the same keys and values at every length and depth (except fwe, whose
  // most frequent words depend on how many words fit).
  virtual void generate_spans(data::Rng& rng, double depth, int32_t* tokens, int32_t* labels,
                              AnswerSpans& spans) const = 0;

  // generate_spans with the options' depth (random_depth: drawn).
  void generate(data::Rng& rng, int32_t* tokens, int32_t* labels) const override;

  // Samples [first, first + count) of the (seed, split) stream at `depth` (< 0: drawn), as
  // Task::samples draws them; spans[b] are row b's.
  data::Batch samples_with_spans(uint64_t seed, data::Split split, uint64_t first, int64_t count,
                                 double depth, std::vector<AnswerSpans>& spans) const;

 protected:
  LongTask(int64_t seq_len, const LongContextOptions& o);
  double option_depth() const { return random_depth_ ? -1.0 : depth_; }

 private:
  bool random_depth_;
  double depth_;
};

// What a long-context task's constructor throws when seq_len cannot hold its fixed parts
// (needles, question, answers; list tasks: the fewest items): the length it needs. Callers
// that try lengths in turn ("all" in a mixture, the evaluation lengths) leave such a task
// out at that length and rethrow every other error.
class TooShort : public Error {
 public:
  TooShort(const std::string& what, int64_t need) : Error(what), need_(need) {}
  int64_t need() const { return need_; }

 private:
  int64_t need_;
};

// The eight task names, in the order above.
const std::vector<std::string>& long_task_names();
bool is_long_task(const std::string& name);
// The task's category; throws for a name that is not a long-context task.
LongCategory long_task_category(const std::string& name);
// Whether task `name` places a needle at a depth: every task but the aggregation ones (cwe,
// fwe), which are evaluated at one depth-free cell per length.
bool long_task_has_depth(const std::string& name);

// Builds a long-context task from its name and its options in `options`; throws for a name
// that is not one (listing them) or invalid options (naming task.<name>.<option>).
std::unique_ptr<LongTask> make_long_task(const std::string& name, const TaskOptions& options);

// The options of long-context task `name` in `o`, as their common part (form, depth).
LongContextOptions& long_task_options(TaskOptions& o, const std::string& name);

// One evaluation cell: `samples` sequences of the validation stream of `seed` at one length
// and depth, with their spans. Sample k uses the same generator key in every cell, so its
// keys and values agree across cells: cells differ by length and depth.
struct LongCell {
  std::string task;
  LongCategory category = LongCategory::SingleNeedle;
  int64_t length = 0;
  double depth = 0.0;
  data::Batch batch;
  std::vector<AnswerSpans> spans;  // [samples]
};
LongCell long_cell(const std::string& task, const TaskOptions& base, int64_t length, double depth,
                   int64_t samples, uint64_t seed);
// long_cell for every (length, depth), length-major.
std::vector<LongCell> long_grid(const std::string& task, const TaskOptions& base,
                                const std::vector<int64_t>& lengths,
                                const std::vector<double>& depths, int64_t samples, uint64_t seed);

// Scores of predictions under teacher forcing (argmax token per position, greedy decoding of
// each answer span given the right prefix). Per row: token accuracy over the answer
// positions; all-match = 1 if every span is entirely right; part-match = the fraction of
// spans entirely right (RULER's string_match_all, on spans: the fraction of a sample's
// reference answers found). Sums, so ranks and cells merge with +=.
struct LongScore {
  int64_t rows = 0;
  int64_t scored_tokens = 0;
  int64_t correct_tokens = 0;
  double all_match_sum = 0.0;
  double part_match_sum = 0.0;

  double token_accuracy() const;  // correct_tokens / scored_tokens (0 when none)
  double all_match() const;       // all_match_sum / rows (0 when no rows)
  double part_match() const;      // part_match_sum / rows
  LongScore& operator+=(const LongScore& other);
};

// predictions: [batch.batch, batch.seq_len]; spans[b] are row b's. Positions outside the
// spans do not count.
LongScore score_spans(const data::Batch& batch, const std::vector<AnswerSpans>& spans,
                      const int32_t* predictions);
LongScore score_long(const LongCell& cell, const int32_t* predictions);

}  // namespace lcr::tasks
