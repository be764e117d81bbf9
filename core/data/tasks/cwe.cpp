// Common-word extraction, RULER-style: a list of words in which `common` words occur
// `common_freq` times each and every other word at most `rare_freq` times; the answer is
// the common words, in order of first appearance in the list. Layouts (docs/data.md):
//
//   byte   pad + "1. bakodi\n2. tomelu\n..." + "What are the 10 most common words in the
//          list above? The 10 most common words in the list above are: " + "w, w, ..."
//   token  BOS pad (ITEM s s s)... QUERY ANSWER w SEP w ...   (w = three syllable tokens)
//
// The list holds as many items as fit (N); the rest of the length is padding (spaces or
// PAD) at the start. The N items: each common word common_freq times, then rare words
// rare_freq times each, the last rare word filling what is left (1 to rare_freq times),
// shuffled uniformly. Words are distinct three-syllable words (longctx_build.hpp).
#include <algorithm>
#include <sstream>

#include "core/data/tasks/longctx_build.hpp"
#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

using namespace longctx;

class Cwe : public LongTask {
 public:
  Cwe(int64_t seq_len, const CweOptions& o)
      : LongTask(seq_len, o), form_(check_common("cwe", o)), o_(o) {
    require(o.common >= 1 && o.common <= 1000, "task.cwe.common must be in [1, 1000], got ",
            o.common);
    require(o.common_freq >= 2 && o.common_freq <= 100000,
            "task.cwe.common_freq must be in [2, 100000], got ", o.common_freq);
    require(o.rare_freq >= 1 && o.rare_freq < o.common_freq,
            "task.cwe.rare_freq must be in [1, common_freq - 1 = ", o.common_freq - 1, "], got ",
            o.rare_freq, " (the common words must be strictly more frequent)");
    const int64_t fixed =
        static_cast<int64_t>(question().size()) +
        answers_size(std::vector<Seq>(o.common, syllable_word(form_, 0)), answer_separator(form_));
    const int64_t budget = context_budget(form_, seq_len, fixed, 0);
    const int64_t need_items = static_cast<int64_t>(o.common) * o.common_freq;
    items_ = items_fitting(budget);
    if (items_ < need_items) {
      std::ostringstream what;
      what << "cwe (" << form_name(form_) << " form, " << o.common << " common words x "
           << o.common_freq << ")";
      too_short(seq_len, what.str(),
                "the " + std::to_string(need_items) + " list items, question and answers take",
                form_, seq_len - budget + list_size(need_items));
    }
    const int64_t words = o.common + (items_ - need_items + o.rare_freq - 1) / o.rare_freq;
    require(words <= kSyllableWords, "task.seq_len ", seq_len, " is too long for cwe: ", words,
            " distinct words needed, more than the ", kSyllableWords,
            " built-in words; use a shorter seq_len or a larger rare_freq");
    padding_ = budget - list_size(items_);
  }

  std::string name() const override { return "cwe"; }
  std::string description() const override {
    std::ostringstream os;
    os << "common-word extraction (" << form_name(form_) << " form): " << items_ << " items, "
       << o_.common << " words x " << o_.common_freq << ", the others <= " << o_.rare_freq
       << " times; length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return vocab_of(form_); }

  void generate_spans(data::Rng& rng, double /*depth: no needle*/, int32_t* tokens, int32_t* labels,
                      AnswerSpans& spans) const override {
    const int64_t C = o_.common, common_items = C * o_.common_freq;
    const int64_t rare = (items_ - common_items + o_.rare_freq - 1) / o_.rare_freq;
    // Words 0..C-1 are the common ones; the same at every length (a keyed permutation).
    const std::vector<int64_t> words = distinct_indices(rng, C + rare, kSyllableWords);
    std::vector<int64_t> list;  // indices into `words`
    list.reserve(items_);
    for (int64_t w = 0; w < C; ++w) list.insert(list.end(), o_.common_freq, w);
    for (int64_t r = 0; static_cast<int64_t>(list.size()) < items_; ++r)
      for (int32_t k = 0; k < o_.rare_freq && static_cast<int64_t>(list.size()) < items_; ++k)
        list.push_back(C + r);
    for (int64_t i = items_ - 1; i > 0; --i) std::swap(list[i], list[rng.uniform(i + 1)]);

    Seq context = padding(form_, padding_);
    std::vector<Seq> answers;
    std::vector<bool> seen(C, false);
    for (int64_t i = 0; i < items_; ++i) {
      const Seq word = syllable_word(form_, words[list[i]]);
      if (form_ == Form::Byte) {
        append(context, bytes(std::to_string(i + 1) + ". "));
        append(context, word);
        context.push_back('\n');
      } else {
        context.push_back(token_ids::kItem);
        append(context, word);
      }
      if (list[i] < C && !seen[list[i]]) {  // answers in order of first appearance
        seen[list[i]] = true;
        answers.push_back(word);
      }
    }
    write_sequence(form_, context, question(), answers, answer_separator(form_), seq_len(), tokens,
                   labels, spans);
  }

 private:
  // Bytes or tokens of the first n list items.
  int64_t list_size(int64_t n) const {
    if (form_ == Form::Token) return 4 * n;
    int64_t size = 9 * n;  // ". " + six letters + "\n"
    for (int64_t from = 1; from <= n; from *= 10) size += n - from + 1;  // the numbers' digits
    return size;
  }
  int64_t items_fitting(int64_t budget) const {
    int64_t lo = 0, hi = std::max<int64_t>(budget, 0);  // an item takes >= 1 byte or token
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (list_size(mid) <= budget)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }
  Seq question() const {
    if (form_ == Form::Token) return {token_ids::kQuery, token_ids::kAnswer};
    const std::string n = std::to_string(o_.common);
    return bytes("What are the " + n + " most common words in the list above? The " + n +
                 " most common words in the list above are: ");
  }

  Form form_;
  CweOptions o_;
  int64_t items_ = 0;
  int64_t padding_ = 0;
};

}  // namespace

std::unique_ptr<LongTask> make_cwe(int64_t seq_len, const CweOptions& o) {
  return std::make_unique<Cwe>(seq_len, o);
}

}  // namespace lcr::tasks
