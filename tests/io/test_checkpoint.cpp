// Checkpoints: bit-exact round trip, atomic save with the `latest` marker and keep-last-K,
// a writer killed mid-save, and broken or foreign files giving errors that name the path.
#include <signal.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "../error_text.hpp"  // tests/error_text.hpp
#include "core/io/checkpoint.hpp"
#include "run_file_fixture.hpp"

namespace lcr::io {
namespace {

using namespace testing;

using lcr::test::error_of;

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// A checkpoint whose contents are a function of its step, with awkward values.
Checkpoint make(int64_t step, size_t n = 1000) {
  Checkpoint c;
  c.step = step;
  c.seed = (uint64_t(1) << 63) + 5;  // beyond int64
  c.config_toml = "[train]\nsteps = 100\n";
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = float(step) + 1.0f / float(i + 3);
  p[0] = -0.0f;
  p[1] = std::numeric_limits<float>::denorm_min();
  p[2] = std::numeric_limits<float>::infinity();
  p[3] = std::numeric_limits<float>::quiet_NaN();
  c.put("params", p, {}, {{"embed", 0, {10, 50}}, {"head", 500, {500}}});
  std::vector<double> m(6);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sqrt(double(i) + double(step)) * 1e-300;
  c.put("adam_m", m, {2, 3});
  c.put<int64_t>("rng", {step, -1, std::numeric_limits<int64_t>::min()});
  c.put<float>("empty", {});
  c.scalars["loss_scale"] = 1024.0;
  c.scalars["tokens_seen"] = int64_t(step * 4096);
  c.scalars["note"] = std::string("résumé");
  c.scalars["clean_exit"] = true;
  return c;
}

void expect_equal(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.config_toml, b.config_toml);
  EXPECT_EQ(a.scalars, b.scalars);
  ASSERT_EQ(a.arrays.size(), b.arrays.size());
  EXPECT_TRUE(same_bits(a.get<float>("params"), b.get<float>("params")));
  EXPECT_TRUE(same_bits(a.get<double>("adam_m"), b.get<double>("adam_m")));
  EXPECT_EQ(a.get<int64_t>("rng"), b.get<int64_t>("rng"));
  EXPECT_TRUE(b.get<float>("empty").empty());
  EXPECT_EQ(b.at("adam_m").shape, (std::vector<int64_t>{2, 3}));
  const auto& s = b.at("params").slices;
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].name, "head");
  EXPECT_EQ(s[1].offset, 500);
  EXPECT_EQ(s[0].shape, (std::vector<int64_t>{10, 50}));
}

TEST(Checkpoint, RoundTripIsBitExact) {
  const CheckpointStore store(fresh_dir("ckpt_roundtrip") + "/ckpt");
  EXPECT_FALSE(store.load_latest().has_value());  // a fresh run: nothing to resume
  const Checkpoint c = make(7);
  EXPECT_EQ(store.save(c), store.dir() + "/step-7.h5");
  auto found = store.load_latest();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, store.file_for(7));
  EXPECT_TRUE(found->skipped.empty());
  expect_equal(c, found->checkpoint);

  // Views: the trainer's parameter and moment buffers.
  View1<double> v("v", 129);
  auto h = Kokkos::create_mirror_view(v);
  for (size_t i = 0; i < h.size(); ++i) h(i) = std::exp(double(i) / 7.0);
  Kokkos::deep_copy(v, h);
  Checkpoint cv;
  cv.put_view("v", v);
  cv.step = 8;
  store.save(cv);
  View1<double> w("w", 129);
  store.load_latest()->checkpoint.copy_to_view("v", w);
  auto hw = Kokkos::create_mirror_view_and_copy(HostSpace(), w);
  EXPECT_EQ(std::memcmp(h.data(), hw.data(), 129 * sizeof(double)), 0);
  View1<double> wrong("wrong", 128);
  EXPECT_NE(error_of([&] {
              store.load_latest()->checkpoint.copy_to_view("v", wrong);
            }).find("has 129 values; the model expects 128"),
            std::string::npos);

  if (std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") == 0) {
    const std::string cmd = "/usr/bin/python3 -c \"import sys; sys.path.insert(0, '" LCR_SOURCE_DIR
                            "/analysis'); from runfile import Checkpoint; c = Checkpoint('" +
                            store.file_for(7) +
                            "'); assert c.step == 7 and c.seed == 2**63 + 5; "
                            "assert c.slice('params', 'embed').shape == (10, 50); "
                            "assert c.slice('params', 'head')[0] == c.arrays['params'][500]; "
                            "assert c.scalars['note'] == 'résumé'\"";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
}

TEST(Checkpoint, SaveUpdatesMarkerAndKeepsLastK) {
  const CheckpointStore store(fresh_dir("ckpt_keep") + "/ckpt");
  for (int64_t s : {10, 20, 30, 40}) store.save(make(s), 2);
  EXPECT_EQ(store.steps(), (std::vector<int64_t>{30, 40}));
  EXPECT_EQ(store.marker(), 40);
  EXPECT_EQ(store.load_latest()->checkpoint.step, 40);
  for (const auto& e : fs::directory_iterator(store.dir()))
    EXPECT_EQ(e.path().extension(), e.path().filename() == "latest" ? "" : ".h5");
}

