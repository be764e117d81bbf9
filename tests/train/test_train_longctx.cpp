// Long-context evaluation in-process: the eval.longctx* and [task.<name>] config (defaults,
// every bad value's message), the effective-length rule and the summaries on hand-made
// numbers, the cell plan, and the span scoring of evaluate_longctx on one rank against the
// data library's own scorer (score_spans on the argmax of a plain forward).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "../error_text.hpp"  // tests/error_text.hpp
#include "core/config/longctx_config.hpp"
#include "core/model/ring_runner.hpp"
#include "core/train/eval_longctx.hpp"
#include "core/train/run_io.hpp"
#include "core/train/world.hpp"

namespace lcr::test {
namespace {

using Overrides = std::vector<std::string>;

TrainConfig load(Overrides o) { return config::load_train_config("", o); }

// The message of a config that must be refused ("" if it loads).
std::string refused(const Overrides& o) {
  return error_of([&] { load(o); });
}

const Overrides kToken = {"data.source=niah_single", "task.niah_single.form=token",
                          "model.vocab_size=486", "train.seq_len=256"};

Overrides with(Overrides a, const Overrides& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(LongctxConfig, DefaultsTablesAndTaskSelection) {
  const TrainConfig d = load({});
  EXPECT_EQ(d.eval.longctx, "");
  EXPECT_EQ(d.eval.longctx_form, "auto");
  EXPECT_EQ(d.eval.longctx_depths, 11);
  EXPECT_EQ(d.eval.longctx_samples, 8);
  EXPECT_EQ(d.eval.longctx_threshold, 0.5);
  EXPECT_TRUE(config::longctx_tasks(d.eval).empty());
  const std::string toml = config::train_config_toml(d);
  for (const char* t : {"[task.niah_single]", "[task.niah_multikey]", "[task.niah_multivalue]",
                        "[task.niah_multiquery]", "[task.variable_tracking]", "[task.cwe]",
                        "[task.fwe]", "[task.phonebook]", "longctx_threshold = 0.5"})
    EXPECT_NE(toml.find(t), std::string::npos) << t;

  const TrainConfig c =
      load(with(kToken, {"eval.longctx=fwe, niah_single", "task.niah_multikey.distractors=5",
                         "task.niah_single.value=uuid", "task.variable_tracking.hops=2",
                         "task.cwe.common_freq=12", "task.fwe.alpha=1.5"}));
  EXPECT_EQ(config::longctx_tasks(c.eval), (std::vector<std::string>{"niah_single", "fwe"}));
  EXPECT_EQ(c.data.task.niah_multikey.distractors, 5);
  EXPECT_EQ(c.data.task.niah_single.value, "uuid");
  EXPECT_EQ(c.data.task.variable_tracking.hops, 2);
  EXPECT_EQ(c.data.task.cwe.common_freq, 12);
  EXPECT_EQ(c.data.task.fwe.alpha, 1.5);
  EXPECT_EQ(config::longctx_tasks(
                load(with(kToken, {"eval.longctx=all", "eval.max_length_factor=8"})).eval)
                .size(),
            8u);
}

TEST(LongctxConfig, FormFollowsTheModel) {
  EXPECT_EQ(config::longctx_form(load(kToken)), "token");
  EXPECT_EQ(config::longctx_form(load({"data.source=text"})), "byte");
  EXPECT_EQ(config::longctx_form(load({"data.source=passkey", "model.vocab_size=256"})), "byte");
  EXPECT_EQ(config::longctx_form(load({"data.source=copy_mixture", "model.vocab_size=600"})),
            "token");
  EXPECT_EQ(config::longctx_form(load({"data.source=text", "eval.longctx_form=token"})), "token");
  // Evaluation applies the form to every task, whatever their tables say.
  const auto o = config::longctx_task_options(load(kToken));
  EXPECT_EQ(o.cwe.form, "token");
  EXPECT_EQ(o.phonebook.form, "token");
}

TEST(LongctxConfig, LengthsSkipWhatIsTooShort) {
  // cwe's default list (10 words x 30) takes 1242 tokens: not at 256, 512, 1024.
  const TrainConfig c =
      load(with(kToken, {"eval.longctx=cwe,niah_single", "eval.max_length_factor=8"}));
  EXPECT_EQ(config::longctx_task_lengths(c, "cwe"), (std::vector<int64_t>{2048}));
  EXPECT_EQ(config::longctx_task_lengths(c, "niah_single"),
            (std::vector<int64_t>{256, 512, 1024, 2048}));
  EXPECT_TRUE(tasks::long_task_has_depth("phonebook"));
  EXPECT_FALSE(tasks::long_task_has_depth("fwe"));
}

struct Bad {
  Overrides overrides;
  std::vector<std::string> expect;
};

TEST(LongctxConfig, EveryBadValueIsRefusedNamingTheKey) {
  const std::vector<Bad> cases = {
      {{"eval.longctx=niah"}, {"unknown task 'niah' in eval.longctx", "valid names: all,"}},
      {{"eval.longctx=all,cwe"}, {"eval.longctx", "\"all\" stands alone"}},
      {{"eval.longctx=fwe,fwe"}, {"eval.longctx", "names fwe twice"}},
      {{"eval.longctx=fwe", "eval.longctx_form=bytes"},
       {"unknown value 'bytes' for eval.longctx_form", "auto, byte, token"}},
      {{"eval.longctx_depths=0"}, {"eval.longctx_depths must be in [1, 101]"}},
      {{"eval.longctx_samples=0"}, {"eval.longctx_samples must be >= 1"}},
      {{"eval.longctx_threshold=1.5"}, {"eval.longctx_threshold must be in [0, 1]"}},
      {{"eval.longctx_threshold=-0.1"}, {"eval.longctx_threshold must be in [0, 1]"}},
      {{"eval.longctx=cwe"},
       {"eval.longctx: cwe (byte form) fits no evaluation length (128 .. 512)",
        "use seq_len >=", "raise train.seq_len or eval.max_length_factor, or drop cwe"}},
      {{"data.source=copy_mixture", "model.vocab_size=32", "eval.longctx=niah_single"},
       {"eval.longctx: the token form", "at least 486 tokens; this model has 32",
        "data.source = \"copy_mixture\"", "eval.longctx = \"\""}},
      {{"data.source=copy_mixture", "model.vocab_size=100", "eval.longctx=fwe",
        "eval.longctx_form=byte"},
       {"the byte form", "at least 256 tokens; this model has 100"}},
      {with(kToken, {"eval.longctx=niah_multikey", "task.niah_multikey.distractors=-1"}),
       {"eval.longctx: niah_multikey (token form)", "task.niah_multikey.distractors"}},
      {with(kToken, {"eval.longctx=niah_single", "task.niah_single.haystack=essay"}),
       {"eval.longctx: niah_single (token form)", "task.niah_single"}},
      {{"task.niah_single.value=hex"}, {"unknown value 'hex' for task.niah_single.value"}},
      {{"task.niah_single.distractors=2"},
       {"unknown key 'task.niah_single.distractors'", "valid keys in [task.niah_single]"}},
      {{"task.cwe.depth=0.5"}, {"unknown key 'task.cwe.depth'"}},
      {{"eval.max_length_factor=128"}, {"eval.max_length_factor must be 1, 2, 4, 8, 16, 32 or 64"}},
  };
  for (const Bad& b : cases) {
    const std::string e = refused(b.overrides);
    SCOPED_TRACE(b.overrides.front());
    ASSERT_FALSE(e.empty()) << "accepted";
    for (const auto& x : b.expect) EXPECT_NE(e.find(x), std::string::npos) << x << "\n" << e;
  }
  EXPECT_EQ(refused({"eval.max_length_factor=64"}), "");
}

// A config written before a key existed resumes when the key is at its default now.
TEST(LongctxConfig, KeysAbsentFromAnOlderConfigAtTheirDefaultAreNoChange) {
  const std::string now = config::train_config_toml(load({}));
  std::string old = now;
  const size_t at = old.find("longctx = ");
  old.erase(at, old.find('\n', at) + 1 - at);
  EXPECT_TRUE(train::config_changes(old, now).empty());
  const std::string on = config::train_config_toml(load({"eval.longctx=niah_single"}));
  const auto ch = train::config_changes(old, on);
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].key, "eval.longctx");
  EXPECT_EQ(ch[0].old_value, "(absent)");
}

// The rule: the longest length with the average >= threshold there and at every shorter
// length. A dip below the threshold ends it even when a longer length recovers.
TEST(LongctxSummary, EffectiveLengthStopsAtTheFirstDip) {
  const std::vector<int64_t> L = {256, 512, 1024, 2048};
  EXPECT_EQ(train::effective_length(L, {0.9, 0.4, 0.7, 0.8}, 0.5), 256);
  EXPECT_EQ(train::effective_length(L, {0.9, 0.6, 0.5, 0.2}, 0.5), 1024);  // >= holds at 0.5
  EXPECT_EQ(train::effective_length(L, {0.9, 0.9, 0.9, 0.9}, 0.5), 2048);
  EXPECT_EQ(train::effective_length(L, {0.49, 0.9, 0.9, 0.9}, 0.5), 0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(train::effective_length(L, {0.9, nan, 0.9, 0.9}, 0.5), 256);
  EXPECT_EQ(train::effective_length(L, {0.9, 0.9, 0.9, 0.9}, 0.95), 0);
}

TEST(LongctxSummary, MeansOverDepthsTasksAndCategories) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto row = [](std::string t, std::string c, int64_t L, double d, double part, double all) {
    return train::LongRow{t, c, L, d, 4, 0.5, all, part};
  };
  // single_needle: 1.0 then 0.25 (dip) then 1.0; multi_needle: two tasks; aggregation
  // (cwe) only at 1024.
  const std::vector<train::LongRow> rows = {
      row("niah_single", "single_needle", 256, 0.0, 1.0, 1.0),
      row("niah_single", "single_needle", 256, 1.0, 1.0, 1.0),
      row("niah_single", "single_needle", 512, 0.0, 0.5, 0.5),
      row("niah_single", "single_needle", 512, 1.0, 0.0, 0.0),
      row("niah_single", "single_needle", 1024, 0.0, 1.0, 1.0),
      row("niah_single", "single_needle", 1024, 1.0, 1.0, 1.0),
      row("niah_multivalue", "multi_needle", 256, 0.0, 0.75, 0.5),
      row("niah_multikey", "multi_needle", 256, 0.0, 0.25, 0.25),
      row("niah_multivalue", "multi_needle", 512, 0.0, 0.5, 0.0),
      row("niah_multikey", "multi_needle", 512, 0.0, 0.5, 0.5),
      row("niah_multivalue", "multi_needle", 1024, 0.0, 1.0, 1.0),
      row("niah_multikey", "multi_needle", 1024, 0.0, 0.5, 0.5),
      row("cwe", "aggregation", 1024, nan, 0.75, 0.0)};
  const train::LongSummary s = train::summarize_longctx(rows, 0.5);
  EXPECT_EQ(s.lengths, (std::vector<int64_t>{256, 512, 1024}));
  EXPECT_EQ(s.tasks,
            (std::vector<std::string>{"niah_single", "niah_multikey", "niah_multivalue", "cwe"}));
  EXPECT_EQ(s.categories,
            (std::vector<std::string>{"single_needle", "multi_needle", "aggregation"}));
  EXPECT_EQ(s.task_score.at("niah_single"), (std::vector<double>{1.0, 0.25, 1.0}));
  EXPECT_EQ(s.task_all_match.at("niah_multivalue"), (std::vector<double>{0.5, 0.0, 1.0}));
  EXPECT_TRUE(std::isnan(s.task_score.at("cwe")[0]));
  EXPECT_EQ(s.category_score.at("multi_needle"), (std::vector<double>{0.5, 0.5, 0.75}));
  // 256: (1 + 0.5) / 2; 512: (0.25 + 0.5) / 2 < 0.5 (the dip); 1024: (1 + 0.75 + 0.75) / 3.
  EXPECT_DOUBLE_EQ(s.average[0], 0.75);
  EXPECT_DOUBLE_EQ(s.average[1], 0.375);
  EXPECT_DOUBLE_EQ(s.average[2], 2.5 / 3);
  EXPECT_EQ(s.effective_length, 256);  // 1024 recovers, but the dip at 512 ends it
  const std::string text = train::format_longctx(s, "");
  EXPECT_NE(text.find("effective length 256"), std::string::npos) << text;
  EXPECT_NE(text.find("cwe                       -        -    0.750"), std::string::npos) << text;
  EXPECT_NE(train::longctx_line(s).find("0.750@256 0.375@512"), std::string::npos);
  EXPECT_NE(train::format_longctx(train::summarize_longctx(rows, 0.8), "")
                .find("effective length none: the average at the shortest length 256 is 0.750"),
            std::string::npos);
}

}  // namespace
}  // namespace lcr::test
