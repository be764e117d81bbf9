// The long-context tasks' shared parts: option checks, haystacks, weaving needles in, and
// writing a sequence with its answer spans (longctx_build.hpp).
#include "core/data/tasks/longctx_build.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "kernels/base/error.hpp"

namespace lcr::tasks::longctx {

Form check_common(const std::string& task, const LongContextOptions& o) {
  require(o.form == "byte" || o.form == "token", "task.", task,
          ".form must be \"byte\" or \"token\", got \"", o.form, "\"");
  require(o.depth >= 0.0 && o.depth <= 1.0, "task.", task, ".depth must be in [0, 1], got ",
          o.depth);
  return o.form == "byte" ? Form::Byte : Form::Token;
}

int32_t vocab_of(Form form) { return form == Form::Byte ? 256 : token_ids::kVocab; }
const char* form_name(Form form) { return form == Form::Byte ? "byte" : "token"; }

Seq bytes(const std::string& text) {
  Seq out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

void append(Seq& to, const Seq& what) { to.insert(to.end(), what.begin(), what.end()); }

Seq padding(Form form, int64_t n) { return Seq(n, form == Form::Byte ? ' ' : token_ids::kPad); }

Seq syllable_word(Form form, int64_t index) {
  static const char kConsonants[] = "bdfgklmnprstvz";  // 14 x 5 vowels = 70 syllables
  static const char kVowels[] = "aeiou";
  const int64_t s[3] = {index / 4900, (index / 70) % 70, index % 70};
  Seq out;
  for (int64_t syllable : s) {
    if (form == Form::Token) {
      out.push_back(token_ids::kSyllable0 + static_cast<int32_t>(syllable));
    } else {
      out.push_back(kConsonants[syllable / 5]);
      out.push_back(kVowels[syllable % 5]);
    }
  }
  return out;
}

std::vector<int64_t> distinct_indices(data::Rng& rng, int64_t count, int64_t pool) {
  const uint64_t key = rng.next();
  std::vector<int64_t> out(count);
  for (int64_t i = 0; i < count; ++i)
    out[i] = static_cast<int64_t>(data::permute_index(i, pool, key));
  return out;
}

double resolve_depth(data::Rng& rng, double depth) { return depth < 0 ? rng.uniform01() : depth; }

// ---------------------------------------------------------------------------------------
// Haystacks

namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool ends_sentence(char c) { return c == '.' || c == '!' || c == '?'; }

// Offset p of `text` starts a sentence: whitespace before it, a full stop before that.
bool sentence_start(const std::string& text, int64_t p) {
  return p >= 2 && is_space(text[p - 1]) && ends_sentence(text[p - 2]);
}

// The last `size` bytes of `text`, and the sentence starts among them.
Haystack tail_of(const std::string& text, int64_t size) {
  Haystack h;
  const int64_t from = static_cast<int64_t>(text.size()) - size;
  h.tokens = bytes(text.substr(from));
  h.boundaries.push_back(0);
  for (int64_t p = 1; p < size; ++p)
    if (sentence_start(text, from + p)) h.boundaries.push_back(p);
  if (size > 0) h.boundaries.push_back(size);
  return h;
}

}  // namespace

HaystackMaker::HaystackMaker(const std::string& task, Form form, const HaystackOptions& o,
                             int64_t seq_len)
    : form_(form), essay_(o.haystack == "essay"), text_(o.haystack_text) {
  require(o.haystack == "noise" || o.haystack == "essay", "task.", task,
          ".haystack must be \"noise\" or \"essay\", got \"", o.haystack, "\"");
  require(!(essay_ && form == Form::Token), "task.", task,
          ".haystack = \"essay\" needs form = \"byte\": the token form has no natural text; "
          "use haystack = \"noise\"");
  require(!text_ || essay_, "task.", task, ".haystack_text is set but haystack = \"", o.haystack,
          "\"; the text is an essay haystack: set haystack = \"essay\"");
  require(!text_ || static_cast<int64_t>(text_->size()) >= seq_len, "task.", task,
          ".haystack_text holds ", text_ ? text_->size() : 0,
          " bytes, fewer than seq_len = ", seq_len, "; pass at least seq_len bytes of text");
}

std::string HaystackMaker::describe() const {
  if (form_ == Form::Token) return "noise symbols";
  if (!essay_) return "filler sentences";
  return text_ ? "held-out text" : "essay sentences";
}

Haystack HaystackMaker::make(data::Rng& rng, int64_t size) const {
  if (form_ == Form::Token) {
    Haystack h;
    h.tokens.resize(size);
    for (int32_t& t : h.tokens)
      t = token_ids::kNoise0 + static_cast<int32_t>(rng.uniform(token_ids::kNoise));
    h.boundaries.resize(size + 1);
    for (int64_t p = 0; p <= size; ++p) h.boundaries[p] = p;
    return h;
  }
  if (!essay_) {  // the passkey filler: the last `size` bytes of its repetition
    const int64_t c = static_cast<int64_t>(kNoiseFiller.size());
    std::string text;
    text.reserve(size + c);
    while (static_cast<int64_t>(text.size()) < size) text += kNoiseFiller;
    return tail_of(". " + text, size);  // ". " so that a whole first cycle starts a sentence
  }
  return text_ ? from_text(rng, size) : from_sentences(rng, size);
}

// The built-in sentences in a seeded order (never one twice in a row), the last `size`
// bytes of them: the haystack ends with a whole sentence.
Haystack HaystackMaker::from_sentences(data::Rng& rng, int64_t size) const {
  const std::vector<std::string>& s = essay_sentences();
  const int64_t n = static_cast<int64_t>(s.size());
  std::string text = ". ";
  int64_t last = -1;
  while (static_cast<int64_t>(text.size()) - 2 < size) {
    int64_t i = rng.uniform(last < 0 ? n : n - 1);
    if (last >= 0 && i >= last) ++i;
    text += s[i];
    text += ' ';
    last = i;
  }
  return tail_of(text, size);
}

// A window of the caller's text: its end drawn uniformly, then moved back (at most 4 KiB)
// to the nearest sentence end, else word end, so the question follows a whole sentence.
Haystack HaystackMaker::from_text(data::Rng& rng, int64_t size) const {
  const std::string& t = *text_;
  const int64_t n = static_cast<int64_t>(t.size());
  const int64_t end0 = size + rng.uniform(n - size + 1);
  const int64_t lowest = std::max(size, end0 - 4096);
  int64_t end = end0;
  bool found = false;
  for (int64_t e = end0; e >= lowest && !found; --e)
    if (e == n || sentence_start(t, e)) end = e, found = true;
  for (int64_t e = end0; e >= lowest && !found; --e)
    if (e >= 1 && is_space(t[e - 1])) end = e, found = true;
  return tail_of(t.substr(0, end), size);
}

int64_t boundary_at_depth(const Haystack& h, double depth) {
  const int64_t size = static_cast<int64_t>(h.tokens.size());
  const int64_t target = std::llround(depth * static_cast<double>(size));
  const auto above = std::lower_bound(h.boundaries.begin(), h.boundaries.end(), target);
  if (above == h.boundaries.begin()) return *above;
  if (above == h.boundaries.end()) return h.boundaries.back();
  const int64_t below = *(above - 1);
  return (target - below <= *above - target) ? below : *above;
}

int64_t random_boundary(const Haystack& h, data::Rng& rng) {
  return h.boundaries[rng.uniform(static_cast<int64_t>(h.boundaries.size()))];
}

int64_t random_boundary_from(const Haystack& h, int64_t from, data::Rng& rng) {
  const auto first = std::lower_bound(h.boundaries.begin(), h.boundaries.end(), from);
  const int64_t skip = first - h.boundaries.begin();
  return h.boundaries[skip + rng.uniform(static_cast<int64_t>(h.boundaries.size()) - skip)];
}

Seq weave(const Haystack& h, const std::vector<Insert>& inserts, std::vector<int64_t>* order) {
  std::vector<size_t> idx(inserts.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t a, size_t b) { return inserts[a].at < inserts[b].at; });
  Seq out;
  int64_t size = static_cast<int64_t>(h.tokens.size());
  for (const Insert& in : inserts) size += static_cast<int64_t>(in.content.size());
  out.reserve(size);
  int64_t copied = 0;
  if (order) order->clear();
  for (size_t i : idx) {
    out.insert(out.end(), h.tokens.begin() + copied, h.tokens.begin() + inserts[i].at);
    copied = inserts[i].at;
    append(out, inserts[i].content);
    if (order) order->push_back(inserts[i].tag);
  }
  out.insert(out.end(), h.tokens.begin() + copied, h.tokens.end());
  return out;
}

