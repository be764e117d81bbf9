// Run integrity (issue 39, items 2-5): what a resume may change and how it is recorded, a
// resume on a full disk, the divergence guard on checkpoints, resuming from an earlier
// checkpoint by name, and the checkpoint checksum. Each test runs the real `lcr` command.
#include <hdf5.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/io/checkpoint.hpp"
#include "train_test_util.hpp"

namespace lcr::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(TrainIntegrity, ResumeRefusesAChangedConfigAndRecordsAllowedChanges) {
  const std::string dir = scratch() + "/changed";
  std::string out;
  const auto args = with(tiny_args(dir, "goat"), {"train.ckpt_every=5"});
  ASSERT_EQ(run_lcr(train_args(with(args, {"train.stop_after=5"})), 0, "changed_a", &out), 0)
      << out;
  const std::string toml = read_text(dir + "/config.toml");
  // A changed learning rate is refused, with the diff and the way to start a new run.
  EXPECT_EQ(run_lcr(train_args(with(args, {"train.lr=0.05"})), 0, "changed_b", &out), 1) << out;
  EXPECT_TRUE(contains(out, "train.lr: 0.001 -> 0.05")) << out;
  EXPECT_TRUE(contains(out, "run.overwrite=true")) << out;
  EXPECT_TRUE(contains(out, "new run.name")) << out;
  EXPECT_EQ(read_text(dir + "/config.toml"), toml);  // nothing changed
  EXPECT_EQ(io::RunReader::open(dir + "/run.h5").provenance().at("config"), toml);
  // Allowed keys change; the change is recorded and config.toml == run.h5's /config.
  ASSERT_EQ(run_lcr(train_args(with(args, {"train.steps=22", "train.log_every=2"})), 0, "changed_c",
                    &out),
            0)
      << out;
  const auto prov = io::RunReader::open(dir + "/run.h5").provenance();
  EXPECT_EQ(prov.at("config"), read_text(dir + "/config.toml"));
  EXPECT_TRUE(contains(prov.at("config"), "steps = 22")) << prov.at("config");
  ASSERT_TRUE(prov.count("resume_log"));
  EXPECT_TRUE(contains(prov.at("resume_log"), "from step 5")) << prov.at("resume_log");
  EXPECT_TRUE(contains(prov.at("resume_log"), "train.steps: 20 -> 22")) << prov.at("resume_log");
  EXPECT_TRUE(contains(prov.at("resume_log"), "train.log_every: 1 -> 2")) << prov.at("resume_log");
}

TEST(TrainIntegrity, DivergedParametersAreNeverCheckpointed) {
  const std::string dir = scratch() + "/diverge";
  std::string out;
  const auto args =
      with(tiny_args(dir, "goat"), {"train.lr=1e6", "train.warmup=1", "train.ckpt_every=1"});
  EXPECT_EQ(run_lcr(train_args(args), 0, "diverge", &out), 1) << out;
  EXPECT_TRUE(contains(out, "step 1: the parameters diverged")) << out;
  EXPECT_TRUE(contains(out, "Refused to write checkpoint")) << out;
  EXPECT_FALSE(contains(out, "intact")) << out;
  EXPECT_TRUE(io::CheckpointStore(dir + "/ckpt").steps().empty());
}

TEST(TrainIntegrity, ResumeFromAnEarlierCheckpointByNameIsExact) {
  const std::string full = scratch() + "/byname_full", dir = scratch() + "/byname";
  std::string out;
  ASSERT_EQ(run_lcr(train_args(tiny_args(full, "goat")), 0, "byname_full", &out), 0) << out;
  const auto args = with(tiny_args(dir, "goat"), {"train.ckpt_every=5", "train.keep_ckpts=0"});
  ASSERT_EQ(run_lcr(train_args(args), 0, "byname_a", &out), 0) << out;
  ASSERT_EQ(run_lcr(train_args(with(args, {"train.resume_from=step-10"})), 0, "byname_b", &out), 0)
      << out;
  EXPECT_TRUE(contains(out, "resuming from")) << out;
  EXPECT_TRUE(fs::exists(dir + "/ckpt/abandoned/step-15.h5"));
  EXPECT_TRUE(fs::exists(dir + "/ckpt/abandoned/step-20.h5"));
  EXPECT_TRUE(fs::exists(dir + "/ckpt/step-20.h5"));  // written again by the resumed job
  std::vector<int64_t> steps;
  const auto a = losses(full), b = losses(dir, &steps);
  ASSERT_EQ(steps.size(), 20u);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], int64_t(i) + 1);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  // A name that is not there: an error listing what is.
  EXPECT_EQ(run_lcr(train_args(with(args, {"train.resume_from=step-7"})), 0, "byname_c", &out), 1)
      << out;
  EXPECT_TRUE(contains(out, "checkpoints present: step-5, step-10")) << out;
}

