#pragma once
// The independent oracle's frame for the long-context task tests: a generated row, what an
// oracle derives from it by parsing alone (where the answers start, what they are), and the
// check of the answer region, labels and spans against that. Token ids are the documented
// numbers (docs/data.md), not the library's constants.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/data/tasks/longctx.hpp"
#include "kernels/base/error.hpp"

namespace lcr_test {

using lcr::data::Batch;
using lcr::data::kIgnoreLabel;
using lcr::data::Split;
using namespace lcr::tasks;
using Ids = std::vector<int32_t>;

// Documented token ids.
constexpr int32_t PAD = 0, BOS = 1, NEEDLE = 2, IS = 3, QUERY = 4, ANSWER = 5, SEP = 6, DASH = 7,
                  ITEM = 8;
inline bool is_digit_id(int32_t t) { return t >= 16 && t < 32; }
inline bool is_key_id(int32_t t) { return t >= 32 && t < 288; }
inline bool is_value_word_id(int32_t t) { return t >= 288 && t < 352; }
inline bool is_noise_id(int32_t t) { return t >= 352 && t < 416; }
inline bool is_syllable_id(int32_t t) { return t >= 416 && t < 486; }

struct Row {
  Ids tokens, labels;
  std::string text;  // byte form: the tokens as bytes
};

// What an oracle derives: where the answers start and what they are.
struct Expected {
  int64_t answer_start = -1;
  std::vector<Ids> answers;
  Ids separator;
};

inline Ids ids_of(const std::string& s) { return Ids(s.begin(), s.end()); }

inline bool all_chars(const std::string& s, const std::function<bool(char)>& pred) {
  return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}
inline bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
inline bool lower(char c) { return c >= 'a' && c <= 'z'; }
inline bool upper(char c) { return c >= 'A' && c <= 'Z'; }

// The answer region is exactly the answers joined by the separator, ending the sequence;
// the spans are the positions before each answer's tokens; the labels are the next tokens
// there and nowhere else.
inline void check_answer_region(const Row& row, const AnswerSpans& spans, const Expected& e) {
  const int64_t L = static_cast<int64_t>(row.tokens.size());
  ASSERT_GE(e.answer_start, 1);
  Ids region;
  AnswerSpans want;
  for (size_t i = 0; i < e.answers.size(); ++i) {
    if (i > 0) region.insert(region.end(), e.separator.begin(), e.separator.end());
    const int64_t first = e.answer_start + static_cast<int64_t>(region.size());
    region.insert(region.end(), e.answers[i].begin(), e.answers[i].end());
    want.push_back({first - 1, e.answer_start + static_cast<int64_t>(region.size()) - 1});
  }
  ASSERT_EQ(e.answer_start + static_cast<int64_t>(region.size()), L) << "answers end the sequence";
  ASSERT_EQ(Ids(row.tokens.begin() + e.answer_start, row.tokens.end()), region);
  ASSERT_EQ(spans.size(), want.size());
  std::vector<bool> scored(L, false);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(spans[i].begin, want[i].begin);
    EXPECT_EQ(spans[i].end, want[i].end);
    for (int64_t t = want[i].begin; t < want[i].end; ++t) scored[t] = true;
  }
  for (int64_t t = 0; t < L; ++t)
    ASSERT_EQ(row.labels[t], scored[t] ? row.tokens[t + 1] : kIgnoreLabel) << "position " << t;
}

using Oracle = std::function<void(const Row&, Expected&)>;

// Runs the oracle over 200 samples (4 depths x 50) at each of the lengths that fit.
inline void run_oracle(const std::string& task, const TaskOptions& base, const Oracle& oracle,
                       const std::vector<int64_t>& lengths = {257, 1001, 4099}) {
  int64_t ran = 0;
  for (int64_t L : lengths) {
    TaskOptions o = base;
    o.seq_len = L;
    std::unique_ptr<LongTask> t;
    try {
      t = make_long_task(task, o);
    } catch (const lcr::Error& e) {
      ASSERT_NE(std::string(e.what()).find("too short"), std::string::npos) << e.what();
      continue;
    }
    for (double depth : {-1.0, 0.0, 0.3, 1.0}) {
      std::vector<AnswerSpans> spans;
      const Batch b = t->samples_with_spans(11, Split::validation, 1000, 50, depth, spans);
      for (int64_t r = 0; r < b.batch; ++r) {
        SCOPED_TRACE(task + " L " + std::to_string(L) + " depth " + std::to_string(depth) +
                     " row " + std::to_string(r));
        Row row;
        row.tokens.assign(b.tokens_row(r), b.tokens_row(r) + L);
        row.labels.assign(b.labels_row(r), b.labels_row(r) + L);
        for (int32_t x : row.tokens) {
          ASSERT_GE(x, 0);
          ASSERT_LT(x, b.vocab_size);
          row.text += static_cast<char>(x);
        }
        Expected e;
        oracle(row, e);
        if (::testing::Test::HasFatalFailure()) return;
        check_answer_region(row, spans[r], e);
        if (::testing::Test::HasFatalFailure()) return;
        ++ran;
      }
    }
  }
  EXPECT_GT(ran, 0) << task << ": no length fitted";
}

}  // namespace lcr_test
