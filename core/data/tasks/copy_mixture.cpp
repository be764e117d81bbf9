// Copy-mixture (GOAT, Fig. 1; seed 000 Sec. 6: "first-token copy, previous-token copy and
// random noise mixed"). Tokens x_0 .. x_{L-1} over `vocab` symbols:
//
//   x_0 ~ uniform
//   x_t = x_0                      with probability p_first        (first-token copy)
//       = x_{t - relative_offset}  with probability p_relative     (relative copy; t >= offset)
//       ~ uniform                  otherwise                       (noise)
//
// The branch is drawn per position and is not visible in the input, so the best
// predictor of x_{t+1} is the mixture itself: attend to key 0 (a first-token column of the
// prior, GOAT's u(j) at j = 0) and to the key relative_offset - 1 back from the query (a
// relative stripe). Labels are next tokens at every position but the last.
#include <sstream>

#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

class CopyMixture : public Task {
 public:
  CopyMixture(int64_t seq_len, const CopyMixtureOptions& o) : Task(seq_len), o_(o) {
    require(o.vocab >= 2, "task.copy_mixture.vocab must be >= 2, got ", o.vocab);
    require(o.p_first >= 0 && o.p_relative >= 0 && o.p_first + o.p_relative <= 1.0,
            "task.copy_mixture: p_first (", o.p_first, ") and p_relative (", o.p_relative,
            ") must be >= 0 with p_first + p_relative <= 1 (the rest is noise)");
    require(o.relative_offset >= 1 && o.relative_offset < seq_len,
            "task.copy_mixture.relative_offset must be in [1, seq_len - 1 = ", seq_len - 1,
            "], got ", o.relative_offset);
  }
  std::string name() const override { return "copy_mixture"; }
  std::string description() const override {
    std::ostringstream os;
    os << "copy-mixture (GOAT Fig. 1): each token copies token 0 (p=" << o_.p_first
       << "), the token " << o_.relative_offset << " back (p=" << o_.p_relative
       << ") or is uniform noise; vocab " << o_.vocab << ", length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return o_.vocab; }

  void generate(data::Rng& rng, int32_t* x, int32_t* labels) const override {
    const int64_t L = seq_len();
    x[0] = static_cast<int32_t>(rng.uniform(o_.vocab));
    for (int64_t t = 1; t < L; ++t) {
      const double u = rng.uniform01();
      const int32_t noise = static_cast<int32_t>(rng.uniform(o_.vocab));  // always drawn: fixed
                                                                          // consumption per t
      if (u < o_.p_first)
        x[t] = x[0];
      else if (u < o_.p_first + o_.p_relative && t >= o_.relative_offset)
        x[t] = x[t - o_.relative_offset];
      else
        x[t] = noise;
    }
    for (int64_t t = 0; t + 1 < L; ++t) labels[t] = x[t + 1];
    labels[L - 1] = data::kIgnoreLabel;
  }

 private:
  CopyMixtureOptions o_;
};

}  // namespace

std::unique_ptr<Task> make_copy_mixture(int64_t seq_len, const CopyMixtureOptions& o) {
  require(seq_len >= 2, "task.seq_len must be >= 2 for copy_mixture, got ", seq_len);
  return std::make_unique<CopyMixture>(seq_len, o);
}

}  // namespace lcr::tasks
