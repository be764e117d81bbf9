#include "parallel/ring/stats.hpp"

#include <cstdio>

namespace lcr {

int64_t RingStats::bytes_sent() const {
  int64_t n = 0;
  for (const auto& s : steps) n += s.bytes_sent;
  return n;
}

int64_t RingStats::bytes_received() const {
  int64_t n = 0;
  for (const auto& s : steps) n += s.bytes_received;
  return n;
}

double RingStats::compute_s() const {
  double t = 0;
  for (const auto& s : steps) t += s.compute_s;
  return t;
}

double RingStats::wait_s() const {
  double t = 0;
  for (const auto& s : steps) t += s.wait_s;
  return t;
}

double RingStats::overlap() const {
  const double c = compute_s(), w = wait_s();
  return c + w > 0 ? c / (c + w) : 1.0;
}

std::string RingStats::summary() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "ring %s: %zu steps, sent %lld B, received %lld B, compute %.3f ms, "
                "wait %.3f ms, overlap %.1f%%, total %.3f ms",
                pass.c_str(), steps.size(), (long long)bytes_sent(), (long long)bytes_received(),
                1e3 * compute_s(), 1e3 * wait_s(), 100.0 * overlap(), 1e3 * total_s);
  return buf;
}

std::string RingStats::table() const {
  std::string out = "step  sent_B  recv_B  blocks  skipped  compute_ms  wait_ms\n";
  char buf[160];
  for (const auto& s : steps) {
    std::snprintf(buf, sizeof buf, "%4d %7lld %7lld %7d %8d %11.3f %8.3f\n", s.step,
                  (long long)s.bytes_sent, (long long)s.bytes_received, s.blocks_computed,
                  s.blocks_skipped, 1e3 * s.compute_s, 1e3 * s.wait_s);
    out += buf;
  }
  return out;
}

}  // namespace lcr
