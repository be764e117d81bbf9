// A GOAT model trained on copy-mixture learns what the task needs, and the run file shows
// it (GOAT paper, Fig. 1). Task: each next token copies the first token (p = 0.35), the
// token 3 back (p = 0.4) or is noise; so a query at position i should look at key 0 and at
// key i - 2 (its next token copies the token 3 back from i + 1).
//
// The check, on the LAST prior row the trainer logged (1 rank, 200 steps, ~20 s):
//  1. consistency: the logged prior_curve equals sum_r alpha cos(w_r l) + beta sin(w_r l)
//     recomputed from the logged alpha and beta (w_r = 10000^(-r/(R-1))), so what we test
//     below is what the parameters say;
//  2. relative stripe: some head's curve, over the lags inside the training length, peaks
//     at lag 2 and stands > 0.5 nats above its median there. At initialisation alpha, beta
//     ~ N(0, 0.02^2), so the curve is within ~0.1 of flat and has no preferred lag;
//  3. first-token column: some head's KV head has u(0) - mean_{j=1..31} u(j) > 2 nats AND
//     that head puts > 0.3 of its attention on position 0 (first_token_mass), i.e. the bump
//     is used, not just learned. At initialisation u == 0 (GOAT's MLP output weights,
//     lambda and the bump start at zero).
// Observed (seeds 1234 and 99): stripe margin ~1.15 at lag 2 in every layer-0 head; bump
// 5-7 nats with 0.5-0.8 first-token mass in three layer-1 heads. The thresholds sit well
// below that and far above the initial state.
#include <algorithm>
#include <cmath>

#include "core/train/prior_stats.hpp"
#include "train_test_util.hpp"

namespace lcr::test {
namespace {

TEST(TrainPrior, CopyMixtureLearnsFirstTokenColumnAndRelativeStripe) {
  const std::string dir = scratch() + "/prior";
  std::string out;
  const std::vector<std::string> args = {"--config",
                                         LCR_SOURCE_DIR "/experiments/configs/default.toml",
                                         "parallel.cp=1",
                                         "train.seq_len=64",
                                         "attention.goat.train_len=64",
                                         "train.steps=200",
                                         "train.warmup=20",
                                         "train.lr=5e-3",
                                         "train.log_every=50",
                                         "eval.at_end=false",
                                         "task.copy_mixture.p_first=0.35",
                                         "task.copy_mixture.p_relative=0.4",
                                         "task.copy_mixture.relative_offset=3",
                                         "eval.max_length_factor=4",
                                         "run.dir=\"" + dir + "\""};
  ASSERT_EQ(run_lcr(train_args(args), 0, "prior", &out), 0) << out;

  io::RunReader r = io::RunReader::open(dir + "/run.h5");
  const int64_t L = 64, R = 4, target_lag = 2;
  // The lag / position axes (/priors/goat_lags): prior_lags(4 L), which starts with 0..31.
  const std::vector<int64_t> lags = train::prior_lags(4 * L);
  bool stripe = false, column = false;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string t = "priors/layer_" + std::to_string(layer);
    const int64_t n = r.rows(t);
    ASSERT_EQ(n, 4);  // steps 50, 100, 150, 200
    std::vector<int64_t> cs, us, hs;
    const auto alpha = r.column(t, "alpha", &hs), beta = r.column(t, "beta");
    const auto curve = r.column(t, "prior_curve", &cs), u = r.column(t, "u", &us);
    const auto ftm = r.column(t, "first_token_mass");
    const int64_t H = hs[0], nl = cs[1], np = us[1];
    ASSERT_EQ(hs[1], R);
    const size_t last = size_t(n - 1);
    for (int64_t h = 0; h < H; ++h) {
      // 1. The logged curve is the logged parameters' prior (lags 0..31 are the axis).
      std::vector<double> inside;
      for (int64_t l = 0; l < 32; ++l) {
        double k = 0;
        for (int64_t m = 0; m < R; ++m) {
          const double w = std::pow(10000.0, -double(m) / double(R - 1));
          k += alpha[last * H * R + h * R + m] * std::cos(w * l) +
               beta[last * H * R + h * R + m] * std::sin(w * l);
        }
        const double logged = curve[last * H * nl + h * nl + l];
        EXPECT_NEAR(logged, k, 1e-4 * (1 + std::abs(k))) << t << " head " << h << " lag " << l;
      }
      // 2. The stripe, over the lags inside the training length.
      int64_t peak = 0;
      for (int64_t i = 0; i < nl && lags[size_t(i)] < L; ++i) {
        inside.push_back(curve[last * H * nl + h * nl + i]);
        if (inside.back() > inside[size_t(peak)]) peak = int64_t(inside.size()) - 1;
      }
      std::vector<double> sorted = inside;
      std::sort(sorted.begin(), sorted.end());
      const double margin = inside[size_t(peak)] - sorted[sorted.size() / 2];
      if (peak == target_lag && margin > 0.5) stripe = true;
      // 3. The first-token column, through the head's KV head (here Hkv = H).
      double rest = 0;
      for (int64_t j = 1; j < 32; ++j) rest += u[last * H * np + h * np + j];
      const double bump = u[last * H * np + h * np] - rest / 31;
      if (bump > 2.0 && ftm[last * H + h] > 0.3) column = true;
    }
  }
  EXPECT_TRUE(stripe) << "no head's relative prior peaks at lag 2 by > 0.5 nats\n" << out;
  EXPECT_TRUE(column) << "no head has a used first-token bump u(0) - mean u > 2\n" << out;

