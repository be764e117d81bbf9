#pragma once
// Helpers of the trainer tests: they run the real `lcr train` (alone or under mpirun) as a
// child process in a per-process temporary directory and read what it left behind through
// the run-file and checkpoint readers (core/io). LCR_EXE and LCR_MPIEXEC come from CMake;
// LCR_TEST_LCR names another lcr (a packed bundle run away from its build folder).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/io/run_file.hpp"

extern char** environ;

namespace lcr::test {

// A directory for this test process, removed at exit.
inline const std::string& scratch() {
  static const std::string dir = [] {
    const auto d =
        std::filesystem::temp_directory_path() / ("lcr-train-tests-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                      ("lcr-train-tests-" + std::to_string(::getpid())),
                                  ec);
    });
    return d.string();
  }();
  return dir;
}

// A small model every test starts from: trains a step in milliseconds.
inline std::vector<std::string> tiny_args(const std::string& run_dir, const std::string& scheme) {
  std::vector<std::string> a = {"model.d_model=32",
                                "model.n_layers=2",
                                "attention.heads=2",
                                "attention.kv_heads=2",
                                "attention.head_dim=16",
                                "attention.scheme=" + scheme,
                                "attention.goat.modes=2",
                                "attention.goat.train_len=32",
                                "train.seq_len=32",
                                "train.batch=2",
                                "train.steps=20",
                                "train.warmup=5",
                                "train.log_every=1",
                                "train.ckpt_every=0",
                                "eval.at_end=false",
                                "data.source=copy_mixture",
                                "task.copy_mixture.vocab=16",
                                "run.dir=\"" + run_dir + "\""};
  return a;
}

// The lcr executable the tests run: $LCR_TEST_LCR if set, else the build's.
inline std::string lcr_exe() {
  const char* e = std::getenv("LCR_TEST_LCR");
  return e && *e ? e : LCR_EXE;
}

struct Child {
  pid_t pid = -1;
  std::string log;  // stdout + stderr
};

// Starts `lcr train args...` (under mpirun -np ranks when ranks > 0) with output to a log;
// `blocked`: the signals the child starts with blocked (none by default).
inline Child start_lcr(const std::vector<std::string>& args, int ranks, const std::string& tag,
                       const std::vector<int>& blocked = {}) {
  std::vector<std::string> argv;
  if (ranks > 0)
    argv = {LCR_MPIEXEC, "-np", std::to_string(ranks), "--oversubscribe", "--allow-run-as-root"};
  argv.push_back(lcr_exe());
  argv.insert(argv.end(), args.begin(), args.end());
  Child c;
  c.log = scratch() + "/" + tag + ".log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, c.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // The child's signal mask is `blocked` and its stop signals are at their defaults, whatever
  // the test's own launcher left: a blocked SIGUSR1 is inherited through exec, and mpirun
  // then never sees (or forwards) the SIGUSR1 that the lifecycle tests send it.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t mask, stops;
  sigemptyset(&mask);
  for (int sig : blocked) sigaddset(&mask, sig);
  sigemptyset(&stops);
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaddset(&stops, sig);
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setsigdefault(&attr, &stops);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> cargv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  const int rc = posix_spawn(&c.pid, cargv[0], &fa, &attr, cargv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) c.pid = -1;
  return c;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Waits for the child; its exit status (128 + signal when killed).
inline int wait_child(const Child& c) {
  int status = 0;
  if (c.pid < 0 || waitpid(c.pid, &status, 0) < 0) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// Runs `lcr args...` to completion: the exit status, and the output in *output.
inline int run_lcr(const std::vector<std::string>& args, int ranks, const std::string& tag,
                   std::string* output = nullptr) {
  const Child c = start_lcr(args, ranks, tag);
  const int rc = wait_child(c);
  if (output) *output = read_text(c.log);
  return rc;
}

inline std::vector<std::string> train_args(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), "train");
  return overrides;
}

// The committed rows of metrics/loss (reads a live or crashed file too).
inline std::vector<double> losses(const std::string& run_dir,
                                  std::vector<int64_t>* steps = nullptr) {
  io::RunReader r = io::RunReader::open(run_dir + "/run.h5");
  if (steps) *steps = r.steps("metrics");
  return r.column("metrics", "loss");
}

// Polls until pred() holds or the timeout passes.
template <class P>
bool wait_until(P pred, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    try {
      if (pred()) return true;
    } catch (const std::exception&) {
      // the file may not exist yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace lcr::test
