#include "core/train/longctx_io.hpp"

#include <algorithm>
#include <cmath>

#include "core/config/train_config.hpp"
#include "core/data/tasks/longctx.hpp"
#include "kernels/base/error.hpp"

namespace lcr::train {
namespace {

const char* const kTable = "eval/longctx";

std::vector<std::string> category_names() {
  std::vector<std::string> out;
  for (int c = 0; c <= int(tasks::LongCategory::PhoneBook); ++c)
    out.push_back(tasks::long_category_name(static_cast<tasks::LongCategory>(c)));
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ",") + x;
  return out;
}

int64_t code_of(const std::vector<std::string>& names, const std::string& name) {
  const auto it = std::find(names.begin(), names.end(), name);
  require(it != names.end(), "internal error: '", name, "' has no eval/longctx code");
  return int64_t(it - names.begin());
}

}  // namespace

void add_longctx_table(io::RunLayout& layout) {
  using io::DType;
  layout.tables.push_back(
      {kTable,
       "long-context tasks, one row per (step, task, length, depth) cell",
       {{"task", {}, DType::I64, "task: index into the group attribute task_names"},
        {"category", {}, DType::I64, "category: index into the group attribute category_names"},
        {"length", {}, DType::I64, "context length (tokens)"},
        {"depth", {}, DType::F64, "needle depth (0 = start, 1 = before the question); NaN: none"},
        {"samples", {}, DType::I64, "samples in the cell"},
        {"token_accuracy", {}, DType::F64, "argmax accuracy on the answer tokens"},
        {"all_match", {}, DType::F64, "fraction of samples with every answer exactly right"},
        {"part_match",
         {},
         DType::F64,
         "mean over samples of the fraction of answers exactly right (the score)"}}});
  layout.attrs[kTable] = {{"task_names", joined(tasks::long_task_names())},
                          {"category_names", joined(category_names())}};
}

io::Row longctx_row(const LongRow& r) {
  return {{"task", {double(code_of(tasks::long_task_names(), r.task))}},
          {"category", {double(code_of(category_names(), r.category))}},
          {"length", {double(r.length)}},
          {"depth", {r.depth}},
          {"samples", {double(r.samples)}},
          {"token_accuracy", {r.token_accuracy}},
          {"all_match", {r.all_match}},
          {"part_match", {r.part_match}}};
}

std::vector<LongRow> read_longctx_rows(const io::RunReader& r, int64_t step, int64_t* step_out) {
  const auto tables = r.tables();
  if (std::find(tables.begin(), tables.end(), kTable) == tables.end() || r.rows(kTable) == 0)
    return {};
  const auto attrs = r.attributes(kTable);
  const auto names = [&](const char* key) {
    const auto it = attrs.find(key);
    require(it != attrs.end(), r.path(), ": eval/longctx has no attribute ", key);
    return config::split_paths(it->second);
  };
  const std::vector<std::string> task_names = names("task_names"), cats = names("category_names");
  const auto steps = r.steps(kTable);
  const int64_t want = step < 0 ? steps.back() : step;
  if (step_out) *step_out = want;
  const auto col = [&](const char* c) { return r.column(kTable, c); };
  const auto task = col("task"), cat = col("category"), len = col("length"), depth = col("depth"),
             samples = col("samples"), tok = col("token_accuracy"), all = col("all_match"),
             part = col("part_match");
  std::vector<LongRow> out;
  const auto name_of = [&](const std::vector<std::string>& v, double code) {
    const size_t i = size_t(code);
    return code >= 0 && i < v.size() ? v[i] : "code " + std::to_string(int64_t(code));
  };
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i] == want)
      out.push_back({name_of(task_names, task[i]), name_of(cats, cat[i]), int64_t(len[i]), depth[i],
                     int64_t(samples[i]), tok[i], all[i], part[i]});
  return out;
}

}  // namespace lcr::train
