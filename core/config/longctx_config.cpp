#include "core/config/longctx_config.hpp"

#include <algorithm>
#include <cmath>

#include "core/data/tasks/longctx.hpp"
#include "kernels/base/error.hpp"

namespace lcr::config {
namespace {

using StringChoices = std::vector<std::pair<std::string, std::string>>;

StringChoices choices(std::initializer_list<const char*> names) {
  StringChoices out;
  for (const char* n : names) out.emplace_back(n, n);
  return out;
}

void bind_common(Table& t, tasks::LongContextOptions& o, bool needle) {
  t.choice("form", o.form, choices({"byte", "token"}),
           "byte: ASCII text, vocabulary 256; token: the 486 ids the long-context tasks "
           "share (evaluation takes eval.longctx_form)");
  if (!needle) return;
  t.field("random_depth", o.random_depth,
          "training: the needle depth uniform in [0, 1] per sample (evaluation sets its own)");
  t.field("depth", o.depth, "the fixed needle depth when random_depth is false");
}

void bind_haystack(Table& t, tasks::HaystackOptions& o) {
  bind_common(t, o, true);
  t.choice("haystack", o.haystack, choices({"noise", "essay"}),
           "noise: passkey's filler (byte) or noise symbols (token); essay: natural "
           "sentences, byte form only");
}

void bind_niah(Table& root, const char* name, tasks::NiahOptions& o) {
  Table& t = root.table(name);
  bind_haystack(t, o);
  t.choice("value", o.value, choices({"number", "uuid", "word"}),
           "the needles' values: 7-digit numbers, 8-4-4-4-12 hex uuids, or words");
  const std::string n = name;
  if (n == "niah_multikey")
    t.field("distractors", o.distractors, "needles with other keys and values");
  if (n == "niah_multivalue") t.field("values", o.values, "values of the one key asked for");
  if (n == "niah_multiquery") t.field("queries", o.queries, "keys asked for, one needle each");
}

}  // namespace

void bind_longctx_tasks(Table& task, tasks::TaskOptions& o) {
  bind_niah(task, "niah_single", o.niah_single);
  bind_niah(task, "niah_multikey", o.niah_multikey);
  bind_niah(task, "niah_multivalue", o.niah_multivalue);
  bind_niah(task, "niah_multiquery", o.niah_multiquery);
  Table& vt = task.table("variable_tracking");
  bind_haystack(vt, o.variable_tracking);
  vt.field("chains", o.variable_tracking.chains,
           "chains per sample; chain 0 is asked for, the others distract");
  vt.field("hops", o.variable_tracking.hops, "copy assignments per chain after its value");
  Table& cwe = task.table("cwe");
  bind_common(cwe, o.cwe, false);
  cwe.field("common", o.cwe.common, "common words: the answers");
  cwe.field("common_freq", o.cwe.common_freq, "occurrences of each common word");
  cwe.field("rare_freq", o.cwe.rare_freq, "occurrences of each other word (at most)");
  Table& fwe = task.table("fwe");
  bind_common(fwe, o.fwe, false);
  fwe.field("alpha", o.fwe.alpha, "Zipf exponent: P(rank r) proportional to r^-alpha");
  fwe.field("answers", o.fwe.answers, "the most frequent words asked for");
  bind_common(task.table("phonebook"), o.phonebook, true);
  Table& mix = task.table("longctx_mix");
  mix.field("tasks", o.longctx_mix.tasks,
            "the tasks mixed, comma-separated, or \"all\" (those that fit train.seq_len)");
  mix.choice("form", o.longctx_mix.form, choices({"token", "byte"}),
             "the form of every task of the mixture");
}

void bind_longctx_eval(Table& t, EvalOptions& e) {
  t.field("longctx", e.longctx,
          "long-context tasks to evaluate: \"all\" or comma-separated names (niah_single, "
          "niah_multikey, niah_multivalue, niah_multiquery, variable_tracking, cwe, fwe, "
          "phonebook); \"\" = off");
  t.choice("longctx_form", e.longctx_form, choices({"auto", "byte", "token"}),
           "form of the long-context tasks; auto: data.source's when it is one, byte for "
           "byte-level models, token otherwise");
  t.field("longctx_depths", e.longctx_depths,
          "needle depths evenly spaced over [0, 1] (niah_*, variable_tracking, phonebook)");
  t.field("longctx_samples", e.longctx_samples, "samples per (task, length, depth) cell");
  t.field("longctx_threshold", e.longctx_threshold,
          "effective context length: the longest length whose category-average score, and "
          "every shorter length's, is >= this");
  t.field("longctx_set", e.longctx_set,
          "an HDF5 set of the text form (experiments/data/prepare_longctx.py, made with the "
          "shards' tokenizer): its cells are evaluated instead of eval.longctx's; \"\" = none");
}

std::vector<std::string> longctx_tasks(const EvalOptions& e) {
  const auto& all = tasks::long_task_names();
  std::string valid = "all";
  for (const auto& n : all) valid += ", " + n;
  std::vector<std::string> given = split_paths(e.longctx);  // comma-separated, trimmed
  if (given.size() == 1 && given[0] == "all") return all;
  std::vector<std::string> out;
  for (const std::string& n : given) {
    require(n != "all", "eval.longctx = \"", e.longctx,
            "\": \"all\" stands alone (it is every task); valid names: ", valid);
    require(tasks::is_long_task(n), "unknown task '", n, "' in eval.longctx = \"", e.longctx,
            "\"; valid names: ", valid);
    require(std::find(out.begin(), out.end(), n) == out.end(), "eval.longctx = \"", e.longctx,
            "\" names ", n, " twice");
    out.push_back(n);
  }
  std::vector<std::string> ordered;  // the canonical order, whatever the order given
  for (const auto& n : all)
    if (std::find(out.begin(), out.end(), n) != out.end()) ordered.push_back(n);
  return ordered;
}

bool longctx_on(const EvalOptions& e) {
  return !e.longctx_set.empty() || !longctx_tasks(e).empty();
}

std::string longctx_form(const TrainConfig& cfg) {
  if (cfg.eval.longctx_form != "auto") return cfg.eval.longctx_form;
  if (cfg.data.source == "longctx_mix") return cfg.data.task.longctx_mix.form;
  if (tasks::is_long_task(cfg.data.source)) {
    tasks::TaskOptions o = cfg.data.task;
    return tasks::long_task_options(o, cfg.data.source).form;
  }
  if (cfg.data.source == "text") return "byte";
  const int64_t v = cfg.model.vocab_size;
  return v == 256 || v == 257 ? "byte" : "token";
}

int32_t longctx_form_vocab(const std::string& form) {
  return form == "byte" ? 256 : tasks::token_ids::kVocab;
}

tasks::TaskOptions longctx_task_options(const TrainConfig& cfg) {
  tasks::TaskOptions o = cfg.data.task;
  const std::string form = longctx_form(cfg);
  for (tasks::LongContextOptions* c : std::initializer_list<tasks::LongContextOptions*>{
           &o.niah_single, &o.niah_multikey, &o.niah_multivalue, &o.niah_multiquery,
           &o.variable_tracking, &o.cwe, &o.fwe, &o.phonebook})
    c->form = form;
  return o;
}

std::vector<int64_t> longctx_task_lengths(const TrainConfig& cfg, const std::string& task) {
  const std::vector<int64_t> lengths = eval_lengths(cfg);
  tasks::TaskOptions o = longctx_task_options(cfg);
  std::vector<int64_t> out;
  std::string last_error;
  for (int64_t n : lengths) {
    o.seq_len = n;
    try {
      tasks::make_long_task(task, o);
      out.push_back(n);
    } catch (const Error& e) {
      // Too short is left out below the first length that fits. Any other refusal, or one
      // after a length that fitted (too long: a list runs out of names or words), stops.
      if (out.empty() && dynamic_cast<const tasks::TooShort*>(&e)) {
        last_error = e.what();
        continue;
      }
      if (!out.empty())
        throw_error("eval.longctx: ", task, " (", longctx_form(cfg), " form) fits length ",
                    out.back(), " but not ", n, ": ", e.what(),
                    "; lower eval.max_length_factor or drop ", task, " from eval.longctx");
      throw_error("eval.longctx: ", task, " (", longctx_form(cfg), " form): ", e.what());
    }
  }
  if (out.empty())
    throw_error(
        "eval.longctx: ", task, " (", longctx_form(cfg), " form) fits no evaluation length (",
        lengths.front(), " .. ", lengths.back(), "): at ", lengths.back(), ": ", last_error,
        "; raise train.seq_len or eval.max_length_factor, or drop ", task, " from eval.longctx");
  return out;
}

void check_longctx_config(const TrainConfig& cfg) {
  const EvalOptions& e = cfg.eval;
  const std::vector<std::string> names = longctx_tasks(e);
  require(e.longctx_depths >= 1 && e.longctx_depths <= 101,
          "eval.longctx_depths must be in [1, 101] (needle depths), got ", e.longctx_depths);
  require(e.longctx_samples >= 1, "eval.longctx_samples must be >= 1 (samples per cell), got ",
          e.longctx_samples);
  require(
      std::isfinite(e.longctx_threshold) && e.longctx_threshold >= 0 && e.longctx_threshold <= 1,
      "eval.longctx_threshold must be in [0, 1] (a score), got ", e.longctx_threshold);
  if (names.empty() || !e.longctx_set.empty()) return;  // a set is checked when it is opened
  const std::string form = longctx_form(cfg);
  const int32_t need = longctx_form_vocab(form);
  const int64_t have = cfg.model.vocab_size;
  if (have > 0 && have < need)  // 0: not known yet (the data decides it)
    throw_error("eval.longctx: the ", form,
                " form of the long-context tasks (eval.longctx_form = \"", e.longctx_form, "\"",
                e.longctx_form == "auto" ? " -> " + form : "",
                ") needs a model vocabulary of at least ", need, " tokens; this model has ", have,
                " (data.source = \"", cfg.data.source, "\"). ",
                form == "token"
                    ? "Evaluate a model trained on a long-context task's token form (data.source "
                      "= \"niah_single\" with task.niah_single.form = \"token\"), or one with "
                      "model.vocab_size >= 486"
                    : "Evaluate a byte-level model (data.source = \"text\")",
                ", or set eval.longctx = \"\"");
  for (const std::string& t : names) longctx_task_lengths(cfg, t);
}

}  // namespace lcr::config
