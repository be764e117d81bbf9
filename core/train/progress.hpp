#pragma once
// The progress line of the writing rank:
//   step 120/600 | loss 2.3456 | lr 1.00e-03 | 12.3k tok/s | 0.41 s/step | ETA 3m16s
// s/step is the mean training step of this job so far. The ETA counts everything the run
// still does: the remaining steps at their mean wall time with what comes with them (the
// statistics probe, checkpoints), and the remaining evaluations at the mean time of those
// this job has run; before the first one it names them instead ("ETA 3m16s + 2 evals").
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lcr::train {

class Progress {
 public:
  explicit Progress(int64_t last_step) : last_(last_step) {}
  void record_step(double seconds) {  // one training step
    step_s_ += seconds;
    ++steps_;
  }
  void record_overhead(double seconds) { overhead_s_ += seconds; }  // probes, checkpoints
  void record_eval(double seconds) {
    eval_s_ += seconds;
    ++evals_;
  }
  // After `step` steps, with `evals_left` evaluations still to run (this step's included).
  std::string line(int64_t step, double loss, double lr, double tokens_per_s,
                   int64_t evals_left) const;
  // The remaining time alone, as line() writes it ("3m16s", "3m16s + 2 evals").
  std::string eta(int64_t step, int64_t evals_left) const;

 private:
  int64_t last_;
  double step_s_ = 0, overhead_s_ = 0, eval_s_ = 0;
  int64_t steps_ = 0, evals_ = 0;
};

// Wall time of a training step's phases on this rank, summed over a log interval
// (train.log_phases). start() opens a step; mark(phase) charges the time since the previous
// mark to `phase` (the caller fences first, so device work counts where it was launched);
// line() gives the means per step and starts the next interval. All-reduces include the
// wait for the slowest rank, which is what shows load imbalance.
class PhaseTimes {
 public:
  void start() { last_ = std::chrono::steady_clock::now(); }
  void mark(const char* phase);
  // "phases, ms per step on rank 0: data 0.12 | forward 31.0 | ..." over `steps` steps.
  std::string line(int64_t steps);

 private:
  std::chrono::steady_clock::time_point last_;
  std::vector<std::pair<std::string, double>> sums_;  // in first-mark order
};

// Paces the progress lines of a long phase (an evaluation, a scaling point's repetitions):
// due() is true at most once every `every_s` seconds, and only on the rank that logs, so
// such a phase is never silent for long nor chatty.
class LogThrottle {
 public:
  explicit LogThrottle(bool writer, double every_s = 5.0) : writer_(writer), every_s_(every_s) {}
  bool due();              // a line is due now (the interval restarts)
  double elapsed() const;  // seconds since construction

 private:
  bool writer_;
  double every_s_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
};

// The evaluations a run still does at steps from..last_step (inclusive): every eval.every
// steps, and at the last step when at_end.
int64_t evaluations_from(int64_t from, int64_t last_step, int64_t every, bool at_end);

// "3m16s", "1h02m", "42s", "0.4s".
std::string format_duration(double seconds);

}  // namespace lcr::train
