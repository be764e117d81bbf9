// longctx_mix: every sample is the drawn task's own sample (the task drawn first from the
// sample's generator, then generating from it), every task is drawn, "all" leaves out the
// tasks that do not fit, and bad options name task.longctx_mix.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/data/tasks/longctx.hpp"
#include "kernels/base/error.hpp"

namespace {

using namespace lcr;
using namespace lcr::tasks;

// The tasks of "all" at this length in the token form, computed here from the tasks alone.
std::vector<std::string> fitting(TaskOptions o) {
  std::vector<std::string> out;
  for (const std::string& n : long_task_names()) {
    long_task_options(o, n).form = "token";
    try {
      make_long_task(n, o);
      out.push_back(n);
    } catch (const Error&) {
    }
  }
  return out;
}

void expect_mix_is_its_parts(const TaskOptions& o, const std::vector<std::string>& names) {
  const auto mix = make_task("longctx_mix", o);
  TaskOptions token = o;
  for (const std::string& n : long_task_names()) long_task_options(token, n).form = "token";
  EXPECT_EQ(mix->vocab_size(), token_ids::kVocab);
  const int64_t rows = 240, L = o.seq_len;
  const data::Batch b = mix->samples(7, data::Split::validation, 0, rows);
  std::map<std::string, int> drawn;
  std::vector<int32_t> tok(L), lab(L);
  for (int64_t g = 0; g < rows; ++g) {
    data::Rng rng = mix->sample_rng(7, data::Split::validation, g);
    const std::string& name = names[rng.uniform(static_cast<int64_t>(names.size()))];
    ++drawn[name];
    make_long_task(name, token)->generate(rng, tok.data(), lab.data());
    ASSERT_EQ(std::vector<int32_t>(b.tokens_row(g), b.tokens_row(g) + L), tok) << g << " " << name;
    ASSERT_EQ(std::vector<int32_t>(b.labels_row(g), b.labels_row(g) + L), lab) << g << " " << name;
  }
  // Uniform: each of n tasks expects rows / n draws; more than 3.5 standard deviations off
  // happens by chance about once in 2000 runs of one task.
  ASSERT_EQ(drawn.size(), names.size());
  const double mean = double(rows) / names.size(), sd = std::sqrt(mean * (1 - 1.0 / names.size()));
  for (const auto& [n, c] : drawn) EXPECT_NEAR(c, mean, 3.5 * sd) << n;
}

TEST(LongMix, EverySampleIsTheDrawnTasksOwnAndEveryTaskIsDrawn) {
  TaskOptions o;
  o.seq_len = 1500;  // every task fits (cwe's default list takes 1242 tokens)
  ASSERT_EQ(fitting(o).size(), long_task_names().size());
  expect_mix_is_its_parts(o, long_task_names());
}

TEST(LongMix, AllLeavesOutTasksThatDoNotFit) {
  TaskOptions o;
  o.seq_len = 257;
  const auto names = fitting(o);
  ASSERT_LT(names.size(), long_task_names().size());  // cwe does not fit
  ASSERT_GE(names.size(), 2u);
  expect_mix_is_its_parts(o, names);
}

TEST(LongMix, AListMixesExactlyThoseTasks) {
  TaskOptions o;
  o.seq_len = 300;
  o.longctx_mix.tasks = " phonebook,niah_single ";
  expect_mix_is_its_parts(o, {"phonebook", "niah_single"});
}

TEST(LongMix, ByteFormHasTheByteVocabulary) {
  TaskOptions o;
  o.seq_len = 2000;
  o.longctx_mix.form = "byte";
  o.longctx_mix.tasks = "niah_single, variable_tracking";
  EXPECT_EQ(make_task("longctx_mix", o)->vocab_size(), 256);
}

TEST(LongMix, BadOptionsNameTheOption) {
  auto expect = [](TaskOptions o, const std::string& want) {
    try {
      make_task("longctx_mix", o);
      ADD_FAILURE() << "no error for " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  TaskOptions o;
  o.seq_len = 300;
  o.longctx_mix.form = "bytes";
  expect(o, "task.longctx_mix.form");
  o.longctx_mix.form = "token";
  o.longctx_mix.tasks = "niah_single, passkey";
  expect(o, "'passkey' is not a long-context task");
  o.longctx_mix.tasks = "niah_single,niah_single";
  expect(o, "names 'niah_single' twice");
  o.longctx_mix.tasks = "cwe";  // a named task that does not fit is an error, not left out
  expect(o, "too short for cwe");
  o.longctx_mix.tasks = "all";
  o.seq_len = 8;
  expect(o, "no long-context task fits task.seq_len 8");
  o.seq_len = 300;
  o.niah_single.distractors = 0;     // read only by niah_multikey: no error
  o.niah_multikey.distractors = -1;  // invalid options are errors under "all" too
  expect(o, "task.niah_multikey.distractors");
}

}  // namespace
