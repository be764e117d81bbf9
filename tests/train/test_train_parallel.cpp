// The trainer under context and data parallelism (DESIGN.md section 5's central property,
// end to end): `mpirun -np 2 lcr train` with parallel.cp = 2 logs the same 20 losses as the
// one-rank run of the same config, for GOAT, PoPE, PaTH and PaTH-FoX and both layouts (PaTH
// with blocks of 8, so each 8- or 16-row chunk runs the chunk kernel and the ring carries
// queries across chunks; its convolution prefix crosses ranks); with parallel.cp = 1
// (dp = 2, batch b per rank) it logs the losses of one rank with batch 2b (the sampler
// gives replica r the rows r*b .. r*b + b-1 of the global batch).
//
// Tolerances. Only the summation order differs (ring merge, gradient all-reduce); AdamW
// divides by sqrt(v) ~ |g|, so relative gradient differences become relative parameter
// differences of the same size times lr, and 20 steps do not amplify them much. Observed
// max relative loss differences over 20 steps: float64 1e-15, float32 2e-8 (GOAT and
// PoPE); PaTH and PaTH-FoX the same (float64 <= 1.1e-15, float32 <= 2.4e-8, both layouts).
// Allowed: 1e-12 and 1e-6.
#include <cmath>

#include "train_test_util.hpp"

namespace lcr::test {
namespace {

void expect_same_losses(const std::vector<double>& a, const std::vector<double>& b, double rel) {
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], rel * std::abs(a[i])) << "loss of step " << i + 1;
  EXPECT_LT(a.back(), a.front()) << "the loss should fall over 20 steps";
}

struct CpCase {
  std::string scheme, precision, layout;
  double rel;
};

class TrainCp : public ::testing::TestWithParam<CpCase> {};

TEST_P(TrainCp, TwoRankCpLossesEqualOneRank) {
  const CpCase& c = GetParam();
  const std::string tag = c.scheme + "_" + c.precision + "_" + c.layout;
  const std::string one = scratch() + "/cp1_" + tag, two = scratch() + "/cp2_" + tag;
  auto common = [&](const std::string& dir) {
    auto a = tiny_args(dir, c.scheme);
    a.push_back("train.precision=" + c.precision);
    a.push_back("attention.path.block_size=8");  // only PaTH reads it
    return a;
  };
  auto args = common(one);
  std::string out;
  ASSERT_EQ(run_lcr(train_args(args), 0, "cp1_" + tag, &out), 0) << out;
  args = common(two);
  args.push_back("parallel.cp=2");
  args.push_back("parallel.layout=" + c.layout);
  ASSERT_EQ(run_lcr(train_args(args), 2, "cp2_" + tag, &out), 0) << out;
  expect_same_losses(losses(one), losses(two), c.rel);
}

INSTANTIATE_TEST_SUITE_P(Schemes, TrainCp,
                         ::testing::Values(CpCase{"goat", "float64", "zigzag", 1e-12},
                                           CpCase{"pope", "float64", "contiguous", 1e-12},
                                           CpCase{"goat", "float32", "zigzag", 1e-6},
                                           CpCase{"pope", "float32", "zigzag", 1e-6},
                                           CpCase{"path", "float64", "zigzag", 1e-12},
                                           CpCase{"path", "float64", "contiguous", 1e-12},
                                           CpCase{"path", "float32", "zigzag", 1e-6},
                                           CpCase{"path_fox", "float64", "zigzag", 1e-12},
                                           CpCase{"path_fox", "float64", "contiguous", 1e-12},
                                           CpCase{"path_fox", "float32", "zigzag", 1e-6}),
                         [](const auto& info) {
                           return info.param.scheme + "_" + info.param.precision + "_" +
                                  info.param.layout;
                         });

TEST(TrainDp, TwoReplicasEqualOneRankWithTheWholeBatch) {
  const std::string one = scratch() + "/dp1", two = scratch() + "/dp2";
  auto args = tiny_args(one, "goat");
  args.push_back("train.precision=float64");
  args.push_back("train.batch=4");
  std::string out;
  ASSERT_EQ(run_lcr(train_args(args), 0, "dp1", &out), 0) << out;
  args = tiny_args(two, "goat");
  args.push_back("train.precision=float64");
  args.push_back("train.batch=2");  // per replica
  ASSERT_EQ(run_lcr(train_args(args), 2, "dp2", &out), 0) << out;
  expect_same_losses(losses(one), losses(two), 1e-12);
}

// Byte text through the ring, evaluated at the end (perplexity at L and 2L through the
// ring, the passkey grid): the evaluation tables get one row per length / cell.
TEST(TrainText, ByteTextUnderCpWritesPerplexityAndPasskeyTables) {
  const std::string dir = scratch() + "/text_cp2";
  auto args = tiny_args(dir, "goat");
  for (const char* a :
       {"data.source=text", "train.seq_len=128", "train.steps=3", "eval.at_end=true",
        "eval.max_length_factor=2", "eval.windows=2", "eval.passkey=true", "eval.passkey_depths=2",
        "eval.passkey_samples=1", "parallel.cp=2"})
    args.push_back(a);
  std::string out;
  ASSERT_EQ(run_lcr(train_args(args), 2, "text_cp2", &out), 0) << out;
  io::RunReader r = io::RunReader::open(dir + "/run.h5");
  EXPECT_EQ(r.column("eval/perplexity", "length"), (std::vector<double>{128, 256}));
  for (double loss : r.column("eval/perplexity", "loss")) {
    EXPECT_GT(loss, 0.5);  // byte text after 3 steps: near ln 256 = 5.5
    EXPECT_LT(loss, 7.0);
  }
  EXPECT_EQ(r.rows("eval/passkey"), 4);  // lengths 128, 256 x depths 0, 1
  EXPECT_NE(out.find("passkey"), std::string::npos) << out;
}

}  // namespace
}  // namespace lcr::test
