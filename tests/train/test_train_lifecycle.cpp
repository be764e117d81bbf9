// A run's life: resume from a checkpoint, kill -9, SIGUSR1 / SIGTERM, a non-finite loss,
// and the eval / inspect verbs on what is left. Each test runs the real `lcr` command.
//
// Exactness: a resumed run restores parameters and AdamW moments bit for bit and the
// sampler is a pure function of (seed, step), so the resumed losses equal the uninterrupted
// run's exactly (same ranks, same binary); the tests compare with ==.
#include <csignal>
#include <filesystem>

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

TEST(TrainLifecycle, ResumeReproducesTheUninterruptedLosses) {
  const std::string full = scratch() + "/resume_full", split = scratch() + "/resume_split";
  std::string out;
  ASSERT_EQ(run_lcr(train_args(tiny_args(full, "goat")), 0, "resume_full", &out), 0) << out;
  // The same run split over three jobs: stop after 7 steps, then 6, then to the end.
  const auto args = with(tiny_args(split, "goat"), {"train.ckpt_every=5"});
  ASSERT_EQ(run_lcr(train_args(with(args, {"train.stop_after=7"})), 0, "resume_a", &out), 0) << out;
  EXPECT_EQ(io::CheckpointStore(split + "/ckpt").marker().value_or(-1), 7);
  ASSERT_EQ(run_lcr(train_args(with(args, {"train.stop_after=6"})), 0, "resume_b", &out), 0) << out;
  EXPECT_NE(out.find("resuming from"), std::string::npos) << out;
  ASSERT_EQ(run_lcr(train_args(args), 0, "resume_c", &out), 0) << out;
  std::vector<int64_t> steps;
  const auto a = losses(full), b = losses(split, &steps);
  expect_steps_once(steps, 20);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  EXPECT_EQ(io::RunReader::open(split + "/run.h5").provenance().at("resume_count"), "2");
  // A complete run is not trained again.
  ASSERT_EQ(run_lcr(train_args(args), 0, "resume_d", &out), 0) << out;
  EXPECT_NE(out.find("nothing to do"), std::string::npos) << out;
  // The eval verb on the finished run.
  ASSERT_EQ(run_lcr({"eval", "--run", split, "eval.max_length_factor=2"}, 0, "eval", &out), 0)
      << out;
  EXPECT_NE(out.find("length     64"), std::string::npos) << out;
  // --output keeps the results: JSON with the printed numbers, no .tmp left behind.
  const std::string json = split + "/eval.json";
  ASSERT_EQ(run_lcr({"eval", "--run", split, "-o", json, "eval.max_length_factor=2"}, 0,
                    "eval_json", &out),
            0)
      << out;
  const std::string text = read_text(json);
  EXPECT_EQ(text.rfind("{\"run\": \"" + split +
                           "\", \"step\": 20, \"overrides\": "
                           "[\"eval.max_length_factor=2\"],",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find("{\"length\": 64, \"loss\": "), std::string::npos) << text;
  EXPECT_NE(text.find("\"passkey\": []}"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(json + ".tmp"));
}

// train.log_phases logs every phase of a CPU step with each metrics row, on 2 ranks (cp = 2,
// the all-reduces included), and the fences it adds change no loss.
TEST(TrainLifecycle, LogPhasesNamesEveryPhaseAndChangesNoLoss) {
  const std::string plain = scratch() + "/phases_off", timed = scratch() + "/phases_on";
  std::string out;
  ASSERT_EQ(
      run_lcr(train_args(with(tiny_args(plain, "goat"), {"parallel.cp=2"})), 2, "phases_off", &out),
      0)
      << out;
  ASSERT_EQ(run_lcr(train_args(
                        with(tiny_args(timed, "goat"), {"parallel.cp=2", "train.log_phases=true"})),
                    2, "phases_on", &out),
            0)
      << out;
  for (const char* phase :
       {"data", "forward", "backward", "loss all-reduce", "grad all-reduce", "optimizer"})
    EXPECT_NE(out.find(std::string(" ") + phase + " "), std::string::npos) << phase << "\n" << out;
  EXPECT_NE(out.find("phases, ms per step on rank 0:"), std::string::npos) << out;
  EXPECT_EQ(losses(plain), losses(timed));
}

TEST(TrainLifecycle, KillNineLeavesAReadableRunFileAndTheLastCheckpoint) {
  const std::string dir = scratch() + "/kill9";
  const auto args = with(tiny_args(dir, "goat"), {"train.steps=100000", "train.ckpt_every=4"});
  const Child c = start_lcr(train_args(args), 0, "kill9");
  ASSERT_GT(c.pid, 0);
  io::CheckpointStore store(dir + "/ckpt");
  const bool ready =
      wait_until([&] { return store.marker().value_or(0) >= 8 && losses(dir).size() >= 10; }, 120);
  // While it runs: inspect reads the live file.
  std::string out;
  EXPECT_EQ(run_lcr({"inspect", dir}, 0, "inspect_live", &out), 0) << out;
  EXPECT_NE(out.find("metrics:"), std::string::npos) << out;
  ::kill(c.pid, SIGKILL);
  EXPECT_EQ(wait_child(c), 128 + SIGKILL);
  ASSERT_TRUE(ready) << read_text(c.log);

  // Readable as it is (SWMR read), then made normally openable.
  std::vector<int64_t> steps;
  const auto before = losses(dir, &steps);
  ASSERT_GE(before.size(), 10u);
  const std::string how = io::recover_run_file(dir + "/run.h5");
  EXPECT_TRUE(how == "cleared" || how == "copied") << how;
  const auto found = store.load_latest();
  ASSERT_TRUE(found.has_value());
  const int64_t ck = found->checkpoint.step;
  EXPECT_GE(ck, 8);
  EXPECT_EQ(ck % 4, 0);

  // Resume for 3 steps: rows after the checkpoint are replaced by the same values.
  ASSERT_EQ(run_lcr(train_args(with(args, {"train.stop_after=3"})), 0, "kill9_resume", &out), 0)
      << out;
  std::vector<int64_t> after_steps;
  const auto after = losses(dir, &after_steps);
  expect_steps_once(after_steps, ck + 3);
  for (size_t i = 0; i < std::min(before.size(), after.size()); ++i)
    EXPECT_EQ(before[i], after[i]) << "step " << steps[i];
}

TEST(TrainLifecycle, Sigusr1UnderMpirunCheckpointsAndExitsCleanly) {
  const std::string dir = scratch() + "/usr1";
  const auto args = with(tiny_args(dir, "goat"), {"train.steps=100000", "parallel.cp=2"});
  const Child c = start_lcr(train_args(args), 2, "usr1");
  ASSERT_GT(c.pid, 0);
  const bool ready = wait_until([&] { return losses(dir).size() >= 3; }, 120);
  ::kill(c.pid, SIGUSR1);  // mpirun forwards SIGUSR1 to every rank
  const int rc = wait_child(c);
  ASSERT_TRUE(ready) << read_text(c.log);
  EXPECT_EQ(rc, 0) << read_text(c.log);
  std::vector<int64_t> steps;
  losses(dir, &steps);
  const auto marker = io::CheckpointStore(dir + "/ckpt").marker();
  ASSERT_TRUE(marker.has_value());
  EXPECT_EQ(*marker, steps.back()) << "the checkpoint is of the last logged step";
  EXPECT_LT(*marker, 100000);
  EXPECT_NE(read_text(c.log).find("signal 10"), std::string::npos) << read_text(c.log);
}

// A launcher may start lcr with the stop signals blocked (the mask survives exec); lcr
// unblocks them, so the scheduler's warning still reaches it.
TEST(TrainLifecycle, Sigusr1ReachesARunStartedWithItBlocked) {
  const std::string dir = scratch() + "/usr1_blocked";
  const auto args = with(tiny_args(dir, "nope"), {"train.steps=100000"});
  const Child c = start_lcr(train_args(args), 0, "usr1_blocked", {SIGUSR1, SIGTERM});
  const bool ready = wait_until([&] { return losses(dir).size() >= 3; }, 120);
  ::kill(c.pid, SIGUSR1);
  const int rc = wait_child(c);
  ASSERT_TRUE(ready) << read_text(c.log);
  EXPECT_EQ(rc, 0) << read_text(c.log);
  std::vector<int64_t> steps;
  losses(dir, &steps);
  EXPECT_EQ(io::CheckpointStore(dir + "/ckpt").marker().value_or(-1), steps.back());
  EXPECT_NE(read_text(c.log).find("signal 10"), std::string::npos) << read_text(c.log);
}

TEST(TrainLifecycle, SigtermCheckpointsAndExitsCleanly) {
  const std::string dir = scratch() + "/term";
  const Child c =
      start_lcr(train_args(with(tiny_args(dir, "pope"), {"train.steps=100000"})), 0, "term");
  const bool ready = wait_until([&] { return losses(dir).size() >= 3; }, 120);
  ::kill(c.pid, SIGTERM);
  EXPECT_EQ(wait_child(c), 0) << read_text(c.log);
  ASSERT_TRUE(ready);
  std::vector<int64_t> steps;
  losses(dir, &steps);
  EXPECT_EQ(io::CheckpointStore(dir + "/ckpt").marker().value_or(-1), steps.back());
}

TEST(TrainLifecycle, NonFiniteLossStopsNamingStepAndLayerWithTheCheckpointIntact) {
  const std::string dir = scratch() + "/nan";
  std::string out;
  const auto args = with(tiny_args(dir, "goat"), {"train.ckpt_every=5", "train.inject_nan_step=7"});
  EXPECT_EQ(run_lcr(train_args(args), 0, "nan", &out), 1) << out;
  EXPECT_NE(out.find("non-finite training loss"), std::string::npos) << out;
  EXPECT_NE(out.find("at step 8"), std::string::npos) << out;
  EXPECT_NE(out.find("layer 1 (attention output projection)"), std::string::npos) << out;
  const auto found = io::CheckpointStore(dir + "/ckpt").load_latest();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->checkpoint.step, 5);
  EXPECT_EQ(losses(dir).size(), 7u);  // steps 1..7 logged, the NaN step not
}

}  // namespace
}  // namespace lcr::test
