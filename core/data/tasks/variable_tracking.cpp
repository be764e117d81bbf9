// Variable tracking, RULER-style: chains of assignments scattered in a haystack, each
// chain a value assignment then `hops` copies; the question asks which variables hold the
// value of chain 0 (all of its hops + 1 variables, in chain order). Layouts (docs/data.md):
//
//   byte   "VAR ABCDE = 12345. " then "VAR FGHIJ = VAR ABCDE. " ...; question "Which
//          variables are assigned the value 12345 in the text above? The variables assigned
//          the value 12345 are: "; answers "ABCDE, FGHIJ, ..."
//   token  NEEDLE var IS d d d d d, then NEEDLE var IS var'; question QUERY d d d d d
//          ANSWER; answers var SEP var ...
//
// Variables: five uppercase letters (byte) or key symbols (token), distinct within a
// sample; values: 5-digit numbers (10000-99999), distinct between chains. Chain 0's value
// assignment goes at the depth's boundary, its copies at uniformly random boundaries at or
// after it; the other chains at uniformly random boundaries; every chain in order.
#include <algorithm>
#include <sstream>

#include "core/data/tasks/longctx_build.hpp"
#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

using namespace longctx;

constexpr int64_t kLetterNames = 26 * 26 * 26 * 26 * 26;

class VariableTracking : public LongTask {
 public:
  VariableTracking(int64_t seq_len, const VariableTrackingOptions& o)
      : LongTask(seq_len, o),
        form_(check_common("variable_tracking", o)),
        haystack_("variable_tracking", form_, o, seq_len),
        chains_(o.chains),
        hops_(o.hops) {
    require(o.chains >= 1 && o.chains <= 1000,
            "task.variable_tracking.chains must be in [1, 1000], got ", o.chains);
    require(o.hops >= 0 && o.hops <= 1000, "task.variable_tracking.hops must be in [0, 1000], got ",
            o.hops);
    const int64_t pool = form_ == Form::Byte ? kLetterNames : token_ids::kKeys;
    require(variables() <= pool, "task.variable_tracking.chains * (hops + 1) = ", variables(),
            " variables, more than the ", pool, " distinct variable names of the ",
            form_name(form_), " form; use fewer chains or hops");
    const Seq name = render_variable(0), value = render_value(0);
    const int64_t need = (form_ == Form::Token ? 1 : 0) +
                         chains_ * static_cast<int64_t>(assign_value(name, value).size() +
                                                        hops_ * assign_copy(name, name).size()) +
                         static_cast<int64_t>(question(value).size()) +
                         answers_size(std::vector<Seq>(hops_ + 1, name), answer_separator(form_));
    if (seq_len < need) {
      std::ostringstream what;
      what << "variable_tracking (" << form_name(form_) << " form, " << chains_ << " chains of "
           << hops_ << " hops)";
      too_short(seq_len, what.str(), "the assignments, question and answers take", form_, need);
    }
  }

