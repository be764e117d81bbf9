// eval.longctx_set in-process on one rank: the plan holds a text-form set's cells (instead
// of eval.longctx's), evaluate_longctx scores them, and a set the run cannot use (another
// vocabulary, a length the ring cannot split) is refused when the plan is made.
#include <gtest/gtest.h>

#include "core/config/longctx_config.hpp"
#include "core/train/eval_longctx.hpp"
#include "core/train/world.hpp"
#include "tests/data/longctx_set_file.hpp"
#include "tests/data/temp_dir.hpp"

namespace lcr::test {
namespace {

constexpr int64_t kVocab = 486;  // the model's: what setup resolves for this data source

TrainConfig set_config(const std::string& set, const std::vector<std::string>& more = {}) {
  std::vector<std::string> o = {"data.source=niah_single", "task.niah_single.form=token",
                                "train.seq_len=32",        "model.d_model=32",
                                "attention.heads=2",       "attention.kv_heads=2",
                                "attention.head_dim=16",   "train.precision=float64",
                                "eval.longctx=all",        "eval.longctx_set=\"" + set + "\""};
  o.insert(o.end(), more.begin(), more.end());
  TrainConfig c = config::load_train_config("", o);
  c.model.vocab_size = kVocab;
  return c;
}

std::string plan_error(const TrainConfig& c) {
  try {
    train::longctx_plan(c, train::DataFeed(c));
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the set was accepted";
  return {};
}

TEST(LongctxSetPlan, HoldsTheSetsCellsAndEvaluatesThem) {
  TempDir d;
  SetCell fwe = set_cell(48, 3, 3, kVocab);
  fwe.task = "fwe";
  fwe.category = "aggregation";
  fwe.depth = std::nan("");
  write_set(d.path("set.h5"), {set_cell(32, 2, 1, kVocab), fwe}, kVocab);
  const TrainConfig c = set_config(d.path("set.h5"));
  EXPECT_TRUE(config::longctx_on(c.eval));
  const train::LongCtxPlan plan = train::longctx_plan(c, train::DataFeed(c));
  EXPECT_EQ(plan.form, "text");  // the set, not eval.longctx = "all"
  ASSERT_EQ(plan.cells.size(), 2u);
  EXPECT_EQ(plan.cells[1].task, "fwe");
  EXPECT_EQ(plan.cells[1].set_cell, 1);
  EXPECT_NE(plan.haystack.find("test text"), std::string::npos) << plan.haystack;
  const tasks::LongCell cell = train::longctx_cell(plan, plan.cells[1]);
  EXPECT_EQ(cell.batch.tokens, fwe.tokens);
  EXPECT_EQ(cell.spans.size(), 3u);

  Model<double> model(c.model, 7);
  ProcessGrid grid(std::make_unique<train::SelfCommunicator>(), 1);
  std::vector<std::string> lines;
  const auto got = train::evaluate_longctx(model, plan, grid, LayoutKind::Zigzag, 2,
                                           [&](const std::string& l) { lines.push_back(l); });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(lines, (std::vector<std::string>{"niah_single L=32 depth 0.50", "fwe L=48"}));
  EXPECT_EQ(got[1].score.rows, 3);
  EXPECT_EQ(got[1].score.scored_tokens, 3 * 3 * 2);
  EXPECT_EQ(train::longctx_rows(got)[1].category, "aggregation");
}

TEST(LongctxSetPlan, RefusesAnotherVocabularyBeforeCompute) {
  TempDir d;
  write_set(d.path("set.h5"), {set_cell(32, 1, 1, 600)}, 600);
  const std::string m = plan_error(set_config(d.path("set.h5")));
  EXPECT_EQ(m.rfind(d.path("set.h5") + ": ", 0), 0u) << m;
  EXPECT_NE(m.find("vocabulary of 600 tokens"), std::string::npos) << m;
  EXPECT_NE(m.find("the model's has 486"), std::string::npos) << m;
}

TEST(LongctxSetPlan, RefusesLengthsTheRingCannotSplit) {
  TempDir d;
  write_set(d.path("set.h5"), {set_cell(32, 1, 1, kVocab), set_cell(6, 1, 1, kVocab)}, kVocab);
  const std::string m =
      plan_error(set_config(d.path("set.h5"), {"parallel.cp=4", "parallel.layout=\"zigzag\""}));
  EXPECT_EQ(m.rfind(d.path("set.h5") + ": its length 6 cannot be split over parallel.cp = 4", 0),
            0u)
      << m;
  EXPECT_NE(m.find("longer --lengths"), std::string::npos) << m;
  // The contiguous layout needs only cp positions.
  EXPECT_NO_THROW(train::longctx_plan(
      set_config(d.path("set.h5"), {"parallel.cp=4", "parallel.layout=\"contiguous\""}),
      train::DataFeed(set_config(d.path("set.h5")))));
}

}  // namespace
}  // namespace lcr::test
