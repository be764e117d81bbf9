// The progress line's ETA: steps with their probes and checkpoints, and the evaluations
// still to come (named until one has been timed).
#include <gtest/gtest.h>

#include <thread>

#include "core/train/progress.hpp"

namespace lcr::train {
namespace {

TEST(Progress, CountsTheEvaluationsStillToCome) {
  EXPECT_EQ(evaluations_from(1, 600, 300, true), 2);  // 300 and 600 (at_end is 600)
  EXPECT_EQ(evaluations_from(300, 600, 300, true), 2);
  EXPECT_EQ(evaluations_from(301, 600, 300, false), 1);
  EXPECT_EQ(evaluations_from(1, 20, 7, true), 3);  // 7, 14, and the end
  EXPECT_EQ(evaluations_from(15, 20, 7, false), 0);
  EXPECT_EQ(evaluations_from(1, 20, 0, true), 1);
  EXPECT_EQ(evaluations_from(21, 20, 7, true), 0);
}

TEST(Progress, EtaCountsOverheadAndEvaluations) {
  Progress p(100);
  for (int i = 0; i < 10; ++i) p.record_step(1.0);
  p.record_overhead(5.0);                      // 0.5 s a step of probes and checkpoints
  EXPECT_EQ(p.eta(10, 0), "2m15s");            // 90 steps x 1.5 s
  EXPECT_EQ(p.eta(10, 2), "2m15s + 2 evals");  // no evaluation timed yet: named
  EXPECT_EQ(p.eta(10, 1), "2m15s + 1 eval");
  p.record_eval(30.0);
  EXPECT_EQ(p.eta(10, 2), "3m15s");  // + 2 x 30 s
  EXPECT_EQ(p.eta(100, 1), "30s");   // the last step, its evaluation still to run
  const std::string line = p.line(10, 2.5, 1e-3, 12345.0, 0);
  EXPECT_NE(line.find("1.000 s/step"), std::string::npos) << line;  // steps only
  EXPECT_NE(line.find("12.3k tok/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 2m15s"), std::string::npos) << line;
}

TEST(Progress, DurationsReadAsTime) {
  EXPECT_EQ(format_duration(0.44), "0.4s");
  EXPECT_EQ(format_duration(42.4), "42s");
  EXPECT_EQ(format_duration(196), "3m16s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(-1), "?");
}

// train.log_phases: each mark charges the time since the previous one to its phase, phases
// keep their first-mark order, and line() gives means per step and starts a new interval.
TEST(PhaseTimes, MeansPerStepInOrderThenReset) {
  PhaseTimes t;
  for (int step = 0; step < 2; ++step) {
    t.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t.mark("forward");
    t.mark("backward");  // next to nothing since the last mark
  }
  const std::string line = t.line(2);
  ASSERT_EQ(line.rfind("phases, ms per step on rank 0: forward ", 0), 0u) << line;
  const double fwd = std::stod(line.substr(line.find("forward ") + 8));
  EXPECT_GE(fwd, 19.0) << line;  // sleep_for sleeps at least as long as asked
  EXPECT_LT(fwd, 200.0) << line;
  EXPECT_NE(line.find(" | backward "), std::string::npos) << line;
  t.start();
  t.mark("forward");
  const double after = std::stod(t.line(1).substr(line.find("forward ") + 8));
  EXPECT_LT(after, 19.0) << "the interval was not reset";
}

}  // namespace
}  // namespace lcr::train
