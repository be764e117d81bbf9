// The numerics options end to end: `lcr train` with attention.numerics.off_by_one keeps every
// layer's sink logits at exactly 0 in its checkpoint (the frozen range), trains (the loss
// falls), and is not the plain softmax (its losses differ from the same run without it);
// with cp = 2 it logs the one-rank losses (float64: only the summation order differs, as in
// test_train_parallel.cpp, so 1e-12 relative).
#include <cmath>
#include <filesystem>

#include "core/io/checkpoint.hpp"
#include "core/model/params.hpp"
#include "train_test_util.hpp"

namespace lcr::test {
namespace {

// Every slice of the newest checkpoint's params whose name ends in ".sink".
std::vector<double> sink_values(const std::string& run_dir) {
  std::string newest;
  for (const auto& e : std::filesystem::directory_iterator(run_dir + "/ckpt"))
    if (e.path().extension() == ".h5" && e.path().string() > newest) newest = e.path().string();
  const io::Checkpoint c = io::read_checkpoint(newest);
  const io::CkptArray& p = c.at("params");
  const auto& v = std::get<std::vector<double>>(p.values);
  std::vector<double> out;
  for (const auto& s : p.slices) {
    if (!ends_with(s.name, ".sink")) continue;
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    out.insert(out.end(), v.begin() + s.offset, v.begin() + s.offset + n);
  }
  return out;
}

TEST(TrainNumerics, OffByOneKeepsTheSinkAtZeroAndMatchesUnderCp) {
  const std::string plain = scratch() + "/obo_plain", one = scratch() + "/obo_1",
                    two = scratch() + "/obo_2";
  auto args = [](const std::string& dir, bool obo) {
    auto a = tiny_args(dir, "pope");
    a.push_back("train.precision=float64");
    if (obo) a.push_back("attention.numerics.off_by_one=true");
    return train_args(a);
  };
  std::string out;
  ASSERT_EQ(run_lcr(args(plain, false), 0, "obo_plain", &out), 0) << out;
  ASSERT_EQ(run_lcr(args(one, true), 0, "obo_1", &out), 0) << out;
  auto cp2 = args(two, true);
  cp2.push_back("parallel.cp=2");
  ASSERT_EQ(run_lcr(cp2, 2, "obo_2", &out), 0) << out;

  const std::vector<double> sinks = sink_values(one);
  ASSERT_EQ(sinks.size(), 4u);  // 2 layers x 2 heads
  for (double s : sinks) EXPECT_EQ(s, 0.0);
  const auto a = losses(one), b = losses(two), p = losses(plain);
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), a.size());
  ASSERT_EQ(p.size(), a.size());
  EXPECT_LT(a.back(), a.front()) << "the loss should fall over 20 steps";
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(b[i], a[i], 1e-12 * std::abs(a[i])) << "loss of step " << i + 1;
  EXPECT_GT(std::abs(a.back() - p.back()), 1e-6) << "off-by-one trained like the plain softmax";
}

}  // namespace
}  // namespace lcr::test