TEST(Checkpoint, WriterKilledMidSaveLeavesTheLastCompleteOne) {
  const CheckpointStore store(fresh_dir("ckpt_kill") + "/ckpt");
  const pid_t child = spawn([&] {
    for (int64_t s = 1;; ++s) store.save(make(s, size_t(1) << 20), 2);  // 4 MiB of params
  });
  // Kill it once a few saves are done, most likely in the middle of the next one.
  for (int i = 0; i < 2000 && store.marker().value_or(0) < 3; ++i) usleep(5000);
  usleep(20000);
  kill(child, SIGKILL);
  ASSERT_EQ(wait_exit(child), -SIGKILL);
  const auto found = store.load_latest();
  ASSERT_TRUE(found.has_value());
  EXPECT_GE(found->checkpoint.step, 3);
  EXPECT_TRUE(found->skipped.empty()) << found->skipped.front();
  EXPECT_TRUE(same_bits(found->checkpoint.get<float>("params"),
                        make(found->checkpoint.step, size_t(1) << 20).get<float>("params")));

  // A torn .tmp (as a kill leaves it) is never a candidate, and the next save removes it.
  {
    std::ofstream tmp(store.dir() + "/step-999.h5.tmp", std::ios::binary);
    tmp << "\x89HDF\r\n\x1a\n truncated";
  }
  EXPECT_EQ(store.load_latest()->checkpoint.step, found->checkpoint.step);
  store.save(make(found->checkpoint.step + 1), 2);
  EXPECT_FALSE(fs::exists(store.dir() + "/step-999.h5.tmp"));
}

// Flips one byte of the array data (found by its bit pattern) so only the checksum notices.
void corrupt_data(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const float probe = float(30) + 1.0f / float(100 + 3);  // params[100] of make(30)
  const auto at = bytes.find(std::string(reinterpret_cast<const char*>(&probe), 4));
  ASSERT_NE(at, std::string::npos);
  f.seekp(std::streamoff(at));
  f.put(char(bytes[at] ^ 0x40));
}

TEST(Checkpoint, BrokenNewestFallsBackWithReasons) {
  const CheckpointStore store(fresh_dir("ckpt_broken") + "/ckpt");
  for (int64_t s : {10, 20, 30}) store.save(make(s));
  const std::string p30 = store.file_for(30), p20 = store.file_for(20);
  corrupt_data(p30);
  EXPECT_NE(
      error_of([&] { read_checkpoint(p30); }).find(p30 + ": cannot read array /arrays/params"),
      std::string::npos);
  auto found = store.load_latest();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->checkpoint.step, 20);
  ASSERT_EQ(found->skipped.size(), 1u);
  EXPECT_NE(found->skipped[0].find(p30), std::string::npos);

  fs::resize_file(p20, fs::file_size(p20) / 2);  // a torn copy
  {
    std::ofstream m(store.dir() + "/latest");
    m << "50\n";  // names a file that does not exist
  }
  found = store.load_latest();
  EXPECT_EQ(found->checkpoint.step, 10);
  ASSERT_EQ(found->skipped.size(), 3u);
  EXPECT_NE(found->skipped[0].find("names step 50, but"), std::string::npos);
  EXPECT_NE(found->skipped[2].find(p20), std::string::npos);

  fs::remove(store.file_for(10));
  const std::string e = error_of([&] { store.load_latest(); });
  EXPECT_NE(e.find("no complete checkpoint in " + store.dir()), std::string::npos) << e;
  EXPECT_NE(e.find(p30), std::string::npos);
  EXPECT_NE(e.find(p20), std::string::npos);
}

TEST(Checkpoint, ClearErrors) {
  const std::string dir = fresh_dir("ckpt_errors");
  EXPECT_NE(
      error_of([&] { read_checkpoint(dir + "/none.h5"); }).find(dir + "/none.h5: no such file"),
      std::string::npos);
  {
    std::ofstream t(dir + "/text.h5");
    t << "not hdf5";
  }
  EXPECT_NE(
      error_of([&] { read_checkpoint(dir + "/text.h5"); }).find("text.h5 is not an HDF5 file"),
      std::string::npos);
  RunFile(RunFile::create(dir + "/run.h5", test_layout(), test_provenance())).close();
  EXPECT_NE(error_of([&] { read_checkpoint(dir + "/run.h5"); }).find("is not an lcr checkpoint"),
            std::string::npos);
  write_checkpoint(dir + "/step-5.h5", make(4));
  EXPECT_NE(error_of([&] {
              read_checkpoint(dir + "/step-5.h5", 5);
            }).find("holds step 4 but its name says 5"),
            std::string::npos);
  const Checkpoint c = read_checkpoint(dir + "/step-5.h5");
  EXPECT_NE(error_of([&] { c.get<double>("params"); }).find("another element type"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              c.at("adam_v");
            }).find("no array 'adam_v' (arrays: adam_m, empty, params, rng)"),
            std::string::npos);
  Checkpoint d;
  EXPECT_NE(error_of([&] {
              d.put<float>("x", {1, 2, 3}, {2, 2});
            }).find("holds 4 values, got 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              d.put<float>("x", {1, 2}, {}, {{"a", 1, {2}}});
            }).find("outside"),
            std::string::npos);
}

}  // namespace
}  // namespace lcr::io
