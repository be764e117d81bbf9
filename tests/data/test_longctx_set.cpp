// data::LongSet, the text-form set reader: a set read back exactly (tokens, spans, labels
// as next tokens on the spans only), and each refusal, naming the file, the problem and the
// fix, for sets written here with prepare_longctx.py's layout.
#include <gtest/gtest.h>

#include <limits>

#include "core/data/longctx_set.hpp"
#include "tests/data/longctx_set_file.hpp"
#include "tests/data/temp_dir.hpp"

namespace lcr::test {
namespace {

constexpr int64_t kVocab = 50;

// The error LongSet::open throws for the set written from `cells` (and `spoil`).
std::string refusal(const TempDir& d, const std::vector<SetCell>& cells, int64_t vocab = kVocab,
                    const std::function<void(const h5::File&)>& spoil = {},
                    int64_t model_vocab = kVocab) {
  const std::string path = d.path("set.h5");
  write_set(path, cells, vocab, spoil);
  try {
    data::LongSet::open(path, model_vocab);
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(path + ": ", 0), 0u) << m;  // the file first
    return m;
  }
  ADD_FAILURE() << "the set was accepted";
  return {};
}

void expect_has(const std::string& m, const std::vector<std::string>& parts) {
  for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' in: " << m;
}

TEST(LongSet, ReadsBackExactly) {
  TempDir d;
  SetCell a = set_cell(16, 2, 1, kVocab), b = set_cell(24, 3, 3, kVocab);
  b.task = "cwe";
  b.category = "aggregation";
  b.depth = std::numeric_limits<double>::quiet_NaN();
  write_set(d.path("set.h5"), {a, b}, kVocab);
  const data::LongSet set = data::LongSet::open(d.path("set.h5"), kVocab);
  EXPECT_EQ(set.vocab_size(), kVocab);
  EXPECT_EQ(set.source(), "test text");
  EXPECT_EQ(set.lengths(), (std::vector<int64_t>{16, 24}));
  ASSERT_EQ(set.cells().size(), 2u);
  EXPECT_EQ(set.cells()[1].task, "cwe");
  EXPECT_EQ(set.cells()[1].category, tasks::LongCategory::Aggregation);
  EXPECT_EQ(set.cells()[1].answers, 3);
  EXPECT_TRUE(std::isnan(set.cells()[1].depth));
  for (size_t k = 0; k < 2; ++k) {
    const SetCell& want = k == 0 ? a : b;
    const tasks::LongCell c = set.read(k);
    EXPECT_EQ(c.task, want.task);
    EXPECT_EQ(c.length, want.length);
    EXPECT_EQ(c.batch.tokens, want.tokens);
    ASSERT_EQ(c.batch.batch, want.samples);
    for (int64_t r = 0; r < want.samples; ++r) {
      std::vector<int32_t> labels(size_t(want.length), data::kIgnoreLabel);
      ASSERT_EQ(int64_t(c.spans[size_t(r)].size()), want.answers);
      for (int64_t s = 0; s < want.answers; ++s) {
        const tasks::AnswerSpan sp = c.spans[size_t(r)][size_t(s)];
        EXPECT_EQ(sp.begin, want.begin[size_t(r * want.answers + s)]);
        EXPECT_EQ(sp.end, want.end[size_t(r * want.answers + s)]);
        for (int64_t t = sp.begin; t < sp.end; ++t)
          labels[size_t(t)] = c.batch.tokens_row(r)[t + 1];
      }
      EXPECT_EQ(std::vector<int32_t>(c.batch.labels_row(r), c.batch.labels_row(r) + want.length),
                labels);
    }
  }
  // Predictions equal to the labels score every span right.
  const tasks::LongCell c = set.read(1);
  std::vector<int32_t> pred(c.batch.labels);
  EXPECT_EQ(tasks::score_long(c, pred.data()).all_match(), 1.0);
}

TEST(LongSet, RefusesAnotherTokenizersVocabulary) {
  TempDir d;
  expect_has(refusal(d, {set_cell(16, 2, 1, kVocab)}, kVocab, {}, 600),
             {"vocabulary of 50 tokens", "the model's has 600", "a different tokenizer",
              "the tokenizer the model's shards were made with"});
}

TEST(LongSet, RefusesTokenIdsOutsideTheVocabulary) {
  TempDir d;
  SetCell c = set_cell(16, 2, 1, kVocab);
  c.tokens[16 + 5] = kVocab;
  expect_has(refusal(d, {c}), {"/cells/000000/tokens: sample 1 position 5 holds token id 50",
                               "outside the vocabulary [0, 50)", "prepare_longctx.py"});
}

TEST(LongSet, RefusesTruncatedArrays) {
  TempDir d;
  SetCell c = set_cell(15, 2, 1, kVocab);
  c.length = 16;  // the rows hold 15
  expect_has(refusal(d, {c}),
             {"/cells/000000/tokens has shape [2, 15]", "expected [samples, 16]", "truncated"});
  SetCell s = set_cell(16, 2, 1, kVocab);
  s.samples = 1;  // spans of one row for two rows of tokens
  s.tokens.resize(16);
  s.begin.resize(1);
  s.end.resize(1);
  write_set(d.path("ok.h5"), {s}, kVocab);  // consistent: accepted
  EXPECT_NO_THROW(data::LongSet::open(d.path("ok.h5"), kVocab));
  const std::string m = refusal(d, {set_cell(16, 2, 1, kVocab)}, kVocab, [](const h5::File& f) {
    const h5::Location g = f.group("cells").group("000000");
    H5Ldelete(g.id(), "span_end", H5P_DEFAULT);
    const int64_t one[1] = {14};
    g.write("span_end", one, {1, 1});
  });
  expect_has(m, {"span_begin has shape [2, 1] and span_end [1, 1]", "truncated"});
  expect_has(refusal(d, {set_cell(16, 2, 1, kVocab)}, kVocab,
                     [](const h5::File& f) { f.set_attr("cells", int64_t(2)); }),
             {"no group /cells/000001", "truncated"});
}

TEST(LongSet, RefusesAnswerSpansOutOfRange) {
  TempDir d;
  SetCell c = set_cell(16, 2, 1, kVocab);
  c.end[1] = 16;  // the label at 15 would be token 16
  expect_has(refusal(d, {c}),
             {"sample 1 answer 0 has the label span [12, 16)", "out of range", "inside [0, 15)"});
  c = set_cell(16, 2, 1, kVocab);
  c.begin[0] = -1;
  expect_has(refusal(d, {c}), {"[-1, 14)", "out of range"});
  c = set_cell(16, 2, 1, kVocab);
  c.end[0] = c.begin[0];
  expect_has(refusal(d, {c}), {"[12, 12)", "empty"});
  c = set_cell(16, 1, 2, kVocab);
  c.begin[1] = c.begin[0];  // overlaps the first
  expect_has(refusal(d, {c}), {"answer 1", "before the end of the previous one"});
}

TEST(LongSet, RefusesWhatIsNotASet) {
  TempDir d;
  expect_has(refusal(d, {set_cell(16, 1, 1, kVocab)}, kVocab,
                     [](const h5::File& f) { f.set_attr("format", std::string("other")); }),
             {"not a long-context evaluation set", "prepare_longctx.py"});
  expect_has(refusal(d, {set_cell(16, 1, 1, kVocab)}, kVocab,
                     [](const h5::File& f) { f.set_attr("version", int64_t(2)); }),
             {"set version 2; this lcr reads version 1"});
  SetCell c = set_cell(16, 1, 1, kVocab);
  c.task = "passkey";
  expect_has(refusal(d, {c}), {"task 'passkey', which is not a long-context task"});
  c = set_cell(16, 1, 1, kVocab);
  c.category = "tracking";
  expect_has(refusal(d, {c}), {"niah_single is in category single_needle, not 'tracking'"});
  c = set_cell(16, 1, 1, kVocab);
  c.depth = std::numeric_limits<double>::quiet_NaN();
  expect_has(refusal(d, {c}), {"has depth nan; expected a needle depth in [0, 1]"});
  try {
    data::LongSet::open(d.path("missing.h5"), kVocab);
    ADD_FAILURE() << "a missing file was accepted";
  } catch (const Error& e) {
    expect_has(e.what(), {d.path("missing.h5")});
  }
}

}  // namespace
}  // namespace lcr::test
