#pragma once
// What the long-context task generators share (internal to core/data/tasks): the two
// forms, the built-in word lists, haystacks with their insertion boundaries, weaving
// needles into a haystack, and writing the final sequence with its answer spans.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/rng.hpp"
#include "core/data/tasks/longctx.hpp"

namespace lcr::tasks::longctx {

enum class Form { Byte, Token };
using Seq = std::vector<int32_t>;

// Validates what every long-context task has (form, depth) and returns the form. `task`
// names the options in errors ("task.<task>.form").
Form check_common(const std::string& task, const LongContextOptions& o);
int32_t vocab_of(Form form);
const char* form_name(Form form);

Seq bytes(const std::string& text);  // one id per byte
void append(Seq& to, const Seq& what);
Seq padding(Form form, int64_t n);  // n spaces (byte) or PAD tokens (token)

// Built-in lists (longctx_words.cpp). Byte-form keys are "<adjective>-<noun>".
const std::vector<std::string>& key_adjectives();
const std::vector<std::string>& key_nouns();
const std::vector<std::string>& value_words();  // 64: niah value = "word"
const std::vector<std::string>& first_names();  // phonebook
const std::vector<std::string>& last_names();   // phonebook
const std::vector<std::string>& essay_sentences();
extern const std::string kNoiseFiller;  // passkey's five repeated sentences
size_t longest(const std::vector<std::string>& words);

// cwe/fwe words: index i in [0, 70^3) is three syllables (consonant + vowel); six letters
// in byte form, three syllable tokens in token form.
constexpr int64_t kSyllableWords = 70 * 70 * 70;
Seq syllable_word(Form form, int64_t index);

// `count` distinct indices of [0, pool) in random order (a keyed permutation of the pool).
std::vector<int64_t> distinct_indices(data::Rng& rng, int64_t count, int64_t pool);

// depth < 0: drawn uniform in [0, 1).
double resolve_depth(data::Rng& rng, double depth);

// A haystack of exactly `tokens.size()` ids and the offsets where needles may go, sorted:
// 0, every sentence start (byte form) or every offset (token form), and the end.
struct Haystack {
  Seq tokens;
  std::vector<int64_t> boundaries;
};

class HaystackMaker {
 public:
  // Validates haystack and haystack_text (errors name task.<task>.haystack ...).
  HaystackMaker(const std::string& task, Form form, const HaystackOptions& o, int64_t seq_len);
  Haystack make(data::Rng& rng, int64_t size) const;
  std::string describe() const;

 private:
  Haystack from_sentences(data::Rng& rng, int64_t size) const;
  Haystack from_text(data::Rng& rng, int64_t size) const;
  Form form_;
  bool essay_;
  std::shared_ptr<const std::string> text_;
};

// The boundary nearest to depth * size (ties: the lower one).
int64_t boundary_at_depth(const Haystack& h, double depth);
int64_t random_boundary(const Haystack& h, data::Rng& rng);
// Boundary uniform among those >= from.
int64_t random_boundary_from(const Haystack& h, int64_t from, data::Rng& rng);

// A needle inserted before haystack offset `at` (a boundary); needles at one offset keep
// the order in which they are listed.
struct Insert {
  int64_t at = 0;
  Seq content;
  int64_t tag = 0;  // the caller's id of the needle, to find its order afterwards
};
// The haystack with the needles in; `order` (if given) receives the tags in text order.
Seq weave(const Haystack& h, const std::vector<Insert>& inserts, std::vector<int64_t>* order);

// What separates answers: ", " (byte form) or SEP (token form); never scored.
Seq answer_separator(Form form);

// Size of the answer region: the answers separated by `separator`.
int64_t answers_size(const std::vector<Seq>& answers, const Seq& separator);

// Writes the sequence: [BOS in token form] context question answer_0 sep answer_1 ... and
// the labels (only the positions before answer tokens); exactly seq_len ids or an internal
// error. spans: one per answer.
void write_sequence(Form form, const Seq& context, const Seq& question,
                    const std::vector<Seq>& answers, const Seq& separator, int64_t seq_len,
                    int32_t* tokens, int32_t* labels, AnswerSpans& spans);

// The context budget: seq_len minus BOS (token form), the question and the answers.
int64_t context_budget(Form form, int64_t seq_len, int64_t question, int64_t answers);

// Throws TooShort: "task.seq_len <L> is too short for <what>: <parts> take <need> <units>;
// use seq_len >= <need>".
[[noreturn]] void too_short(int64_t seq_len, const std::string& what, const std::string& parts,
                            Form form, int64_t need);

}  // namespace lcr::tasks::longctx
