// longctx_mix: a training mixture of the long-context tasks (longctx.hpp). Sample g draws
// its task uniformly from its own generator, then that task generates the rest from the
// same generator, so the mixture is as deterministic as each task. Every task takes the
// mixture's form; in the token form they share one vocabulary (486 ids), so one model
// learns them all and is then evaluated on each (eval.longctx).
#include <sstream>

#include "core/data/tasks/longctx.hpp"
#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

// The names of o.tasks: "all" = every long-context task whose fixed parts fit seq_len (a
// task that does not fit is left out); a list = exactly those (one that does not fit is an
// error, from its constructor, naming its minimum length).
std::vector<std::unique_ptr<LongTask>> make_parts(const TaskOptions& base) {
  const LongMixOptions& m = base.longctx_mix;
  require(m.form == "token" || m.form == "byte",
          "task.longctx_mix.form must be \"token\" or \"byte\", got \"", m.form, "\"");
  TaskOptions o = base;
  for (const std::string& n : long_task_names()) long_task_options(o, n).form = m.form;
  std::vector<std::unique_ptr<LongTask>> parts;
  if (m.tasks == "all") {
    for (const std::string& n : long_task_names()) {
      try {
        parts.push_back(make_long_task(n, o));
      } catch (const TooShort&) {  // left out of "all" at this seq_len
      }
    }
    require(!parts.empty(), "task.longctx_mix: no long-context task fits task.seq_len ",
            base.seq_len, "; raise it");
    return parts;
  }
  std::stringstream list(m.tasks);
  std::string n;
  while (std::getline(list, n, ',')) {
    const size_t a = n.find_first_not_of(' '), b = n.find_last_not_of(' ');
    n = a == std::string::npos ? "" : n.substr(a, b - a + 1);
    require(is_long_task(n), "task.longctx_mix.tasks: '", n,
            "' is not a long-context task (niah_single, niah_multikey, niah_multivalue, "
            "niah_multiquery, variable_tracking, cwe, fwe, phonebook; or \"all\")");
    for (const auto& p : parts)
      require(p->name() != n, "task.longctx_mix.tasks names '", n, "' twice");
    parts.push_back(make_long_task(n, o));
  }
  require(!parts.empty(), "task.longctx_mix.tasks is empty; name tasks or use \"all\"");
  return parts;
}

class LongMix : public Task {
 public:
  explicit LongMix(const TaskOptions& o) : Task(o.seq_len), parts_(make_parts(o)) {}
  std::string name() const override { return "longctx_mix"; }
  std::string description() const override {
    std::ostringstream os;
    os << "long-context mixture (" << parts_.front()->vocab_size() << "-token vocabulary):";
    for (const auto& p : parts_) os << " " << p->name();
    os << ", one uniformly per sample; length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return parts_.front()->vocab_size(); }
  void generate(data::Rng& rng, int32_t* tokens, int32_t* labels) const override {
    parts_[rng.uniform(static_cast<int64_t>(parts_.size()))]->generate(rng, tokens, labels);
  }

 private:
  std::vector<std::unique_ptr<LongTask>> parts_;
};

}  // namespace

std::unique_ptr<Task> make_longctx_mix(const TaskOptions& o) {
  return std::make_unique<LongMix>(o);
}

}  // namespace lcr::tasks
