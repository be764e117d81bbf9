#pragma once
// Perplexity versus length: train at L, evaluate at L, 2L, ..., 16L on fixed validation
// windows. For each evaluation length n the windows are the consecutive, non-overlapping
// chunks [k n, k n + n + 1) from the start of the validation source, k = 0, 1, ...,
// up to `max_windows` of them: every run (and every scheme) is scored on the same text,
// and longer lengths see a superset of the shorter lengths' text.
#include <cstdint>
#include <vector>

#include "core/data/batch.hpp"
#include "core/data/token_source.hpp"

namespace lcr::data {

// {train_len * f for f in factors}; the default factors give L, 2L, 4L, 8L, 16L.
std::vector<int64_t> extrapolation_lengths(int64_t train_len,
                                           const std::vector<int64_t>& factors = {1, 2, 4, 8, 16});

struct LengthWindows {
  int64_t length = 0;  // n: tokens per window fed to the model
  Batch batch;         // [windows, n] tokens and next-token labels
};

// One LengthWindows per requested length, in the order given. A length for which the
// validation source holds no window of n + 1 tokens is an error naming the length, the
// validation size and the fix.
std::vector<LengthWindows> perplexity_windows(const TokenSource& validation,
                                              const std::vector<int64_t>& lengths,
                                              int64_t max_windows);

// Running mean negative log-likelihood over scored tokens -> perplexity = exp(mean NLL).
struct PerplexityMeter {
  double nll_sum = 0.0;
  int64_t tokens = 0;
  void add(double nll, int64_t count = 1) {
    nll_sum += nll;
    tokens += count;
  }
  double mean_nll() const { return tokens > 0 ? nll_sum / static_cast<double>(tokens) : 0.0; }
  double perplexity() const;
};

}  // namespace lcr::data
