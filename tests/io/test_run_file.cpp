// The run file: layout per scheme, write/read round trip (C++ and analysis/runfile.py), a
// live SWMR reader, kill -9 of the writer, recovery, and resume with truncation.
#include <signal.h>

#include <cstdlib>

#include "../error_text.hpp"  // tests/error_text.hpp
#include "core/io/hdf5.hpp"
#include "run_file_fixture.hpp"

namespace lcr::io {
namespace {

using namespace testing;

using lcr::test::error_of;

bool python_has_h5py() {
  return std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") == 0;
}

// analysis/runfile.py reads the file and checks the rows of write_step (min_rows metrics
// rows at least; `exact` = exactly that many).
int python_check(const std::string& path, int64_t min_rows, bool exact) {
  const std::string cmd = "/usr/bin/python3 " LCR_SOURCE_DIR "/tests/io/check_runfile.py " + path +
                          " " + std::to_string(min_rows) + (exact ? " exact" : " prefix");
  return std::system(cmd.c_str());
}

TEST(RunLayout, SchemeColumns) {
  const auto names = [](const Table& t) {
    std::vector<std::string> n;
    for (const auto& c : t.columns) n.push_back(c.name + shape_string(c.shape));
    return n;
  };
  PriorShapes s = goat_shapes();
  auto goat = prior_tables(s);
  ASSERT_EQ(goat.size(), 2u);
  EXPECT_EQ(goat[1].path, "priors/layer_1");
  EXPECT_EQ(names(goat[0]),
            (std::vector<std::string>{"entropy[4]", "max_logit[4]", "first_token_mass[4]",
                                      "alpha[4, 3]", "beta[4, 3]", "amplitude[4, 3]",
                                      "beta_alpha_ratio[4, 3]", "prior_curve[4, 5]", "u[2, 3]"}));
  s.scheme = "pope";
  s.pope_dim = 8;
  EXPECT_EQ(names(prior_tables(s)[0]).back(), "delta[2, 8]");
  EXPECT_EQ(names(prior_tables(s)[0])[3], "q_usage[4, 8]");
  s.scheme = "rope";
  s.rope_pairs = 6;
  EXPECT_EQ(names(prior_tables(s)[0]).back(), "k_pair_norm[2, 6]");
  s.scheme = "path";
  EXPECT_EQ(names(prior_tables(s)[0]).back(), "beta_stats[2, 4]");
  s.scheme = "alibi";
  EXPECT_EQ(prior_tables(s)[0].columns.size(), 3u);
  s.scheme = "goat";
  s.goat_modes = 0;  // no relative prior: no per-mode columns
  EXPECT_EQ(names(prior_tables(s)[0]),
            (std::vector<std::string>{"entropy[4]", "max_logit[4]", "first_token_mass[4]",
                                      "prior_curve[4, 5]", "u[2, 3]"}));
  s.goat_modes = -1;
  EXPECT_NE(error_of([&] { prior_tables(s); }).find("goat_modes >= 0"), std::string::npos);
  EXPECT_NE(error_of([&] { test_layout().at("priors/layer_9"); }).find("tables: metrics"),
            std::string::npos);
}

TEST(RunFile, WritesAndReadsBack) {
  const std::string path = fresh_dir("roundtrip") + "/run.h5";
  {
    RunFile rf = RunFile::create(path, test_layout(), test_provenance());
    for (int64_t s = 0; s < 12; ++s) write_step(rf, s);
    EXPECT_EQ(rf.rows("metrics"), 12);
    EXPECT_EQ(rf.rows("eval/passkey"), 3 * 6);
    rf.close();
  }
  const RunReader r = RunReader::open(path);
  EXPECT_EQ(r.tables(), (std::vector<std::string>{"eval/passkey", "eval/perplexity", "metrics",
                                                  "priors/layer_0", "priors/layer_1"}));
  EXPECT_EQ(r.columns("eval/perplexity"), (std::vector<std::string>{"length", "loss", "ppl"}));
  EXPECT_EQ(check_prefix(r), 12);
  EXPECT_EQ(r.rows("priors/layer_1"), 12);
  EXPECT_EQ(r.config_toml(), test_provenance().config_toml);
  const auto p = r.provenance();
  EXPECT_EQ(p.at("git_revision"), "abc1234");
  EXPECT_EQ(p.at("world_size"), "2");
  EXPECT_EQ(p.at("cp"), "2");
  EXPECT_EQ(p.at("hdf5_version").substr(0, 5), "1.10.");
  EXPECT_EQ(p.at("start_time").size(), 20u);  // YYYY-MM-DDThh:mm:ssZ
  EXPECT_EQ(p.at("resume_count"), "0");

  // A cleanly closed run file opens normally too, with the axes and /priors attributes.
  const h5::File f = h5::File::open(path);
  EXPECT_EQ(f.read<int64_t>("priors/goat_lags"), (std::vector<int64_t>{0, 1, 2, 4, 8}));
  EXPECT_EQ(std::get<std::string>(f.group("priors").attr("scheme")), "goat");
  EXPECT_EQ(f.shape("priors/layer_0/alpha"), (std::vector<int64_t>{12, 4, 3}));
}

TEST(RunFile, LargeConfigFitsInAnAttribute) {
  // Object headers hold at most 64 KiB; the 1.10 format moves larger attributes to dense
  // storage, so a long config is fine.
  const std::string path = fresh_dir("large") + "/run.h5";
  Provenance p = test_provenance();
  for (int i = 0; p.config_toml.size() < 200000; ++i)
    p.config_toml += "key_" + std::to_string(i) + " = " + std::to_string(i * 7) + "\n";
  RunFile::create(path, test_layout(), p).close();
  EXPECT_EQ(RunReader::open(path).config_toml(), p.config_toml);
}

TEST(RunFile, PythonReaderReadsTheLayout) {
  if (!python_has_h5py()) GTEST_SKIP() << "/usr/bin/python3 has no h5py (apt install python3-h5py)";
  const std::string path = fresh_dir("python") + "/run.h5";
  RunFile rf = RunFile::create(path, test_layout(), test_provenance());
  for (int64_t s = 0; s < 7; ++s) write_step(rf, s);
  // Read while the writer still holds the file in SWMR mode, then after it closed.
  EXPECT_EQ(python_check(path, 7, true), 0);
  rf.close();
  EXPECT_EQ(python_check(path, 7, true), 0);
}

TEST(RunFile, BadUseIsAnError) {
  const std::string dir = fresh_dir("errors");
  const std::string path = dir + "/run.h5";
  RunFile rf = RunFile::create(path, test_layout(), test_provenance());
  write_step(rf, 3);
  const auto err = [&](const std::string& table, int64_t step, const Row& row) {
    return error_of([&] { rf.append(table, step, row); });
  };
  EXPECT_NE(err("nope", 4, {}).find("no table 'nope' (tables: eval/passkey"), std::string::npos);
  EXPECT_NE(
      err("eval/perplexity", 4, {{"length", {1}}, {"loss", {1}}}).find("no value for column ppl"),
      std::string::npos);
  EXPECT_NE(err("eval/perplexity", 4, {{"length", {1}}, {"loss", {1}}, {"ppl", {1}}, {"x", {1}}})
                .find("no column 'x'"),
            std::string::npos);
  EXPECT_NE(
      err("priors/layer_0", 4, {{"entropy", {1, 2}}}).find("got 2 values for one row of shape [4]"),
      std::string::npos);
  Row m;
  const RunLayout layout = test_layout();  // (a temporary would die before the loop)
  for (const auto& c : layout.at("metrics").columns) m[c.name] = {1.0};
  EXPECT_NE(err("metrics", 2, m).find("step 2 is below the last step 3"), std::string::npos);
  EXPECT_NE(error_of([&] {
              rf.append(4, {{"metrics", m}, {"metrics", m}});
            }).find("twice"),
            std::string::npos);
  EXPECT_EQ(rf.rows("metrics"), 1);  // failed appends commit nothing
  rf.close();
  EXPECT_NE(error_of([&] {
              RunFile::create(path, test_layout(), test_provenance());
            }).find("already exists"),
            std::string::npos);
  RunLayout dup = test_layout();
  dup.tables.push_back(dup.tables[0]);
  EXPECT_NE(error_of([&] { RunFile::create(dir + "/b.h5", dup, {}); }).find("listed twice"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { RunReader::open(dir + "/missing.h5"); }).find("missing.h5: no such file"),
      std::string::npos);
  EXPECT_EQ(recover_run_file(path), "clean");
}

TEST(RunFile, LiveReaderSeesConsistentPrefix) {
  const std::string path = fresh_dir("live") + "/run.h5";
  constexpr int64_t kSteps = 60;
  const pid_t child = spawn([&] {
    RunFile rf = RunFile::create(path, test_layout(), test_provenance());
    for (int64_t s = 0; s < kSteps; ++s) {
      write_step(rf, s);
      usleep(3000);
    }
    rf.close();
  });
  RunReader r = open_when_ready(path);
  int64_t last = -1, views = 0;
  int status = -1;
  for (;;) {
    const bool done = waitpid(child, &status, WNOHANG) == child;
    r.refresh();
    const int64_t n = check_prefix(r);
    ASSERT_GE(n, last);
    views += n != last;
    last = n;
    if (done) break;
    usleep(5000);
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(last, kSteps);
  EXPECT_GE(views, 3) << "the reader should have seen the file grow";
}

// A writer killed with SIGKILL while appending. Returns the path.
std::string crashed_run_file(const std::string& name, int64_t min_steps) {
  const std::string path = fresh_dir(name) + "/run.h5";
  const pid_t child = spawn([&] {
    RunFile rf = RunFile::create(path, test_layout(), test_provenance());
    for (int64_t s = 0;; ++s) write_step(rf, s);
  });
  RunReader r = open_when_ready(path);
  for (int i = 0; i < 4000 && r.rows("metrics") < min_steps; ++i) {
    usleep(5000);
    r.refresh();
  }
  kill(child, SIGKILL);
  EXPECT_EQ(wait_exit(child), -SIGKILL);
  return path;
}

TEST(RunFile, KillDashNineLeavesAConsistentPrefix) {
  const std::string path = crashed_run_file("crash", 25);
  // A normal open refuses the file (its superblock still says "open for SWMR writing") ...
  EXPECT_NE(error_of([&] { h5::File::open(path); }).find("cannot open"), std::string::npos);
  // ... a SWMR-read open shows every committed row, each complete.
  int64_t n = 0;
  {
    const RunReader r = RunReader::open(path);
    n = check_prefix(r);
    EXPECT_GE(n, 25);
    // Metrics and priors of a step are committed by one flush: at most one step apart.
    for (const char* t : {"priors/layer_0", "priors/layer_1"})
      EXPECT_LE(std::abs(r.rows(t) - n), 1);
  }
  if (python_has_h5py()) {
    EXPECT_EQ(python_check(path, n, true), 0);
  }
  EXPECT_EQ(recover_run_file(path), "cleared");
  EXPECT_EQ(recover_run_file(path), "clean");
  const h5::File f = h5::File::open(path);  // now a normal open works
  EXPECT_EQ(f.shape("metrics/step"), (std::vector<int64_t>{n}));
}

TEST(RunFile, RecoverByCopyAndResume) {
  const std::string path = crashed_run_file("copy", 15);
  EXPECT_EQ(recover_run_file(path, RecoverMethod::Copy), "copied");
  const int64_t n = check_prefix(RunReader::open(path));
  EXPECT_GE(n, 15);
  // Resume from a checkpoint at step 9: later rows go, the run continues seamlessly.
  {
    RunFile rf = RunFile::resume(path, test_layout(), 9);
    EXPECT_EQ(rf.rows("metrics"), 10);
    EXPECT_EQ(rf.rows("eval/perplexity"), 4);  // steps 0 and 5
    for (int64_t s = 10; s < 20; ++s) write_step(rf, s);
    rf.close();
  }
  const RunReader r = RunReader::open(path);
  EXPECT_EQ(check_prefix(r), 20);
  EXPECT_EQ(r.rows("priors/layer_1"), 20);
  EXPECT_EQ(r.rows("eval/passkey"), 4 * 6);
  EXPECT_EQ(r.provenance().at("resume_count"), "1");
  EXPECT_EQ(r.provenance().at("last_resume_step"), "9");
}

TEST(RunFile, ResumeAfterKillWithoutExplicitRecovery) {
  const std::string path = crashed_run_file("resume", 12);
  {
    // The trainer checkpoints after logging a step, so every table is complete up to the
    // checkpoint's step; 9 is below anything the kill can have cut short.
    RunFile rf = RunFile::resume(path, test_layout(), 9);  // recovers by itself
    EXPECT_EQ(rf.rows("metrics"), 10);
    for (int64_t s = 10; s < 13; ++s) write_step(rf, s);
  }  // destructor closes
  EXPECT_EQ(check_prefix(RunReader::open(path)), 13);

  PriorShapes pope = goat_shapes();
  pope.scheme = "pope";
  pope.pope_dim = 8;
  const std::string e =
      error_of([&] { RunFile::resume(path, standard_layout(pope, {"clip_scale"}), 3); });
  EXPECT_NE(e.find("priors/layer_0/q_usage"), std::string::npos) << e;
  EXPECT_NE(e.find("different config"), std::string::npos) << e;
  EXPECT_NE(
      error_of([&] { RunFile::resume(path + ".none", test_layout(), 3); }).find("no run file at"),
      std::string::npos);
}

}  // namespace
}  // namespace lcr::io
