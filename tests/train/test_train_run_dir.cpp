// A run directory's guarantees (docs/training.md, "What a run directory guarantees"): one
// writer (the lock in core/train/run_lock.hpp), what each signal does and the exit codes,
// and that the ranks of a killed mpirun stop at once. Each test runs the real `lcr`.
#include <dirent.h>

#include <csignal>
#include <set>

#include "core/io/checkpoint.hpp"
#include "train_test_util.hpp"

namespace lcr::test {
namespace {

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

void expect_steps_once(const std::vector<int64_t>& steps, int64_t last) {
  ASSERT_EQ(int64_t(steps.size()), last);
  for (int64_t i = 0; i < last; ++i) EXPECT_EQ(steps[size_t(i)], i + 1) << "row " << i;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The run directory stays resumable and holds one job's rows: a resume to more steps
// succeeds and every step appears once.
void expect_resumable(const std::string& dir, const std::vector<std::string>& args, int64_t steps,
                      int ranks, const std::string& tag) {
  std::string out;
  ASSERT_EQ(
      run_lcr(train_args(with(args, {"train.steps=" + std::to_string(steps)})), ranks, tag, &out),
      0)
      << out;
  std::vector<int64_t> st;
  losses(dir, &st);
  expect_steps_once(st, steps);
}

TEST(RunDirectory, ASecondTrainerOnATrainingRunIsRefusedNamingTheHolder) {
  const std::string dir = scratch() + "/lock_busy";
  const auto args = tiny_args(dir, "rope");
  const Child a = start_lcr(train_args(with(args, {"train.steps=100000"})), 0, "lock_a");
  ASSERT_GT(a.pid, 0);
  const bool ready = wait_until([&] { return losses(dir).size() >= 3; }, 120);
  std::string out;
  // (stop_after bounds it where nothing refuses it)
  const int rc_b = run_lcr(train_args(with(args, {"train.steps=100000", "train.stop_after=5"})), 0,
                           "lock_b", &out);
  const size_t rows_after_b = losses(dir).size();
  ::kill(a.pid, SIGTERM);
  EXPECT_EQ(wait_child(a), 0) << read_text(a.log);
  ASSERT_TRUE(ready) << read_text(a.log);
  EXPECT_EQ(rc_b, 1) << out;
  EXPECT_TRUE(contains(out, "in use by another writer")) << out;
  EXPECT_TRUE(contains(out, "pid " + std::to_string(a.pid))) << out;
  EXPECT_TRUE(contains(out, "another run.name")) << out;
  EXPECT_GE(rows_after_b, 3u);
  std::vector<int64_t> st;
  losses(dir, &st);
  const int64_t stopped = st.back();
  expect_steps_once(st, stopped);
  expect_resumable(dir, args, stopped + 3, 0, "lock_resume");
}

TEST(RunDirectory, TwoTrainersStartedAtOnceUnderMpirunOneProceeds) {
  const std::string dir = scratch() + "/lock_race";
  const auto args = with(tiny_args(dir, "goat"), {"train.steps=60", "train.ckpt_every=20"});
  // 60 steps outlast the other mpirun's start, so the two meet at the lock.
  const Child a = start_lcr(train_args(args), 2, "race_a");
  const Child b = start_lcr(train_args(args), 2, "race_b");
  const int ra = wait_child(a), rb = wait_child(b);
  const std::string la = read_text(a.log), lb = read_text(b.log);
  EXPECT_EQ(std::multiset<int>({ra, rb}), std::multiset<int>({0, 1})) << la << "\n----\n" << lb;
  const std::string& loser = ra == 0 ? lb : la;
  EXPECT_TRUE(contains(loser, "in use by another writer")) << loser;
  std::vector<int64_t> st;
  losses(dir, &st);
  expect_steps_once(st, 60);
  expect_resumable(dir, args, 63, 2, "race_resume");
}

TEST(RunDirectory, SigintCheckpointsAndExitsZero) {
  const std::string dir = scratch() + "/sigint";
  const Child c =
      start_lcr(train_args(with(tiny_args(dir, "pope"), {"train.steps=100000"})), 0, "sigint");
  const bool ready = wait_until([&] { return losses(dir).size() >= 3; }, 120);
  ::kill(c.pid, SIGINT);
  EXPECT_EQ(wait_child(c), 0) << read_text(c.log);
  ASSERT_TRUE(ready);
  std::vector<int64_t> steps;
  losses(dir, &steps);
  EXPECT_EQ(io::CheckpointStore(dir + "/ckpt").marker().value_or(-1), steps.back());
}

// Open MPI 4.1's mpirun treats SIGTERM and SIGINT as an abort of the job: it sends the
// ranks SIGTERM itself and SIGKILL soon after, and returns 1 whatever they returned; the
// ranks may or may not finish their checkpoint in that grace period. SIGUSR1 is forwarded
// and mpirun returns the ranks' 0 (test_train_lifecycle). docs/training.md says exactly this.
TEST(RunDirectory, SigtermAndSigintToMpirunReturnOneAndLeaveTheRunResumable) {
  for (const int sig : {SIGTERM, SIGINT}) {
    const std::string tag = "mpirun_sig" + std::to_string(sig), dir = scratch() + "/" + tag;
    const auto args = with(tiny_args(dir, "goat"), {"train.steps=100000", "parallel.cp=2"});
    const Child c = start_lcr(train_args(args), 2, tag);
    const bool ready = wait_until([&] { return losses(dir).size() >= 3; }, 120);
    ::kill(c.pid, sig);
    const int rc = wait_child(c);
    ASSERT_TRUE(ready) << read_text(c.log);
    EXPECT_EQ(rc, 1) << read_text(c.log);
    std::string out;
    EXPECT_EQ(run_lcr(train_args(with(args, {"train.stop_after=2"})), 2, tag + "_resume", &out), 0)
        << out;
  }
}

// The children (the ranks) of a process, from /proc/<pid>/task/*/children.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::istringstream in(read_text(task + "/" + e->d_name + "/children"));
    for (pid_t p; in >> p;) out.push_back(p);
  }
  ::closedir(d);
  return out;
}

bool running(pid_t pid) {  // alive and not a zombie
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  const size_t p = stat.rfind(')');
  return p != std::string::npos && p + 2 < stat.size() && stat[p + 2] != 'Z';
}

TEST(RunDirectory, RanksStopAtOnceWhenMpirunIsKilled) {
  const std::string dir = scratch() + "/orphans";
  // Quiet ranks (no log lines to a dead pipe) checkpointing every step.
  const auto args = with(tiny_args(dir, "goat"), {"train.steps=100000", "parallel.cp=2",
                                                  "train.ckpt_every=1", "train.log_every=1000"});
  const Child c = start_lcr(train_args(args), 2, "orphans");
  const bool ready =
      wait_until([&] { return io::CheckpointStore(dir + "/ckpt").marker().value_or(0) >= 3; }, 120);
  const std::vector<pid_t> ranks = children_of(c.pid);
  ::kill(c.pid, SIGKILL);
  EXPECT_EQ(wait_child(c), 128 + SIGKILL);
  ASSERT_TRUE(ready) << read_text(c.log);
  ASSERT_EQ(ranks.size(), 2u);
  const bool stopped = wait_until(
      [&] {
        for (pid_t r : ranks)
          if (running(r)) return false;
        return true;
      },
      0.5);
  for (pid_t r : ranks) {
    if (running(r)) ::kill(r, SIGKILL);  // do not leave them behind
  }
  EXPECT_TRUE(stopped) << "orphaned ranks still running 0.5 s after kill -9 of mpirun";
  // What they left is resumable.
  std::string out;
  EXPECT_EQ(run_lcr(train_args(with(args, {"train.stop_after=2"})), 2, "orphans_resume", &out), 0)
      << out;
}

}  // namespace
}  // namespace lcr::test
