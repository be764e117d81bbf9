// Passkey retrieval / needle in a haystack (GOAT Sec. 6: one 8-digit key, varying context
// length and needle depth; scored by span-token accuracy). Byte-level, vocabulary 256, so
// the same model and tokenizer serve text and this task. One sequence of exactly L bytes:
//
//   filler[0, a) + needle + filler[a, F) + question + key
//
//   filler   the sentences "The grass is green. The sky is blue. The sun is yellow. Here we
//            go. There and back again. " repeated: the last F bytes of the repetition, so
//            the filler ends with a whole sentence and the question follows cleanly
//   needle   "The pass key is <key>. Remember it. <key> is the pass key. "
//   question "What is the pass key? The pass key is "
//   key      key_digits decimal digits, each uniform in 0-9
//
// F = L - |needle| - |question| - key_digits. The needle goes at a = depth * F snapped to
// the nearest sentence start of the filler (or to F, right before the question), so depth
// 0 is the start of the context and depth 1 its end. Labels: the key's digits at the end,
// i.e. labels[t] = tokens[t+1] for the key_digits positions before each digit; nothing
// else is scored.
#include <cmath>
#include <sstream>

#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

const std::string kFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";
const std::string kQuestion = "What is the pass key? The pass key is ";

std::string needle_text(const std::string& key) {
  return "The pass key is " + key + ". Remember it. " + key + " is the pass key. ";
}

bool is_cycle_sentence_start(int64_t q) {  // q: offset in kFiller
  return q == 0 || (kFiller[q - 1] == ' ' && kFiller[q - 2] == '.');
}

class Passkey : public Task {
 public:
  Passkey(int64_t seq_len, const PasskeyOptions& o) : Task(seq_len), o_(o) {
    require(o.key_digits >= 1 && o.key_digits <= 32,
            "task.passkey.key_digits must be in [1, 32], got ", o.key_digits);
    require(o.depth >= 0.0 && o.depth <= 1.0, "task.passkey.depth must be in [0, 1], got ",
            o.depth);
    const int64_t fixed = static_cast<int64_t>(needle_text(std::string(o.key_digits, '0')).size() +
                                               kQuestion.size()) +
                          o.key_digits;
    require(seq_len >= fixed, "task.seq_len ", seq_len, " is too short for passkey with ",
            o.key_digits, "-digit keys: needle, question and answer alone take ", fixed,
            " bytes; use seq_len >= ", fixed);
    filler_len_ = seq_len - fixed;
    const int64_t c = static_cast<int64_t>(kFiller.size());
    phase_ = (c - filler_len_ % c) % c;  // filler byte p is kFiller[(p + phase_) % c]
  }
  std::string name() const override { return "passkey"; }
  std::string description() const override {
    std::ostringstream os;
    os << "passkey retrieval (byte-level): a " << o_.key_digits << "-digit key hidden in "
       << filler_len_ << " filler bytes at "
       << (o_.random_depth ? std::string("a uniform random depth")
                           : "depth " + std::to_string(o_.depth))
       << ", asked for at the end; length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return 256; }

  // Where the needle starts for a depth in [0, 1]: nearest sentence start to depth * F.
  int64_t needle_position(double depth) const {
    const int64_t target = std::llround(depth * static_cast<double>(filler_len_));
    int64_t below = target, above = target;
    while (below > 0 && !is_sentence_start(below)) --below;
    while (above < filler_len_ && !is_sentence_start(above)) ++above;
    return (target - below <= above - target) ? below : above;
  }

  void generate(data::Rng& rng, int32_t* tokens, int32_t* labels) const override {
    std::string key(o_.key_digits, '0');
    for (char& c : key) c = static_cast<char>('0' + rng.uniform(10));
    const double depth = o_.random_depth ? rng.uniform01() : o_.depth;
    const int64_t a = needle_position(depth);

    const std::string needle = needle_text(key);
    int64_t t = 0;
    auto put = [&](char c) { tokens[t++] = static_cast<unsigned char>(c); };
    for (int64_t i = 0; i < a; ++i) put(filler(i));
    for (char ch : needle) put(ch);
    for (int64_t i = a; i < filler_len_; ++i) put(filler(i));
    for (char ch : kQuestion) put(ch);
    for (char ch : key) put(ch);

    const int64_t L = seq_len(), D = o_.key_digits;
    for (int64_t i = 0; i < L; ++i) labels[i] = data::kIgnoreLabel;
    for (int64_t i = L - D - 1; i < L - 1; ++i) labels[i] = tokens[i + 1];
  }

 private:
  bool is_sentence_start(int64_t p) const {
    return is_cycle_sentence_start((p + phase_) % static_cast<int64_t>(kFiller.size()));
  }
  char filler(int64_t p) const { return kFiller[(p + phase_) % kFiller.size()]; }

  PasskeyOptions o_;
  int64_t filler_len_ = 0;
  int64_t phase_ = 0;
};

}  // namespace

std::unique_ptr<Task> make_passkey(int64_t seq_len, const PasskeyOptions& o) {
  return std::make_unique<Passkey>(seq_len, o);
}

}  // namespace lcr::tasks
