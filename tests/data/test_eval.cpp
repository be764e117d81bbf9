// Evaluation inputs: perplexity-vs-length windows and the passkey (length x depth) grid.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/data/eval_windows.hpp"
#include "core/data/tasks/passkey_grid.hpp"
#include "core/data/tasks/task.hpp"
#include "core/data/text.hpp"
#include "kernels/base/error.hpp"

namespace {

using namespace lcr::data;
using namespace lcr::tasks;

TEST(PerplexityWindows, ConsecutiveWindowsFromTheValidationStart) {
  std::vector<int32_t> t(1000);
  for (int i = 0; i < 1000; ++i) t[i] = (i * 37) % 256;
  TokenBuffer val(t, 256, "val");
  const std::vector<int64_t> lengths = extrapolation_lengths(7);
  EXPECT_EQ(lengths, (std::vector<int64_t>{7, 14, 28, 56, 112}));
  const std::vector<LengthWindows> w = perplexity_windows(val, lengths, 20);
  ASSERT_EQ(w.size(), 5u);
  for (const LengthWindows& lw : w) {
    const int64_t n = lw.length;
    EXPECT_EQ(lw.batch.batch, std::min<int64_t>(20, 999 / n));
    EXPECT_EQ(lw.batch.seq_len, n);
    for (int64_t k = 0; k < lw.batch.batch; ++k)
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(lw.batch.tokens_row(k)[i], t[k * n + i]);
        ASSERT_EQ(lw.batch.labels_row(k)[i], t[k * n + i + 1]);
      }
  }
  // Deterministic: the same call gives the same windows.
  EXPECT_EQ(perplexity_windows(val, {56}, 20)[0].batch.tokens, w[3].batch.tokens);
  EXPECT_EQ(perplexity_windows(val, {999}, 5)[0].batch.batch, 1);  // exactly one window fits
  try {
    perplexity_windows(val, {1000}, 5);
    ADD_FAILURE();
  } catch (const lcr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("evaluation length 1000 needs 1001"), std::string::npos)
        << e.what();
  }
}

TEST(PerplexityWindows, MeterIsExpOfMeanNll) {
  PerplexityMeter m;
  m.add(2.0 * std::log(3.0), 2);  // two tokens, each with NLL log 3
  EXPECT_NEAR(m.perplexity(), 3.0, 1e-12);
}

TEST(PasskeyGrid, CellsCoverTheGridDeterministically) {
  PasskeyGridOptions g;
  g.lengths = {256, 1024};
  g.depths = evenly_spaced_depths(3);
  g.samples_per_cell = 4;
  g.seed = 11;
  EXPECT_EQ(g.depths, (std::vector<double>{0.0, 0.5, 1.0}));
  const std::vector<PasskeyCell> cells = passkey_grid(g);
  ASSERT_EQ(cells.size(), 6u);
  const std::string head = "The pass key is ";
  std::vector<std::string> keys_of_first_cell;
  for (size_t c = 0; c < cells.size(); ++c) {
    const PasskeyCell& cell = cells[c];
    EXPECT_EQ(cell.length, g.lengths[c / 3]);  // length-major
    EXPECT_EQ(cell.depth, g.depths[c % 3]);
    EXPECT_EQ(cell.batch.batch, 4);
    EXPECT_EQ(cell.batch.scored(), 4 * 8);
    for (int64_t r = 0; r < 4; ++r) {
      const std::string text = bytes_to_text(cell.batch.tokens_row(r), cell.length);
      const std::string key = text.substr(text.find(head) + head.size(), 8);
      EXPECT_EQ(text.substr(cell.length - 8), key);  // the answer is the hidden key
      if (c == 0)
        keys_of_first_cell.push_back(key);
      else
        EXPECT_EQ(key, keys_of_first_cell[r]);  // sample r has one key in every cell
    }
  }
  const std::vector<PasskeyCell> again = passkey_grid(g);
  for (size_t c = 0; c < cells.size(); ++c) EXPECT_EQ(again[c].batch.tokens, cells[c].batch.tokens);
  // The grid's samples are validation samples: not what training draws.
  TaskOptions o;
  o.seq_len = 256;
  o.passkey.random_depth = false;
  o.passkey.depth = 0.0;
  EXPECT_NE(make_task("passkey", o)->batch(11, 0, 0, 1, 4).tokens, cells[0].batch.tokens);

  g.lengths = {64};
  EXPECT_THROW(passkey_grid(g), lcr::Error);  // too short for needle + question
}

}  // namespace
