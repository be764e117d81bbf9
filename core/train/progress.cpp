#include "core/train/progress.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace lcr::train {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 10) return fmt::format("{:.1f}s", s);
  const int64_t t = int64_t(std::llround(s));
  if (t < 3600) return t < 60 ? fmt::format("{}s", t) : fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60);
}

bool LogThrottle::due() {
  const auto now = std::chrono::steady_clock::now();
  if (!writer_ || std::chrono::duration<double>(now - last_).count() < every_s_) return false;
  last_ = now;
  return true;
}

double LogThrottle::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

int64_t evaluations_from(int64_t from, int64_t last_step, int64_t every, bool at_end) {
  from = std::max<int64_t>(from, 1);
  if (last_step < from) return 0;
  int64_t n = every > 0 ? last_step / every - (from - 1) / every : 0;
  if (at_end && !(every > 0 && last_step % every == 0)) ++n;
  return n;
}

std::string Progress::eta(int64_t step, int64_t evals_left) const {
  const double per_step = steps_ > 0 ? (step_s_ + overhead_s_) / double(steps_) : 0.0;
  double s = per_step * double(last_ - step);
  if (evals_left > 0 && evals_ > 0) s += eval_s_ / double(evals_) * double(evals_left);
  std::string out = format_duration(s);
  if (evals_left > 0 && evals_ == 0)
    out += fmt::format(" + {} eval{}", evals_left, evals_left > 1 ? "s" : "");
  return out;
}

std::string Progress::line(int64_t step, double loss, double lr, double tokens_per_s,
                           int64_t evals_left) const {
  const double mean = steps_ > 0 ? step_s_ / double(steps_) : 0.0;
  const std::string tps = tokens_per_s >= 1e4 ? fmt::format("{:.1f}k", tokens_per_s / 1e3)
                                              : fmt::format("{:.0f}", tokens_per_s);
  const int width = int(std::to_string(last_).size());
  return fmt::format("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | {} tok/s | {:.3f} s/step | ETA {}",
                     step, width, last_, loss, lr, tps, mean, eta(step, evals_left));
}

void PhaseTimes::mark(const char* phase) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  for (auto& [name, sum] : sums_)
    if (name == phase) {
      sum += s;
      return;
    }
  sums_.emplace_back(phase, s);
}

std::string PhaseTimes::line(int64_t steps) {
  std::string out = "phases, ms per step on rank 0:";
  const char* sep = " ";
  for (auto& [name, sum] : sums_) {
    out += fmt::format("{}{} {:.3g}", sep, name, 1e3 * sum / double(std::max<int64_t>(steps, 1)));
    sep = " | ";
    sum = 0;
  }
  return out;
}

}  // namespace lcr::train
