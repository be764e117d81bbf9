// PhoneBook (the PaTH paper's retrieval test): a dense list of "First Last: number" entries,
// every full name distinct, then a question for one entry's number. Layouts (docs/data.md):
//
//   byte   pad + "Emma Lopez: 555-0123-456\n" ... + "What is the phone number of Emma
//          Lopez? " + "555-0123-456"   (the answer: the whole 12-byte number)
//   token  BOS pad (ITEM first last IS d d d d d d d)... QUERY first last ANSWER d x 7
//
// Names: 128 first x 128 last names (byte: 16384 full names), or two key symbols (token:
// 65536 full names).
// Numbers: 7 uniform digits ("555-" + 4 + "-" + 3 in byte form). The entries fill the
// length (byte form: until the next entry does not fit), the rest is padding at the start.
// The asked entry is entry round(depth * (n - 1)) of the n entries.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/data/tasks/longctx_build.hpp"
#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

using namespace longctx;

class Phonebook : public LongTask {
 public:
  Phonebook(int64_t seq_len, const PhonebookOptions& o)
      : LongTask(seq_len, o), form_(check_common("phonebook", o)) {
    const bool byte = form_ == Form::Byte;
    auto name_of_size = [&](size_t first, size_t last) {
      return byte ? Seq(first + 1 + last, 'n') : Seq(2, token_ids::kKey0);
    };
    const Seq number = render_number("0000000");
    const Seq longest_name = name_of_size(longest(first_names()), longest(last_names()));
    const int64_t need =
        (byte ? 0 : 1) + static_cast<int64_t>(entry(longest_name, number).size() +
                                              question(longest_name).size() + number.size());
    if (seq_len < need)
      too_short(seq_len, std::string("phonebook (") + form_name(form_) + " form)",
                "one entry, the question and the answer take up to", form_, need);
    // Every entry's name is distinct: the shortest entries must not outnumber the names.
    size_t first = 1000, last = 1000;
    for (const std::string& s : first_names()) first = std::min(first, s.size());
    for (const std::string& s : last_names()) last = std::min(last, s.size());
    const int64_t shortest = static_cast<int64_t>(entry(name_of_size(first, last), number).size());
    require(seq_len / shortest <= names(), "task.seq_len ", seq_len, " is too long for phonebook (",
            form_name(form_), " form): up to ", seq_len / shortest, " entries but ", names(),
            " distinct names; use seq_len <= ", names() * shortest);
  }

  std::string name() const override { return "phonebook"; }
  std::string description() const override {
    std::ostringstream os;
    os << "phonebook (" << form_name(form_) << " form): a dense list of names and numbers, "
       << "asked for the entry at "
       << (option_depth() < 0 ? std::string("a uniform random depth")
                              : "depth " + std::to_string(option_depth()))
       << "; length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return vocab_of(form_); }

  void generate_spans(data::Rng& rng, double depth, int32_t* tokens, int32_t* labels,
                      AnswerSpans& spans) const override {
    // The asked entry first: the same name and number at every length.
    const uint64_t name_key = rng.next();
    auto name_of = [&](int64_t j) {
      return static_cast<int64_t>(data::permute_index(static_cast<uint64_t>(j), names(), name_key));
    };
    const std::string asked_number = number(rng);
    const Seq asked_name = render_name(name_of(0));
    const Seq q = question(asked_name);
    const Seq answer = render_number(asked_number);
    const double d = resolve_depth(rng, depth);

    const int64_t budget = context_budget(form_, seq_len(), static_cast<int64_t>(q.size()),
                                          static_cast<int64_t>(answer.size()));
    std::vector<Seq> entries = {entry(asked_name, answer)};
    int64_t used = static_cast<int64_t>(entries[0].size());
    for (int64_t j = 1; j < names(); ++j) {
      Seq e = entry(render_name(name_of(j)), render_number(number(rng)));
      if (used + static_cast<int64_t>(e.size()) > budget) break;
      used += static_cast<int64_t>(e.size());
      entries.push_back(std::move(e));
    }
    // Move the asked entry (drawn first) to its place.
    const int64_t n = static_cast<int64_t>(entries.size());
    const int64_t at = std::llround(d * static_cast<double>(n - 1));
    for (int64_t i = 0; i < at; ++i) std::swap(entries[i], entries[i + 1]);

    Seq context = padding(form_, budget - used);
    for (const Seq& e : entries) append(context, e);
    write_sequence(form_, context, q, {answer}, {}, seq_len(), tokens, labels, spans);
  }

 private:
  static std::string number(data::Rng& rng) {
    std::string digits(7, '0');
    for (char& c : digits) c = static_cast<char>('0' + rng.uniform(10));
    return digits;
  }

  Seq render_name(int64_t i) const {
    if (form_ == Form::Token)
      return {token_ids::kKey0 + static_cast<int32_t>(i / token_ids::kKeys),
              token_ids::kKey0 + static_cast<int32_t>(i % token_ids::kKeys)};
    return bytes(first_names()[i / 128] + " " + last_names()[i % 128]);
  }

  Seq render_number(const std::string& digits) const {
    if (form_ == Form::Byte) return bytes("555-" + digits.substr(0, 4) + "-" + digits.substr(4));
    Seq out;
    for (char c : digits) out.push_back(token_ids::kDigit0 + (c - '0'));
    return out;
  }

  Seq entry(const Seq& name, const Seq& number) const {
    Seq out;
    if (form_ == Form::Token) out.push_back(token_ids::kItem);
    append(out, name);
    append(out, form_ == Form::Byte ? bytes(": ") : Seq{token_ids::kIs});
    append(out, number);
    if (form_ == Form::Byte) out.push_back('\n');
    return out;
  }

  Seq question(const Seq& name) const {
    Seq out = form_ == Form::Byte ? bytes("What is the phone number of ") : Seq{token_ids::kQuery};
    append(out, name);
    append(out, form_ == Form::Byte ? bytes("? ") : Seq{token_ids::kAnswer});
    return out;
  }

  // Distinct full names: first x last name (byte), key x key (token).
  int64_t names() const {
    return form_ == Form::Byte ? 128 * 128 : int64_t{token_ids::kKeys} * token_ids::kKeys;
  }

  Form form_;
};

}  // namespace

std::unique_ptr<LongTask> make_phonebook(int64_t seq_len, const PhonebookOptions& o) {
  return std::make_unique<Phonebook>(seq_len, o);
}

}  // namespace lcr::tasks