// ---------------------------------------------------------------------------------------
// Sequences

Seq answer_separator(Form form) { return form == Form::Byte ? bytes(", ") : Seq{token_ids::kSep}; }

int64_t answers_size(const std::vector<Seq>& answers, const Seq& separator) {
  int64_t n = 0;
  for (size_t i = 0; i < answers.size(); ++i)
    n += static_cast<int64_t>(answers[i].size() + (i > 0 ? separator.size() : 0));
  return n;
}

int64_t context_budget(Form form, int64_t seq_len, int64_t question, int64_t answers) {
  return seq_len - (form == Form::Token ? 1 : 0) - question - answers;
}

void write_sequence(Form form, const Seq& context, const Seq& question,
                    const std::vector<Seq>& answers, const Seq& separator, int64_t seq_len,
                    int32_t* tokens, int32_t* labels, AnswerSpans& spans) {
  const int64_t need = (form == Form::Token ? 1 : 0) +
                       static_cast<int64_t>(context.size() + question.size()) +
                       answers_size(answers, separator);
  require(need == seq_len, "internal error: a long-context sequence of ", need,
          " tokens for seq_len ", seq_len);
  int64_t t = 0;
  auto put = [&](const Seq& s) {
    for (int32_t x : s) tokens[t++] = x;
  };
  if (form == Form::Token) tokens[t++] = token_ids::kBos;
  put(context);
  put(question);
  std::fill(labels, labels + seq_len, data::kIgnoreLabel);
  spans.clear();
  for (size_t i = 0; i < answers.size(); ++i) {
    if (i > 0) put(separator);
    const int64_t first = t;
    put(answers[i]);
    spans.push_back({first - 1, t - 1});
    for (int64_t p = first - 1; p < t - 1; ++p) labels[p] = tokens[p + 1];
  }
}

void too_short(int64_t seq_len, const std::string& what, const std::string& parts, Form form,
               int64_t need) {
  std::ostringstream os;
  os << "task.seq_len " << seq_len << " is too short for " << what << ": " << parts << " " << need
     << (form == Form::Byte ? " bytes" : " tokens") << "; use seq_len >= " << need;
  throw TooShort(os.str(), need);
}

}  // namespace lcr::tasks::longctx