  // The inspect verb prints the per-head table of this run.
  ASSERT_EQ(run_lcr({"inspect", dir}, 0, "prior_inspect", &out), 0) << out;
  EXPECT_NE(out.find("u0_bump"), std::string::npos) << out;
  EXPECT_NE(out.find("peak_lag"), std::string::npos) << out;
}

// train.probe_every thins the prior statistics only: metrics every log_every steps, priors
// at the multiples of probe_every and at the last step.
TEST(TrainPrior, ProbeEveryThinsThePriorRowsOnly) {
  const std::string dir = scratch() + "/probe_every";
  std::string out;
  auto args = tiny_args(dir, "goat");
  args.insert(args.end(), {"train.log_every=2", "train.probe_every=6"});
  ASSERT_EQ(run_lcr(train_args(args), 0, "probe_every", &out), 0) << out;
  io::RunReader r = io::RunReader::open(dir + "/run.h5");
  EXPECT_EQ(r.steps("metrics"), (std::vector<int64_t>{2, 4, 6, 8, 10, 12, 14, 16, 18, 20}));
  for (const char* t : {"priors/layer_0", "priors/layer_1"})
    EXPECT_EQ(r.steps(t), (std::vector<int64_t>{6, 12, 18, 20})) << t;
  // Not a multiple of log_every: refused before training, naming both keys.
  args.back() = "train.probe_every=5";
  ASSERT_EQ(run_lcr(train_args(args), 0, "probe_every_bad", &out), 1) << out;
  EXPECT_NE(out.find("train.probe_every must be 0 (with every metrics row) or a multiple of "
                     "train.log_every = 2, got 5"),
            std::string::npos)
      << out;
}

// The authors' GPT recipe (goat.recipe = "authors", R = 0): the run file has the key prior
// u(j) and no per-mode columns, and u starts as ALiBi's recency term: for 2 KV heads the
// published slopes are 2^-4 and 2^-8, which 20 steps at lr 1e-3 move by far less than 1%.
TEST(TrainPrior, AuthorsGptRecipeLogsTheKeyPriorFromAlibiSlopes) {
  const std::string dir = scratch() + "/authors_gpt";
  std::string out;
  auto args = tiny_args(dir, "goat");
  args.insert(args.end(), {"attention.goat.recipe=authors", "attention.goat.modes=0",
                           "train.lr=1e-3", "train.min_lr=1e-4"});
  ASSERT_EQ(run_lcr(train_args(args), 0, "authors_gpt", &out), 0) << out;
  io::RunReader r = io::RunReader::open(dir + "/run.h5");
  const auto cols = r.columns("priors/layer_0");
  EXPECT_EQ(std::count(cols.begin(), cols.end(), "alpha"), 0);
  ASSERT_EQ(std::count(cols.begin(), cols.end(), "u"), 1);
  std::vector<int64_t> shape;
  const auto all = r.column("priors/layer_0", "u", &shape);  // [rows, Hkv, positions]
  ASSERT_EQ(shape.size(), 2u);
  const int64_t np = shape[1], last = r.rows("priors/layer_0") - 1;
  ASSERT_GE(np, 32);  // the position axis starts with 0 .. 31
  const double* u = all.data() + last * shape[0] * np;
  const double slopes[2] = {0.0625, 0.00390625};
  for (int hk = 0; hk < 2; ++hk) {
    const double per_key = (u[hk * np + 31] - u[hk * np + 11]) / 20.0;
    EXPECT_NEAR(per_key, slopes[hk], 0.01 * slopes[hk]) << "KV head " << hk;
  }
  ASSERT_EQ(run_lcr({"inspect", dir}, 0, "authors_gpt_inspect", &out), 0) << out;
  EXPECT_NE(out.find("u0_bump"), std::string::npos) << out;
}

}  // namespace
}  // namespace lcr::test
