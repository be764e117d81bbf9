#include "core/train/longctx_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/data/tasks/longctx.hpp"

namespace lcr::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Mean of the finite values; NaN when there is none.
double mean_of(const std::vector<double>& v) {
  double s = 0;
  int n = 0;
  for (double x : v)
    if (std::isfinite(x)) {
      s += x;
      ++n;
    }
  return n > 0 ? s / n : kNaN;
}

std::string cell(double x) { return std::isfinite(x) ? fmt::format("{:8.3f}", x) : "       -"; }

}  // namespace

int64_t effective_length(const std::vector<int64_t>& lengths, const std::vector<double>& average,
                         double threshold) {
  int64_t best = 0;
  for (size_t i = 0; i < lengths.size() && i < average.size(); ++i) {
    if (!(average[i] >= threshold)) break;  // a dip (or no number) ends it
    best = lengths[i];
  }
  return best;
}

LongSummary summarize_longctx(const std::vector<LongRow>& rows, double threshold) {
  LongSummary s;
  s.threshold = threshold;
  for (const LongRow& r : rows) s.lengths.push_back(r.length);
  std::sort(s.lengths.begin(), s.lengths.end());
  s.lengths.erase(std::unique(s.lengths.begin(), s.lengths.end()), s.lengths.end());
  const size_t nl = s.lengths.size();
  auto index = [&](int64_t L) {
    return size_t(std::lower_bound(s.lengths.begin(), s.lengths.end(), L) - s.lengths.begin());
  };
  std::map<std::string, std::string> category_of;
  for (const LongRow& r : rows) category_of[r.task] = r.category;
  for (const std::string& t : tasks::long_task_names())
    if (category_of.count(t)) s.tasks.push_back(t);
  for (int c = 0; c <= int(tasks::LongCategory::PhoneBook); ++c) {
    const std::string name = tasks::long_category_name(tasks::LongCategory(c));
    for (const auto& [t, cat] : category_of)
      if (cat == name) {
        s.categories.push_back(name);
        break;
      }
  }
  // Task x length: the mean over its cells (its depths).
  for (const std::string& t : s.tasks) {
    std::vector<std::vector<double>> part(nl), all(nl), tok(nl);
    for (const LongRow& r : rows) {
      if (r.task != t) continue;
      part[index(r.length)].push_back(r.part_match);
      all[index(r.length)].push_back(r.all_match);
      tok[index(r.length)].push_back(r.token_accuracy);
    }
    for (size_t i = 0; i < nl; ++i) {
      s.task_score[t].push_back(mean_of(part[i]));
      s.task_all_match[t].push_back(mean_of(all[i]));
      s.task_token_accuracy[t].push_back(mean_of(tok[i]));
    }
  }
  // Category x length: the mean over its tasks evaluated there; the average over categories.
  for (const std::string& c : s.categories)
    for (size_t i = 0; i < nl; ++i) {
      std::vector<double> v;
      for (const std::string& t : s.tasks)
        if (category_of[t] == c) v.push_back(s.task_score[t][i]);
      s.category_score[c].push_back(mean_of(v));
    }
  for (size_t i = 0; i < nl; ++i) {
    std::vector<double> v;
    for (const std::string& c : s.categories) v.push_back(s.category_score[c][i]);
    s.average.push_back(mean_of(v));
  }
  s.effective_length = effective_length(s.lengths, s.average, threshold);
  return s;
}

std::string format_longctx(const LongSummary& s, const std::string& indent) {
  std::string out = indent +
                    "long-context score (part_match: fraction of a sample's answers exactly "
                    "right, mean over samples and depths)\n";
  auto header = [&](const char* first) {
    std::string h = indent + fmt::format("  {:<18}", first);
    for (int64_t L : s.lengths) h += fmt::format(" {:>8}", L);
    return h + "\n";
  };
  auto line = [&](const std::string& name, const std::vector<double>& v) {
    std::string l = indent + fmt::format("  {:<18}", name);
    for (double x : v) l += " " + cell(x);
    return l + "\n";
  };
  out += header("task \\ length");
  for (const std::string& t : s.tasks) out += line(t, s.task_score.at(t));
  out += header("category");
  for (const std::string& c : s.categories) out += line(c, s.category_score.at(c));
  out += line("average", s.average);
  if (s.effective_length > 0)
    out += indent + fmt::format(
                        "effective length {} (the longest length where the average, and the "
                        "average at every shorter length, is >= {:.3g})\n",
                        s.effective_length, s.threshold);
  else if (!s.lengths.empty())
    out += indent + fmt::format(
                        "effective length none: the average at the shortest length {} is {:.3f}, "
                        "below the threshold {:.3g}\n",
                        s.lengths.front(), s.average.front(), s.threshold);
  return out;
}

std::string longctx_line(const LongSummary& s) {
  std::string out = "longctx avg";
  for (size_t i = 0; i < s.lengths.size(); ++i)
    out += fmt::format(" {:.3f}@{}", s.average[i], s.lengths[i]);
  return out + (s.effective_length > 0
                    ? fmt::format(" | effective length {}", s.effective_length)
                    : fmt::format(" | effective length none (< {:.3g})", s.threshold));
}

}  // namespace lcr::train