TEST(TrainIntegrity, AnEditedCheckpointIsRefusedByItsChecksum) {
  const std::string dir = scratch() + "/edited";
  std::string out;
  const auto args = with(tiny_args(dir, "goat"), {"train.ckpt_every=5", "train.keep_ckpts=0"});
  ASSERT_EQ(run_lcr(train_args(with(args, {"train.stop_after=10"})), 0, "edited_a", &out), 0)
      << out;
  {  // optimizer_steps 10 -> 9, as a hand edit would
    const std::string p = dir + "/ckpt/step-10.h5";
    const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t g = H5Gopen2(f, "scalars", H5P_DEFAULT);
    const hid_t a = H5Aopen(g, "optimizer_steps", H5P_DEFAULT);
    const int64_t nine = 9;
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &nine), 0);
    H5Aclose(a);
    H5Gclose(g);
    H5Fclose(f);
  }
  EXPECT_EQ(run_lcr(train_args(args), 0, "edited_b", &out), 1) << out;
  EXPECT_TRUE(contains(out, "step-10.h5: checksum mismatch")) << out;
  EXPECT_TRUE(contains(out, "train.resume_from=step-<N>")) << out;
  // The fix the message names works: the earlier checkpoint by name.
  ASSERT_EQ(run_lcr(train_args(with(args, {"train.resume_from=step-5"})), 0, "edited_c", &out), 0)
      << out;
}

// A small tmpfs filled to the last byte; skips when it cannot be mounted (not root).
struct FullDisk {
  std::string dir, filler;
  bool mounted = false;
  explicit FullDisk(const std::string& d) : dir(d), filler(d + "/filler") {
    fs::create_directories(dir);
    mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=4m") == 0;
  }
  void fill() {
    std::FILE* f = std::fopen(filler.c_str(), "wb");
    if (!f) return;
    std::vector<char> block(4096, 'x');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
    }
    std::fclose(f);
    std::FILE* g = std::fopen((filler + "2").c_str(), "wb");  // the last partial block
    if (g) {
      while (std::fputc('x', g) != EOF && std::fflush(g) == 0) {
      }
      std::fclose(g);
    }
  }
  void free_space() {
    std::error_code ec;
    fs::remove(filler, ec);
    fs::remove(filler + "2", ec);
  }
  ~FullDisk() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

TEST(TrainIntegrity, ResumeOnAFullDiskLeavesTheRunResumable) {
  FullDisk disk(scratch() + "/fulldisk");
  if (!disk.mounted) GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): skipped";
  const std::string dir = disk.dir + "/run";
  std::string out;
  const auto args = with(tiny_args(dir, "goat"), {"train.ckpt_every=5", "train.keep_ckpts=1"});
  ASSERT_EQ(run_lcr(train_args(with(args, {"train.stop_after=5"})), 0, "full_a", &out), 0) << out;
  const std::string before = read_text(dir + "/run.h5");
  disk.fill();
  const int rc = run_lcr(train_args(args), 0, "full_b", &out);
  EXPECT_EQ(rc, 1) << out;  // a clean error, not a crash in HDF5's shutdown (139)
  EXPECT_TRUE(contains(out, "no space left")) << out;
  EXPECT_TRUE(contains(out, "is unchanged")) << out;
  EXPECT_TRUE(read_text(dir + "/run.h5") == before) << "run.h5 changed by the failed resume";
  EXPECT_FALSE(fs::exists(dir + "/run.h5.resume.tmp"));
  disk.free_space();
  // A leftover of a checkpoint write that died is removed at start.
  { std::ofstream(dir + "/ckpt/step-9.h5.tmp") << "partial"; }
  ASSERT_EQ(run_lcr(train_args(args), 0, "full_c", &out), 0) << out;
  EXPECT_FALSE(fs::exists(dir + "/ckpt/step-9.h5.tmp"));
  std::vector<int64_t> steps;
  losses(dir, &steps);
  ASSERT_EQ(steps.size(), 20u);
  EXPECT_EQ(steps.back(), 20);
}

// kill -9 after the last checkpoint but before run.h5 was closed: every row is there, but the
// file stays marked open for writing and plain readers refuse it. The next `lcr train` finds
// the run complete and must still leave run.h5 readable.
TEST(TrainIntegrity, ACompleteRunKilledBeforeClosingIsLeftReadable) {
  const std::string dir = scratch() + "/killed_at_end";
  std::string out;
  const auto args = tiny_args(dir, "goat");
  ASSERT_EQ(run_lcr(train_args(args), 0, "killed_at_end_a", &out), 0) << out;
  const std::string h5 = dir + "/run.h5";
  // A writer that dies holding run.h5 open: a child opens it for writing and _exits.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const hid_t f = H5Fopen(h5.c_str(), H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, H5P_DEFAULT);
    _exit(f < 0 ? 3 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  H5E_BEGIN_TRY { EXPECT_LT(H5Fopen(h5.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), 0); }
  H5E_END_TRY;  // the premise: the flag is set
  ASSERT_EQ(run_lcr(train_args(args), 0, "killed_at_end_b", &out), 0) << out;
  EXPECT_TRUE(contains(out, "nothing to do")) << out;
  EXPECT_TRUE(contains(out, "was left open by a writer that was killed")) << out;
  const hid_t f = H5Fopen(h5.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << "run.h5 still refuses a plain read-only open";
  if (f >= 0) H5Fclose(f);
}

}  // namespace
}  // namespace lcr::test
