#pragma once
// The progress line of the writing rank:
//   step 120/600 | loss 2.3456 | lr 1.00e-03 | 12.3k tok/s | 0.41 s/step | ETA 3m16s
// ETA = remaining steps x the mean step time of this job so far (evaluations excluded).
#include <cstdint>
#include <string>

namespace lcr::train {

class Progress {
 public:
  explicit Progress(int64_t last_step) : last_(last_step) {}
  void record(double step_seconds) {
    total_ += step_seconds;
    ++count_;
  }
  std::string line(int64_t step, double loss, double lr, double tokens_per_s) const;

 private:
  int64_t last_;
  double total_ = 0;
  int64_t count_ = 0;
};

// "3m16s", "1h02m", "42s", "0.4s".
std::string format_duration(double seconds);

}  // namespace lcr::train
