#pragma once
// Shared by the run-file tests: a small GOAT layout, a deterministic writer (every value is
// a function of the step and the position in the row, so any prefix can be checked), a
// checker of the committed prefix, and fork helpers (HDF5 is not thread-safe here, so
// concurrent writers are processes).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "core/io/run_file.hpp"

namespace lcr::io::testing {

namespace fs = std::filesystem;

// Files of this test process live under /tmp/lcr_io_test_<pid>/ (several build trees may
// run the tests at once), removed when the process exits (not by forked children, which
// leave through _exit).
struct TestRoot {
  pid_t owner = getpid();
  fs::path path = fs::temp_directory_path() / ("lcr_io_test_" + std::to_string(getpid()));
  ~TestRoot() {
    std::error_code ec;
    if (getpid() == owner) fs::remove_all(path, ec);
  }
};

inline std::string fresh_dir(const std::string& name) {
  static TestRoot root;
  const fs::path d = root.path / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

inline PriorShapes goat_shapes() {
  PriorShapes s;
  s.scheme = "goat";
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.goat_modes = 3;
  s.goat_lags = {0, 1, 2, 4, 8};
  s.goat_positions = {0, 1, 2};
  return s;
}
inline RunLayout test_layout() { return standard_layout(goat_shapes(), {"clip_scale"}); }

inline Provenance test_provenance() {
  Provenance p;
  p.config_toml = "[model]\nlayers = 2\nname = \"tiny\"\n";
  p.lcr_version = "0.1.0";
  p.git_revision = "abc1234";
  p.command_line = "lcr train experiments/tiny.toml";
  p.devices = "cpu:serial";
  p.world_size = 2;
  p.dp = 1;
  p.cp = 2;
  return p;
}

// The values of a row at step s; tests/io/check_runfile.py computes the same.
inline double metric_value(const std::string& name, int64_t s) {
  if (name == "loss") return 1.0 / double(s + 1);
  if (name == "lr") return 0.001 * double(s);
  if (name == "grad_norm") return 2.0 + double(s);
  if (name == "tokens_per_s") return 100.0 * double(s);
  if (name == "memory_bytes") return 1e6 + double(s);
  return 0.5;  // extra metrics
}
// Exact in float32: s + i/8 + 1000 * len(name).
inline double prior_value(const std::string& name, int64_t s, int64_t i) {
  return double(s) + double(i) / 8.0 + 1000.0 * double(name.size());
}
constexpr int64_t kEvalEvery = 5;
const std::vector<int64_t> kEvalLengths = {16, 32};
const std::vector<double> kDepths = {0.0, 0.5, 1.0};

// Metrics and both layers' priors in one batched append; eval rows one table at a time.
inline void write_step(RunFile& rf, int64_t s) {
  const RunLayout L = test_layout();
  std::vector<std::pair<std::string, Row>> rows(3);
  rows[0].first = "metrics";
  for (const auto& c : L.at("metrics").columns) rows[0].second[c.name] = {metric_value(c.name, s)};
  for (int l = 0; l < 2; ++l) {
    const Table& t = L.at("priors/layer_" + std::to_string(l));
    rows[size_t(l + 1)].first = t.path;
    Row& r = rows[size_t(l + 1)].second;
    for (const auto& c : t.columns) {
      int64_t n = 1;
      for (auto e : c.shape) n *= e;
      for (int64_t i = 0; i < n; ++i) r[c.name].push_back(prior_value(c.name, s, i));
    }
  }
  rf.append(s, rows);
  if (s % kEvalEvery != 0) return;
  for (int64_t len : kEvalLengths) {
    const double loss = 1.0 + double(len) / 100.0 + double(s) / 1000.0;
    rf.append("eval/perplexity", s,
              {{"length", {double(len)}}, {"loss", {loss}}, {"ppl", {std::exp(loss)}}});
    for (double d : kDepths)
      rf.append("eval/passkey", s,
                {{"length", {double(len)}},
                 {"depth", {d}},
                 {"accuracy", {d / 2.0 + double(len) / 64.0}}});
  }
}

// Every committed row of every table equals what write_step wrote for steps 0, 1, 2, ...
// (each table on its own: a live reader refreshes tables one after the other, so their
// row counts need not match). Returns the metrics row count.
inline int64_t check_prefix(const RunReader& r) {
  const RunLayout L = test_layout();
  const int64_t n = r.rows("metrics");
  const auto steps = r.steps("metrics");
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(steps[size_t(i)], i);
  for (const auto& c : L.at("metrics").columns) {
    const auto v = r.column("metrics", c.name);
    EXPECT_EQ(int64_t(v.size()), n) << c.name;
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(v[size_t(i)], metric_value(c.name, i)) << c.name;
  }
  for (int l = 0; l < 2; ++l) {
    const Table& t = L.at("priors/layer_" + std::to_string(l));
    const int64_t np = r.rows(t.path);
    for (const auto& c : t.columns) {
      std::vector<int64_t> shape;
      const auto v = r.column(t.path, c.name, &shape);
      EXPECT_EQ(shape, c.shape) << c.name;
      const int64_t per = np > 0 ? int64_t(v.size()) / np : 0;
      int64_t bad = 0;
      for (int64_t s = 0; s < np; ++s)
        for (int64_t i = 0; i < per; ++i)
          bad += v[size_t(s * per + i)] != prior_value(c.name, s, i);
      EXPECT_EQ(bad, 0) << t.path << "/" << c.name;
    }
  }
  const int64_t ne = r.rows("eval/perplexity");
  const auto es = r.steps("eval/perplexity");
  const auto len = r.column("eval/perplexity", "length");
  const auto loss = r.column("eval/perplexity", "loss");
  for (int64_t i = 0; i < ne; ++i) {
    const int64_t s = kEvalEvery * (i / 2);
    EXPECT_EQ(es[size_t(i)], s);
    EXPECT_EQ(len[size_t(i)], double(kEvalLengths[size_t(i % 2)]));
    EXPECT_EQ(loss[size_t(i)], 1.0 + len[size_t(i)] / 100.0 + double(s) / 1000.0);
  }
  const int64_t nk = r.rows("eval/passkey");
  const auto ks = r.steps("eval/passkey");
  const auto depth = r.column("eval/passkey", "depth");
  const auto acc = r.column("eval/passkey", "accuracy");
  const int64_t cells = int64_t(kEvalLengths.size() * kDepths.size());
  for (int64_t i = 0; i < nk; ++i) {
    EXPECT_EQ(ks[size_t(i)], kEvalEvery * (i / cells));
    const double d = kDepths[size_t(i % int64_t(kDepths.size()))];
    const double l = double(kEvalLengths[size_t((i % cells) / int64_t(kDepths.size()))]);
    EXPECT_EQ(depth[size_t(i)], d);
    EXPECT_EQ(acc[size_t(i)], d / 2.0 + l / 64.0);
  }
  return n;
}

// Runs body() in a child process; the child exits 0 on success, 3 on an exception.
inline pid_t spawn(const std::function<void()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 0;
    try {
      body();
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
      rc = 3;
    }
    _exit(rc);
  }
  return pid;
}

inline int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Opens a reader once the writer has started SWMR mode (retries for up to ~20 s).
inline RunReader open_when_ready(const std::string& path) {
  for (int i = 0;; ++i) {
    try {
      return RunReader::open(path);
    } catch (const Error&) {
      if (i > 2000) throw;
      usleep(10000);
    }
  }
}

}  // namespace lcr::io::testing
