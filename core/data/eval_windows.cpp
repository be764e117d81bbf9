#include "core/data/eval_windows.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/base/error.hpp"

namespace lcr::data {

std::vector<int64_t> extrapolation_lengths(int64_t train_len, const std::vector<int64_t>& factors) {
  require(train_len >= 1, "training length must be >= 1, got ", train_len);
  std::vector<int64_t> out;
  for (int64_t f : factors) {
    require(f >= 1, "length factor must be >= 1, got ", f);
    out.push_back(train_len * f);
  }
  return out;
}

std::vector<LengthWindows> perplexity_windows(const TokenSource& validation,
                                              const std::vector<int64_t>& lengths,
                                              int64_t max_windows) {
  require(max_windows >= 1, "max_windows must be >= 1, got ", max_windows);
  const int64_t n_val = validation.size();
  std::vector<LengthWindows> out;
  for (int64_t n : lengths) {
    require(n >= 1, "evaluation length must be >= 1, got ", n);
    // A window is n + 1 tokens (inputs plus the last label); windows share no inputs.
    const int64_t available = (n_val - 1) / n;
    require(available >= 1, "evaluation length ", n, " needs ", n + 1,
            " validation tokens but the validation set has ", n_val, " (", validation.describe(),
            "); drop that length, or use more data or a larger validation fraction");
    const int64_t count = std::min(available, max_windows);
    LengthWindows lw;
    lw.length = n;
    lw.batch = Batch(count, n, validation.vocab_size());
    std::vector<int32_t> window(n + 1);
    for (int64_t k = 0; k < count; ++k) {
      validation.read(k * n, n + 1, window.data());
      std::copy(window.begin(), window.end() - 1, lw.batch.tokens_row(k));
      std::copy(window.begin() + 1, window.end(), lw.batch.labels_row(k));
    }
    out.push_back(std::move(lw));
  }
  return out;
}

double PerplexityMeter::perplexity() const { return std::exp(mean_nll()); }

}  // namespace lcr::data