  std::string name() const override { return "variable_tracking"; }
  std::string description() const override {
    std::ostringstream os;
    os << "variable tracking (" << form_name(form_) << " form): " << chains_ << " chain(s) of "
       << hops_ << " hops in " << haystack_.describe() << ", chain 0 starting at "
       << (option_depth() < 0 ? std::string("a uniform random depth")
                              : "depth " + std::to_string(option_depth()))
       << "; length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return vocab_of(form_); }

  void generate_spans(data::Rng& rng, double depth, int32_t* tokens, int32_t* labels,
                      AnswerSpans& spans) const override {
    const int64_t links = hops_ + 1;
    const std::vector<int64_t> names =
        distinct_indices(rng, variables(), form_ == Form::Byte ? kLetterNames : token_ids::kKeys);
    const std::vector<int64_t> values = distinct_indices(rng, chains_, 90000);

    std::vector<Insert> inserts;  // chain by chain, link by link
    int64_t budget = 0;
    for (int64_t c = 0; c < chains_; ++c)
      for (int64_t j = 0; j < links; ++j) {
        Insert in;
        const Seq var = render_variable(names[c * links + j]);
        in.content = j == 0 ? assign_value(var, render_value(values[c]))
                            : assign_copy(var, render_variable(names[c * links + j - 1]));
        budget += static_cast<int64_t>(in.content.size());
        inserts.push_back(std::move(in));
      }
    std::vector<Seq> answers;
    for (int64_t j = 0; j < links; ++j) answers.push_back(render_variable(names[j]));
    const Seq q = question(render_value(values[0]));
    const Seq sep = answer_separator(form_);
    budget = context_budget(form_, seq_len(), static_cast<int64_t>(q.size()),
                            answers_size(answers, sep)) -
             budget;

    const double d = resolve_depth(rng, depth);
    const Haystack h = haystack_.make(rng, budget);
    for (int64_t c = 0; c < chains_; ++c) {
      std::vector<int64_t> at(links);
      if (c == 0) {
        at[0] = boundary_at_depth(h, d);
        for (int64_t j = 1; j < links; ++j) at[j] = random_boundary_from(h, at[0], rng);
      } else {
        for (int64_t j = 0; j < links; ++j) at[j] = random_boundary(h, rng);
      }
      std::sort(at.begin(), at.end());  // a chain reads in order
      for (int64_t j = 0; j < links; ++j) inserts[c * links + j].at = at[j];
    }
    write_sequence(form_, weave(h, inserts, nullptr), q, answers, sep, seq_len(), tokens, labels,
                   spans);
  }

 private:
  int64_t variables() const { return static_cast<int64_t>(chains_) * (hops_ + 1); }

  Seq render_variable(int64_t v) const {
    if (form_ == Form::Token) return {token_ids::kKey0 + static_cast<int32_t>(v)};
    std::string s(5, 'A');
    for (int i = 4; i >= 0; --i, v /= 26) s[i] = static_cast<char>('A' + v % 26);
    return bytes(s);
  }

  Seq render_value(int64_t v) const {
    const std::string digits = std::to_string(10000 + v);
    if (form_ == Form::Byte) return bytes(digits);
    Seq out;
    for (char c : digits) out.push_back(token_ids::kDigit0 + (c - '0'));
    return out;
  }

  Seq assign_value(const Seq& var, const Seq& value) const {
    Seq out = form_ == Form::Byte ? bytes("VAR ") : Seq{token_ids::kNeedle};
    append(out, var);
    append(out, form_ == Form::Byte ? bytes(" = ") : Seq{token_ids::kIs});
    append(out, value);
    if (form_ == Form::Byte) append(out, bytes(". "));
    return out;
  }

  Seq assign_copy(const Seq& var, const Seq& from) const {
    Seq out = form_ == Form::Byte ? bytes("VAR ") : Seq{token_ids::kNeedle};
    append(out, var);
    append(out, form_ == Form::Byte ? bytes(" = VAR ") : Seq{token_ids::kIs});
    append(out, from);
    if (form_ == Form::Byte) append(out, bytes(". "));
    return out;
  }

  Seq question(const Seq& value) const {
    if (form_ == Form::Token) {
      Seq out = {token_ids::kQuery};
      append(out, value);
      out.push_back(token_ids::kAnswer);
      return out;
    }
    Seq out = bytes("Which variables are assigned the value ");
    append(out, value);
    append(out, bytes(" in the text above? The variables assigned the value "));
    append(out, value);
    append(out, bytes(" are: "));
    return out;
  }

  Form form_;
  HaystackMaker haystack_;
  int32_t chains_;
  int32_t hops_;
};

}  // namespace

std::unique_ptr<LongTask> make_variable_tracking(int64_t seq_len,
                                                 const VariableTrackingOptions& o) {
  return std::make_unique<VariableTracking>(seq_len, o);
}

}  // namespace lcr::tasks
