#pragma once
// Deterministic training batches from a token source. There is no sampler state: the
// windows of a step are a pure function of (seed, step, dp_rank, dp_size, batch, seq_len)
// and the data, so a run resumed from a checkpoint at step N draws exactly what the
// uninterrupted run would have drawn at step N.
//
// Row b of DP rank r at step s is global sample g = (s * dp_size + r) * batch + b. Each
// global sample is one window of seq_len + 1 tokens: inputs are its first seq_len tokens,
// labels the last seq_len (shifted by one). The context-parallel ranks of one DP group
// call with the same dp_rank, get the same windows, and each keeps its own slice.
//
// Modes:
//   shuffled_chunks  (default) the source is cut into W = floor((N - 1) / seq_len)
//                    chunks starting at multiples of seq_len; epoch e = g / W visits all
//                    W chunks once in an order shuffled by a keyed bijection of
//                    (seed, e). No two samples of one epoch repeat a window, and all
//                    ranks together cover the data.
//   random_offsets   each sample starts at an independent uniform offset in
//                    [0, N - seq_len - 1] (keyed by (seed, g)); windows may overlap.
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/batch.hpp"
#include "core/data/token_source.hpp"

namespace lcr::data {

enum class SamplingMode { shuffled_chunks, random_offsets };

struct SampleRequest {
  uint64_t seed = 0;
  int64_t step = 0;
  int dp_rank = 0;
  int dp_size = 1;
  int64_t batch = 1;    // rows per DP rank per step
  int64_t seq_len = 1;  // inputs per row; each window holds seq_len + 1 tokens
  SamplingMode mode = SamplingMode::shuffled_chunks;
};

// Windows [batch, seq_len + 1], row-major, and where each starts in the source.
struct Windows {
  int64_t batch = 0;
  int64_t seq_len = 0;
  std::vector<int32_t> tokens;  // [batch, seq_len + 1]
  std::vector<int64_t> starts;  // [batch]
};

// Throws for a bad request (rank outside [0, dp_size), non-positive sizes) or a source
// too short for one window, naming the sizes and the fix.
Windows sample_windows(const TokenSource& source, const SampleRequest& request);

// Start of global sample g in the source; the same numbers sample_windows uses.
int64_t window_start(int64_t source_size, uint64_t seed, int64_t seq_len, SamplingMode mode,
                     uint64_t global_index);

// The language-model batch of a set of windows: tokens = window[:, :L],
// labels = window[:, 1:].
Batch to_lm_batch(const Windows& windows, int32_t vocab_size);

// sample_windows + to_lm_batch: what a training loop calls each step.
Batch sample_lm_batch(const TokenSource& source, const SampleRequest& request);

SamplingMode sampling_mode_from_name(const std::string& name);
const char* sampling_mode_name(SamplingMode mode);

}  // namespace lcr::data
