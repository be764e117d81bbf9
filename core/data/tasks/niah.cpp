// Needle in a haystack, RULER-style: niah_single, niah_multikey, niah_multivalue,
// niah_multiquery. Needles "key -> value" in a haystack; the question names the key(s) and
// the answers are the value(s). Layouts (docs/data.md):
//
//   byte   needle   "One of the special magic <noun>s for <key> is: <value>. "
//          question "What is the special magic <noun> for <key> mentioned in the provided
//                   text? The special magic <noun> for <key> mentioned in the provided text
//                   is " (one answer), or "What are all the special magic <noun>s for <keys>
//                   mentioned in the provided text? The special magic <noun>s for <keys>
//                   mentioned in the provided text are " (several; <keys> = "a, b and c")
//          answers  the values, ", " between them
//   token  needle NEEDLE key IS value; question QUERY key... ANSWER; answers, SEP between
//
// Keys: "<adjective>-<noun>" (48 x 48) or key symbols (256); values: 7-digit numbers
// (1000000-9999999), uuids (8-4-4-4-12 lowercase hex) or words (64). Keys and (number,
// word) values are distinct within a sample. Needle 0 goes at the depth's boundary, the
// others at uniformly random boundaries.
#include <algorithm>
#include <sstream>

#include "core/data/tasks/longctx_build.hpp"
#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

using namespace longctx;

enum class Kind { Single, MultiKey, MultiValue, MultiQuery };
enum class Value { Number, Uuid, Word };

constexpr int64_t kNumberPool = 9000000;

class Niah : public LongTask {
 public:
  Niah(const std::string& name, int64_t seq_len, const NiahOptions& o)
      : LongTask(seq_len, o),
        name_(name),
        form_(check_common(name, o)),
        haystack_(name, form_, o, seq_len) {
    kind_ = name == "niah_single"       ? Kind::Single
            : name == "niah_multikey"   ? Kind::MultiKey
            : name == "niah_multivalue" ? Kind::MultiValue
                                        : Kind::MultiQuery;
    require(o.value == "number" || o.value == "uuid" || o.value == "word", "task.", name,
            ".value must be \"number\", \"uuid\" or \"word\", got \"", o.value, "\"");
    value_ = o.value == "number" ? Value::Number : o.value == "uuid" ? Value::Uuid : Value::Word;
    noun_ = o.value;
    const int64_t keys = form_ == Form::Byte ? 48 * 48 : token_ids::kKeys;
    const int64_t values = value_ == Value::Word ? token_ids::kValueWords : kNumberPool;
    const std::string why =
        " (keys" + std::string(value_ == Value::Word ? " and word values" : "") +
        " are distinct: " + std::to_string(keys) + " keys in the " + form_name(form_) + " form" +
        (value_ == Value::Word ? ", 64 value words)" : ")");
    if (kind_ == Kind::MultiKey) {
      const int64_t most = std::min(keys, values) - 1;
      require(o.distractors >= 0 && o.distractors <= most, "task.", name,
              ".distractors must be in [0, ", most, "], got ", o.distractors, why);
      needles_ = 1 + o.distractors;
    } else if (kind_ == Kind::MultiValue) {
      const int64_t most = value_ == Value::Word ? values : 1000;
      require(o.values >= 1 && o.values <= most, "task.", name, ".values must be in [1, ", most,
              "], got ", o.values);
      needles_ = o.values;
    } else if (kind_ == Kind::MultiQuery) {
      const int64_t most = std::min(keys, values);
      require(o.queries >= 1 && o.queries <= most, "task.", name, ".queries must be in [1, ", most,
              "], got ", o.queries, why);
      needles_ = o.queries;
    }
    // The longest key and value give the longest fixed part: the minimum length.
    const Seq key(form_ == Form::Byte ? longest(key_adjectives()) + 1 + longest(key_nouns()) : 1,
                  'k');
    const Seq value(value_length(longest(value_words())), 'v');
    const int64_t need = fixed_size(key, value) + (form_ == Form::Token ? 1 : 0);
    if (seq_len < need)
      too_short(seq_len, what(), "the needles, question and answers take up to", form_, need);
  }

