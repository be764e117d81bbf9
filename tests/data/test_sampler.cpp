// The batch sampler: windows are the source's tokens, labels are shifted inputs, the same
// request gives the same batch, steps and ranks differ, a resumed run continues exactly,
// and one shuffled epoch covers every chunk once across all ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "core/data/rng.hpp"
#include "core/data/sampler.hpp"
#include "kernels/base/error.hpp"

namespace {

using namespace lcr::data;

// Token i of the source is i % vocab... made less regular so windows are distinguishable.
SourcePtr make_source(int64_t n, int32_t vocab = 1000) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 2654435761ull) % vocab);
  return std::make_shared<TokenBuffer>(std::move(t), vocab, "test source");
}

SampleRequest request(int64_t step, int rank, int size, SamplingMode mode) {
  SampleRequest r;
  r.seed = 1234;
  r.step = step;
  r.dp_rank = rank;
  r.dp_size = size;
  r.batch = 3;
  r.seq_len = 7;
  r.mode = mode;
  return r;
}

class SamplerModes : public ::testing::TestWithParam<SamplingMode> {};

TEST_P(SamplerModes, WindowsAreSourceTokensAndLabelsAreShifted) {
  SourcePtr src = make_source(1000);
  const Windows w = sample_windows(*src, request(5, 1, 2, GetParam()));
  ASSERT_EQ(w.tokens.size(), 3u * 8u);
  for (int64_t b = 0; b < 3; ++b) {
    ASSERT_GE(w.starts[b], 0);
    ASSERT_LE(w.starts[b] + 8, 1000);
    for (int64_t t = 0; t < 8; ++t) {
      int32_t x;
      src->read(w.starts[b] + t, 1, &x);
      EXPECT_EQ(w.tokens[b * 8 + t], x);
    }
  }
  const Batch lm = to_lm_batch(w, src->vocab_size());
  EXPECT_EQ(lm.seq_len, 7);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < 7; ++t) {
      EXPECT_EQ(lm.tokens_row(b)[t], w.tokens[b * 8 + t]);
      EXPECT_EQ(lm.labels_row(b)[t], w.tokens[b * 8 + t + 1]);
    }
  EXPECT_EQ(lm.scored(), 21);
}

TEST_P(SamplerModes, DeterministicAndDistinctAcrossStepsRanksSeeds) {
  SourcePtr src = make_source(100000);
  const SamplingMode m = GetParam();
  EXPECT_EQ(sample_windows(*src, request(3, 0, 4, m)).tokens,
            sample_windows(*src, request(3, 0, 4, m)).tokens);
  std::set<int64_t> starts;
  std::set<std::vector<int32_t>> batches;
  for (int64_t step = 0; step < 5; ++step)
    for (int rank = 0; rank < 4; ++rank) {
      const Windows w = sample_windows(*src, request(step, rank, 4, m));
      batches.insert(w.tokens);
      starts.insert(w.starts.begin(), w.starts.end());
    }
  EXPECT_EQ(batches.size(), 20u);  // every (step, rank) batch differs
  // Within one epoch of 14285 chunks no window repeats; random offsets may (rarely).
  if (m == SamplingMode::shuffled_chunks) {
    EXPECT_EQ(starts.size(), 60u);
  }
  SampleRequest other = request(3, 0, 4, m);
  other.seed = 99;
  EXPECT_NE(sample_windows(*src, other).starts, sample_windows(*src, request(3, 0, 4, m)).starts);
}

TEST_P(SamplerModes, ResumeContinuesExactly) {
  SourcePtr src = make_source(5000);
  std::vector<std::vector<int32_t>> uninterrupted;
  for (int64_t step = 0; step < 10; ++step)
    uninterrupted.push_back(sample_lm_batch(*src, request(step, 1, 2, GetParam())).tokens);
  // A "new process" resuming at step 6 recomputes from (seed, step, rank) alone.
  for (int64_t step = 6; step < 10; ++step)
    EXPECT_EQ(sample_lm_batch(*src, request(step, 1, 2, GetParam())).tokens, uninterrupted[step]);
}

INSTANTIATE_TEST_SUITE_P(Modes, SamplerModes,
                         ::testing::Values(SamplingMode::shuffled_chunks,
                                           SamplingMode::random_offsets));

TEST(Sampler, ShuffledEpochCoversEveryChunkOnceAcrossRanks) {
  // 1 + 7 * 20 tokens: W = 20 chunks; 2 ranks x batch 2 = 4 samples per step, 5 steps.
  SourcePtr src = make_source(1 + 7 * 20 + 3);
  std::vector<int64_t> starts;
  for (int64_t step = 0; step < 5; ++step)
    for (int rank = 0; rank < 2; ++rank) {
      SampleRequest r = request(step, rank, 2, SamplingMode::shuffled_chunks);
      r.batch = 2;
      for (int64_t s : sample_windows(*src, r).starts) starts.push_back(s);
    }
  std::sort(starts.begin(), starts.end());
  std::vector<int64_t> expected(20);
  for (int64_t c = 0; c < 20; ++c) expected[c] = 7 * c;
  EXPECT_EQ(starts, expected);
  // The next epoch is a different order of the same chunks.
  std::vector<int64_t> e0, e1;
  for (uint64_t g = 0; g < 20; ++g) {
    e0.push_back(window_start(src->size(), 1234, 7, SamplingMode::shuffled_chunks, g));
    e1.push_back(window_start(src->size(), 1234, 7, SamplingMode::shuffled_chunks, 20 + g));
  }
  EXPECT_NE(e0, e1);
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e1, expected);
}

TEST(Sampler, PermuteIndexIsABijection) {
  for (uint64_t n : {1ull, 2ull, 3ull, 7ull, 129ull, 1000ull, 4096ull, 4097ull}) {
    for (uint64_t key : {0ull, 1ull, 0xDEADBEEFull}) {
      std::vector<uint64_t> image(n);
      for (uint64_t i = 0; i < n; ++i) image[i] = permute_index(i, n, key);
      std::sort(image.begin(), image.end());
      for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(image[i], i) << "n " << n << " key " << key;
    }
  }
  // Different keys give different orders.
  std::vector<uint64_t> a, b;
  for (uint64_t i = 0; i < 129; ++i) {
    a.push_back(permute_index(i, 129, 1));
    b.push_back(permute_index(i, 129, 2));
  }
  EXPECT_NE(a, b);
}

TEST(Sampler, RngUniformIsInRangeAndRoughlyUniform) {
  Rng rng(derive_key(7, 1, 2));
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) ++counts[rng.uniform(7)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);  // ~5 sigma
  for (int i = 0; i < 1000; ++i) {
    const double u = rng.uniform01();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
  EXPECT_NE(derive_key(1, 2), derive_key(2, 1));
}

TEST(Sampler, BadRequestsAreErrors) {
  SourcePtr src = make_source(100);
  EXPECT_THROW(sample_windows(*src, request(0, 2, 2, SamplingMode::shuffled_chunks)), lcr::Error);
  SampleRequest r = request(0, 0, 1, SamplingMode::shuffled_chunks);
  r.seq_len = 100;  // needs 101 tokens
  try {
    sample_windows(*src, r);
    ADD_FAILURE();
  } catch (const lcr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("has 100 tokens"), std::string::npos) << e.what();
  }
  r.seq_len = 99;  // exactly one window
  EXPECT_EQ(sample_windows(*src, r).starts[0], 0);
  EXPECT_THROW(sampling_mode_from_name("sequential"), lcr::Error);
  EXPECT_EQ(sampling_mode_from_name("random_offsets"), SamplingMode::random_offsets);
}

}  // namespace
