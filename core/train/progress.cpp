#include "core/train/progress.hpp"

#include <fmt/format.h>

#include <cmath>

namespace lcr::train {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 10) return fmt::format("{:.1f}s", s);
  const int64_t t = int64_t(std::llround(s));
  if (t < 3600) return t < 60 ? fmt::format("{}s", t) : fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60);
}

std::string Progress::line(int64_t step, double loss, double lr, double tokens_per_s) const {
  const double mean = count_ > 0 ? total_ / double(count_) : 0.0;
  const double eta = mean * double(last_ - step);
  const std::string tps = tokens_per_s >= 1e4 ? fmt::format("{:.1f}k", tokens_per_s / 1e3)
                                              : fmt::format("{:.0f}", tokens_per_s);
  const int width = int(std::to_string(last_).size());
  return fmt::format("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | {} tok/s | {:.3f} s/step | ETA {}",
                     step, width, last_, loss, lr, tps, mean, format_duration(eta));
}

}  // namespace lcr::train
