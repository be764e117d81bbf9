// Long-context evaluation in-process on one rank: the cell plan (tasks x lengths x depths,
// lengths too short left out, where essay haystacks come from) and evaluate_longctx's span
// counts against the data library's own scorer, score_spans, on the argmax of a plain
// forward of the same model. (Several ranks: test_train_longctx_runs.cpp.)
#include <gtest/gtest.h>

#include <cmath>

#include "core/config/longctx_config.hpp"
#include "core/model/ring_runner.hpp"
#include "core/train/eval_longctx.hpp"
#include "core/train/world.hpp"

namespace lcr::test {
namespace {

TrainConfig token_config(const std::vector<std::string>& more) {
  std::vector<std::string> o = {"data.source=niah_single", "task.niah_single.form=token",
                                "train.seq_len=64",        "model.d_model=32",
                                "attention.heads=2",       "attention.kv_heads=2",
                                "attention.head_dim=16",   "train.precision=float64"};
  o.insert(o.end(), more.begin(), more.end());
  TrainConfig c = config::load_train_config("", o);
  c.model.vocab_size = 486;  // what setup resolves from the task
  return c;
}

TEST(LongctxPlan, CellsPerTaskLengthAndDepth) {
  const TrainConfig c = token_config({"eval.longctx=niah_single,fwe,cwe", "eval.longctx_depths=3",
                                      "eval.max_length_factor=32", "eval.longctx_samples=2"});
  const train::DataFeed feed(c);
  const train::LongCtxPlan p = train::longctx_plan(c, feed);
  EXPECT_EQ(p.form, "token");
  EXPECT_EQ(p.samples, 2);
  EXPECT_TRUE(p.haystack.empty());          // no essay haystack
  const auto Ls = config::eval_lengths(c);  // 64 .. 2048
  const auto cwe = config::longctx_task_lengths(c, "cwe");
  ASSERT_EQ(cwe, (std::vector<int64_t>{2048}));  // 1242 tokens needed
  const auto fwe = config::longctx_task_lengths(c, "fwe");
  const auto niah = config::longctx_task_lengths(c, "niah_single");
  EXPECT_EQ(niah, Ls);
  ASSERT_EQ(p.cells.size(), niah.size() * 3 + fwe.size() + cwe.size());
  EXPECT_EQ(p.cells[0].task, "niah_single");
  EXPECT_EQ(p.cells[1].depth, 0.5);
  // The canonical task order (niah_single, cwe, fwe), whatever the order given.
  const train::LongCellSpec& c0 = p.cells[niah.size() * 3];
  EXPECT_EQ(c0.task, "cwe");
  EXPECT_EQ(c0.length, 2048);
  EXPECT_TRUE(std::isnan(c0.depth));
  EXPECT_EQ(p.cells.back().task, "fwe");
  // The cell's samples: the same as long_cell's, whatever depth a no-needle task is given.
  const tasks::LongCell a = train::longctx_cell(p, c0);
  const tasks::LongCell b = tasks::long_cell("cwe", p.options, 2048, 0.0, 2, p.seed);
  EXPECT_EQ(a.batch.tokens, b.batch.tokens);
}

TEST(LongctxPlan, EssayHaystacksOfAByteTextRun) {
  TrainConfig c = config::load_train_config(
      "", {"data.source=text", "eval.longctx=niah_single", "task.niah_single.haystack=essay",
           "train.seq_len=256", "eval.max_length_factor=2", "eval.longctx_depths=1"});
  c.model.vocab_size = 256;
  const train::DataFeed feed(c);
  const auto text = feed.validation_text(1 << 20);
  ASSERT_TRUE(text);
  const train::LongCtxPlan p = train::longctx_plan(c, feed);
  if (int64_t(text->size()) >= 512) {
    EXPECT_NE(p.haystack.find("windows of the run's validation text"), std::string::npos)
        << p.haystack;
    ASSERT_TRUE(p.options.niah_single.haystack_text);
    const tasks::LongCell cell = train::longctx_cell(p, p.cells.back());
    // The haystack is a window of the validation text: some 40-byte stretch of it occurs.
    const std::string row(cell.batch.tokens_row(0), cell.batch.tokens_row(0) + 40);
    EXPECT_NE(text->find(row), std::string::npos);
  } else {
    EXPECT_NE(p.haystack.find("built-in sentences"), std::string::npos) << p.haystack;
  }
  // Token shards and tasks have no text: built-in sentences, said so.
  TrainConfig t = config::load_train_config(
      "", {"data.source=copy_mixture", "model.vocab_size=300", "eval.longctx=niah_single",
           "task.niah_single.haystack=essay", "eval.longctx_form=byte"});
  EXPECT_NE(train::longctx_plan(t, train::DataFeed(t)).haystack.find("not byte text"),
            std::string::npos);
}

// evaluate_longctx counts right tokens per answer span from the positions the model scores
// (that is what makes it exact under context parallelism); on one rank it must give
// exactly score_spans of the argmax predictions.
TEST(LongctxEvaluate, SpanCountsEqualTheDataLibraryScorer) {
  const TrainConfig c = token_config({"eval.longctx=niah_multivalue,variable_tracking,fwe",
                                      "task.niah_multivalue.value=word", "eval.longctx_depths=2",
                                      "eval.longctx_samples=3", "eval.max_length_factor=4"});
  const train::DataFeed feed(c);
  const train::LongCtxPlan plan = train::longctx_plan(c, feed);
  ASSERT_FALSE(plan.empty());
  Model<double> model(c.model, 7);
  ProcessGrid grid(std::make_unique<train::SelfCommunicator>(), 1);
  int cells_done = 0;
  const auto got = train::evaluate_longctx(model, plan, grid, LayoutKind::Zigzag, 2,
                                           [&](const std::string&) { ++cells_done; });
  ASSERT_EQ(got.size(), plan.cells.size());
  EXPECT_EQ(cells_done, int(plan.cells.size()));
  int64_t correct = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const tasks::LongCell cell = train::longctx_cell(plan, plan.cells[i]);
    const data::Batch& b = cell.batch;
    View2<int32_t> tok("tok", b.batch, b.seq_len), lab("lab", b.batch, b.seq_len);
    auto ht = Kokkos::create_mirror_view(tok);
    auto hl = Kokkos::create_mirror_view(lab);
    for (int64_t r = 0; r < b.batch; ++r)
      for (int64_t t = 0; t < b.seq_len; ++t) {
        ht(r, t) = b.tokens_row(r)[t];
        hl(r, t) = b.labels_row(r)[t];
      }
    Kokkos::deep_copy(tok, ht);
    Kokkos::deep_copy(lab, hl);
    LocalAttention<double> local;
    model.forward(tok, lab, local, 1.0);
    auto logits = Kokkos::create_mirror_view_and_copy(HostSpace(), model.activations().logits);
    std::vector<int32_t> pred(size_t(b.batch * b.seq_len));
    for (int64_t row = 0; row < b.batch * b.seq_len; ++row) {
      int32_t best = 0;
      for (int32_t v = 1; v < 486; ++v)
        if (logits(row, v) > logits(row, best)) best = v;
      pred[size_t(row)] = best;
    }
    const tasks::LongScore want = tasks::score_spans(b, cell.spans, pred.data());
    const tasks::LongScore& s = got[i].score;
    SCOPED_TRACE(plan.cells[i].task + " L=" + std::to_string(plan.cells[i].length));
    EXPECT_EQ(got[i].category, cell.category);
    EXPECT_EQ(s.rows, want.rows);
    EXPECT_EQ(s.scored_tokens, want.scored_tokens);
    EXPECT_EQ(s.correct_tokens, want.correct_tokens);
    EXPECT_EQ(s.all_match_sum, want.all_match_sum);
    EXPECT_EQ(s.part_match_sum, want.part_match_sum);
    correct += s.correct_tokens;
  }
  const auto rows = train::longctx_rows(got);
  ASSERT_EQ(rows.size(), got.size());
  EXPECT_EQ(rows.front().category, "multi_needle");
  EXPECT_EQ(rows.front().samples, 3);
  std::printf("right answer tokens over all cells: %lld\n", static_cast<long long>(correct));
}

}  // namespace
}  // namespace lcr::test
