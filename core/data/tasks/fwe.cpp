// Frequent-word extraction, RULER-style: words drawn from a Zipf distribution; the answer
// is the `answers` most frequent words, most frequent first. Layouts (docs/data.md):
//
//   byte   pad + "bakodi tomelu bakodi ... " + "What are the 3 most frequent words in the
//          text above? The 3 most frequent words in the text above, most frequent first,
//          are: " + "w, w, w"
//   token  BOS pad (ITEM s s s)... QUERY ANSWER w SEP w SEP w   (w = three syllable tokens)
//
// N = as many words as fit, the rest padding at the start. Counts: N i.i.d. draws of a
// rank r in 1..N with P(r) proportional to r^-alpha, rank r a distinct word. So that the
// answer is well defined, the counts, sorted (ties by rank), are then repaired: the top
// `answers` counts are raised to be strictly decreasing and strictly above every other
// count (c_k = max(c_k, c_{k+1} + 1) from the bottom up), the occurrences taken from the
// rarest other words first; if the others hold too few, the top counts become the
// staircase (a - k) + q (+1 for the first r) with N in total and the others none. Then the
// N words are shuffled uniformly.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/data/tasks/longctx_build.hpp"
#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

using namespace longctx;

class Fwe : public LongTask {
 public:
  Fwe(int64_t seq_len, const FweOptions& o)
      : LongTask(seq_len, o), form_(check_common("fwe", o)), o_(o) {
    require(std::isfinite(o.alpha) && o.alpha > 0.0 && o.alpha <= 100.0,
            "task.fwe.alpha must be in (0, 100], got ", o.alpha);
    require(o.answers >= 1 && o.answers <= 100, "task.fwe.answers must be in [1, 100], got ",
            o.answers);
    const int64_t a = o.answers;
    const int64_t fixed =
        static_cast<int64_t>(question().size()) +
        answers_size(std::vector<Seq>(a, syllable_word(form_, 0)), answer_separator(form_));
    const int64_t budget = context_budget(form_, seq_len, fixed, 0);
    const int64_t item = form_ == Form::Byte ? 7 : 4;  // "bakodi " or ITEM s s s
    words_ = std::max<int64_t>(budget, 0) / item;
    // Enough words for a strict staircase a, a-1, ..., 1, and one more than the answers.
    const int64_t need = std::max(a * (a + 1) / 2, a + 1);
    if (words_ < need) {
      std::ostringstream what;
      what << "fwe (" << form_name(form_) << " form, " << a << " answers)";
      too_short(seq_len, what.str(),
                "the " + std::to_string(need) + " words, question and answers take", form_,
                seq_len - budget + need * item);
    }
    require(words_ <= kSyllableWords, "task.seq_len ", seq_len, " is too long for fwe: ", words_,
            " words, more than the ", kSyllableWords, " built-in words");
    padding_ = budget - words_ * item;
    cdf_.resize(words_);
    double sum = 0.0;
    for (int64_t r = 0; r < words_; ++r) cdf_[r] = sum += std::pow(double(r + 1), -o.alpha);
    for (double& c : cdf_) c /= sum;
  }

  std::string name() const override { return "fwe"; }
  std::string description() const override {
    std::ostringstream os;
    os << "frequent-word extraction (" << form_name(form_) << " form): " << words_
       << " Zipf words (alpha " << o_.alpha << "), the " << o_.answers
       << " most frequent asked for; length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return vocab_of(form_); }

  void generate_spans(data::Rng& rng, double /*depth: no needle*/, int32_t* tokens, int32_t* labels,
                      AnswerSpans& spans) const override {
    const int64_t n = words_, a = o_.answers;
    const std::vector<int64_t> word_of_rank = distinct_indices(rng, n, kSyllableWords);
    std::vector<int64_t> count(n, 0);
    for (int64_t i = 0; i < n; ++i) {
      const double u = rng.uniform01();
      const int64_t r = std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
      ++count[std::min(r, n - 1)];
    }
    std::vector<int64_t> rank(n);  // ranks by count, descending; ties: lower rank first
    for (int64_t r = 0; r < n; ++r) rank[r] = r;
    std::stable_sort(rank.begin(), rank.end(),
                     [&](int64_t x, int64_t y) { return count[x] > count[y]; });
    std::vector<int64_t> c(n);
    for (int64_t k = 0; k < n; ++k) c[k] = count[rank[k]];
    repair(c, a);

    std::vector<int64_t> list;  // the words, shuffled
    list.reserve(n);
    for (int64_t k = 0; k < n; ++k) list.insert(list.end(), c[k], word_of_rank[rank[k]]);
    for (int64_t i = n - 1; i > 0; --i) std::swap(list[i], list[rng.uniform(i + 1)]);
    Seq context = padding(form_, padding_);
    for (int64_t w : list) {
      if (form_ == Form::Token) context.push_back(token_ids::kItem);
      append(context, syllable_word(form_, w));
      if (form_ == Form::Byte) context.push_back(' ');
    }
    std::vector<Seq> answers;
    for (int64_t k = 0; k < a; ++k) answers.push_back(syllable_word(form_, word_of_rank[rank[k]]));
    write_sequence(form_, context, question(), answers, answer_separator(form_), seq_len(), tokens,
                   labels, spans);
  }

 private:
  // c: counts sorted descending, summing to N. Makes c[0] > ... > c[a-1] > c[k] for k >= a,
  // keeping the sum.
  static void repair(std::vector<int64_t>& c, int64_t a) {
    const int64_t n = static_cast<int64_t>(c.size());
    int64_t excess = 0;
    for (int64_t k = a - 1; k >= 0; --k) {
      const int64_t floor = (k + 1 < n ? c[k + 1] : 0) + 1;
      if (c[k] < floor) excess += floor - c[k], c[k] = floor;
    }
    for (int64_t k = n - 1; k >= a && excess > 0; --k) {  // rarest first
      const int64_t take = std::min(c[k], excess);
      c[k] -= take;
      excess -= take;
    }
    if (excess == 0) return;
    int64_t total = 0;
    for (int64_t k = 0; k < n; ++k) total += c[k];
    total -= excess;  // = N
    const int64_t base = a * (a + 1) / 2, q = (total - base) / a, r = (total - base) % a;
    for (int64_t k = 0; k < n; ++k) c[k] = k < a ? (a - k) + q + (k < r ? 1 : 0) : 0;
  }

  Seq question() const {
    if (form_ == Form::Token) return {token_ids::kQuery, token_ids::kAnswer};
    const std::string n = std::to_string(o_.answers);
    return bytes("What are the " + n + " most frequent words in the text above? The " + n +
                 " most frequent words in the text above, most frequent first, are: ");
  }

  Form form_;
  FweOptions o_;
  int64_t words_ = 0;
  int64_t padding_ = 0;
  std::vector<double> cdf_;  // P(rank <= r)
};

}  // namespace

std::unique_ptr<LongTask> make_fwe(int64_t seq_len, const FweOptions& o) {
  return std::make_unique<Fwe>(seq_len, o);
}

}  // namespace lcr::tasks