  std::string name() const override { return name_; }
  std::string description() const override {
    std::ostringstream os;
    os << what() << ": " << needles_ << " needle(s) in " << haystack_.describe() << " at "
       << (option_depth() < 0 ? std::string("a uniform random depth")
                              : "depth " + std::to_string(option_depth()))
       << "; length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return vocab_of(form_); }

  void generate_spans(data::Rng& rng, double depth, int32_t* tokens, int32_t* labels,
                      AnswerSpans& spans) const override {
    // Content first, so that sample k has the same keys and values at every length.
    const bool one_key = kind_ == Kind::Single || kind_ == Kind::MultiValue;
    const std::vector<int64_t> key_ids = distinct_indices(
        rng, one_key ? 1 : needles_, form_ == Form::Byte ? 48 * 48 : token_ids::kKeys);
    std::vector<Seq> keys, values;
    for (int64_t k : key_ids) keys.push_back(render_key(k));
    const std::vector<int64_t> value_ids = distinct_indices(
        rng, needles_, value_ == Value::Word ? token_ids::kValueWords : kNumberPool);
    for (int64_t v : value_ids) values.push_back(render_value(v, rng));

    std::vector<Insert> needles(needles_);
    for (int64_t i = 0; i < needles_; ++i) {
      needles[i].content = needle(keys[one_key ? 0 : i], values[i]);
      needles[i].tag = i;
    }
    const std::vector<Seq> asked = kind_ == Kind::MultiQuery ? keys : std::vector<Seq>{keys[0]};
    const Seq q = question(asked);
    std::vector<Seq> answers = kind_ == Kind::MultiKey ? std::vector<Seq>{values[0]} : values;
    const Seq sep = answer_separator(form_);
    int64_t budget = context_budget(form_, seq_len(), static_cast<int64_t>(q.size()),
                                    answers_size(answers, sep));
    for (const Insert& n : needles) budget -= static_cast<int64_t>(n.content.size());

    const double d = resolve_depth(rng, depth);
    const Haystack h = haystack_.make(rng, budget);
    needles[0].at = boundary_at_depth(h, d);
    for (int64_t i = 1; i < needles_; ++i) needles[i].at = random_boundary(h, rng);
    std::vector<int64_t> order;
    const Seq context = weave(h, needles, &order);
    if (kind_ == Kind::MultiValue)  // the values in order of appearance
      for (int64_t i = 0; i < needles_; ++i) answers[i] = values[order[i]];
    write_sequence(form_, context, q, answers, sep, seq_len(), tokens, labels, spans);
  }

 private:
  std::string what() const {
    std::ostringstream os;
    os << name_ << " (" << form_name(form_) << " form, " << noun_ << " values";
    if (kind_ == Kind::MultiKey) os << ", " << needles_ - 1 << " distractors";
    if (kind_ == Kind::MultiValue) os << ", " << needles_ << " values";
    if (kind_ == Kind::MultiQuery) os << ", " << needles_ << " queries";
    os << ")";
    return os.str();
  }

  int64_t value_length(size_t longest_word) const {
    if (value_ == Value::Number) return 7;
    if (value_ == Value::Uuid) return 36;
    return form_ == Form::Byte ? static_cast<int64_t>(longest_word) : 1;
  }

  int64_t fixed_size(const Seq& key, const Seq& value) const {
    const bool one_key = kind_ == Kind::Single || kind_ == Kind::MultiValue;
    const int64_t answers = kind_ == Kind::MultiKey ? 1 : needles_;
    const std::vector<Seq> answer_list(answers, value);
    return needles_ * static_cast<int64_t>(needle(key, value).size()) +
           static_cast<int64_t>(question(std::vector<Seq>(one_key ? 1 : needles_, key)).size()) +
           answers_size(answer_list, answer_separator(form_));
  }

  Seq render_key(int64_t k) const {
    if (form_ == Form::Token) return {token_ids::kKey0 + static_cast<int32_t>(k)};
    return bytes(key_adjectives()[k / 48] + "-" + key_nouns()[k % 48]);
  }

  Seq render_value(int64_t v, data::Rng& rng) const {
    std::string digits;
    if (value_ == Value::Word) {
      return form_ == Form::Byte ? bytes(value_words()[v])
                                 : Seq{token_ids::kValueWord0 + static_cast<int32_t>(v)};
    }
    if (value_ == Value::Number) {
      digits = std::to_string(1000000 + v);
    } else {  // 128 random bits as 32 hex digits, dashes after digits 8, 12, 16 and 20
      static const char kHex[] = "0123456789abcdef";
      const uint64_t bits[2] = {rng.next(), rng.next()};
      for (int i = 0; i < 32; ++i) {
        if (i == 8 || i == 12 || i == 16 || i == 20) digits += '-';
        digits += kHex[(bits[i / 16] >> (4 * (i % 16))) & 15];
      }
    }
    if (form_ == Form::Byte) return bytes(digits);
    Seq out;
    for (char c : digits)
      out.push_back(c == '-'   ? token_ids::kDash
                    : c <= '9' ? token_ids::kDigit0 + (c - '0')
                               : token_ids::kDigit0 + 10 + (c - 'a'));
    return out;
  }

  Seq needle(const Seq& key, const Seq& value) const {
    Seq out;
    if (form_ == Form::Token) {
      out = {token_ids::kNeedle};
      append(out, key);
      out.push_back(token_ids::kIs);
      append(out, value);
      return out;
    }
    out = bytes("One of the special magic " + noun_ + "s for ");
    append(out, key);
    append(out, bytes(" is: "));
    append(out, value);
    append(out, bytes(". "));
    return out;
  }

  Seq question(const std::vector<Seq>& keys) const {
    Seq out;
    if (form_ == Form::Token) {
      out = {token_ids::kQuery};
      for (const Seq& k : keys) append(out, k);
      out.push_back(token_ids::kAnswer);
      return out;
    }
    Seq list;  // "a", "a and b", "a, b and c"
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i > 0) append(list, bytes(i + 1 == keys.size() ? " and " : ", "));
      append(list, keys[i]);
    }
    const bool several = kind_ == Kind::MultiValue || kind_ == Kind::MultiQuery;
    const std::string head = several ? "What are all the special magic " + noun_ + "s for "
                                     : "What is the special magic " + noun_ + " for ";
    const std::string again =
        several ? "The special magic " + noun_ + "s for " : "The special magic " + noun_ + " for ";
    out = bytes(head);
    append(out, list);
    append(out, bytes(" mentioned in the provided text? " + again));
    append(out, list);
    append(out, bytes(several ? " mentioned in the provided text are "
                              : " mentioned in the provided text is "));
    return out;
  }

  std::string name_;
  Form form_;
  HaystackMaker haystack_;
  Kind kind_ = Kind::Single;
  Value value_ = Value::Number;
  std::string noun_;
  int64_t needles_ = 1;
};

}  // namespace

std::unique_ptr<LongTask> make_niah(const std::string& name, int64_t seq_len,
                                    const NiahOptions& o) {
  return std::make_unique<Niah>(name, seq_len, o);
}

}  // namespace lcr::tasks
