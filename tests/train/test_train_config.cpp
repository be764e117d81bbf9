// Bad configurations fail before training, naming the key and what is valid; every config
// in experiments/configs parses and validates; the resolved TOML round-trips.
#include <filesystem>

#include "core/config/train_config.hpp"
#include "core/train/flops.hpp"
#include "core/train/prior_stats.hpp"
#include "core/train/run_io.hpp"
#include "train_test_util.hpp"

namespace lcr::test {
namespace {

struct BadCase {
  std::string name;
  std::vector<std::string> overrides;
  std::vector<std::string> expect;  // substrings of the error message
};

class TrainBadConfig : public ::testing::TestWithParam<BadCase> {};

TEST_P(TrainBadConfig, FailsBeforeTrainingNamingTheKey) {
  const BadCase& c = GetParam();
  const std::string dir = scratch() + "/bad_" + c.name;
  auto args = tiny_args(dir, "goat");
  args.insert(args.end(), c.overrides.begin(), c.overrides.end());
  std::string out;
  EXPECT_EQ(run_lcr(train_args(args), 0, "bad_" + c.name, &out), 1) << out;
  for (const auto& e : c.expect) EXPECT_NE(out.find(e), std::string::npos) << e << "\n" << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/run.h5")) << "nothing may be written";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TrainBadConfig,
    ::testing::Values(
        BadCase{"unknown_key",
                {"train.stepz=5"},
                {"unknown key 'train.stepz'", "valid keys in [train]", "steps"}},
        BadCase{"wrong_type", {"train.steps=\"ten\""}, {"train.steps must be an integer"}},
        BadCase{"bad_choice",
                {"data.source=wikipedia"},
                {"data.source", "valid values: text, shards, copy_mixture"}},
        BadCase{"head_split",
                {"attention.heads=3", "attention.kv_heads=2"},
                {"[attention]", "heads (3) must be a multiple of kv_heads (2)"}},
        BadCase{"goat_no_content",
                {"attention.head_dim=6"},
                {"[attention]", "GOAT needs head_dim > 2*modes + 2"}},
        BadCase{"missing_data",
                {"data.source=text", "data.paths=\"/nonexistent/corpus.txt\""},
                {"data.paths", "/nonexistent/corpus.txt", "does not exist"}},
        BadCase{"cp_does_not_divide", {"parallel.cp=2"}, {"parallel.cp = 2 does not divide"}},
        BadCase{"passkey_on_a_task", {"eval.passkey=true"}, {"eval.passkey", "byte-level"}},
        BadCase{"path_block_size",
                {"attention.scheme=path", "attention.path.block_size=0"},
                {"[attention]", "attention.path.block_size must be >= 1"}},
        BadCase{"cuda_float64",
                {"train.device=cuda", "train.precision=float64"},
                {"train.device = \"cuda\" trains in float32"}},
        // Without CUDA in the build, or without a GPU: the error says which and the fix.
        BadCase{"cuda_unavailable", {"train.device=cuda"}, {"train.device = \"cuda\""}},
        BadCase{"path_chunk_does_not_divide",
                {"train.path_chunk=24"},
                {"train.path_chunk = 24 must divide train.seq_len = 32", "-1"}},
        BadCase{"path_chunk_negative", {"train.path_chunk=-2"}, {"train.path_chunk", "automatic"}},
        BadCase{"eval_too_long",
                {"data.source=text", "train.seq_len=2048", "eval.max_length_factor=16"},
                {"eval.max_length_factor"}}),
    [](const auto& info) { return info.param.name; });

// The FLOP count of the logged MFU (core/train/flops.hpp), recounted by hand for a GQA
// model: projections q [D, H d], k and v [D, Hkv d], o [H d, D], SwiGLU 3 D F, LM head V D.
TEST(TrainFlops, CountsTheModelByHand) {
  ModelConfig m;
  m.vocab_size = 100;
  m.d_model = 64;
  m.n_layers = 3;
  m.ffn_hidden = 160;
  m.attention.heads = 4;
  m.attention.kv_heads = 2;
  m.attention.head_dim = 16;
  const int64_t L = 1000;
  const double per_layer = 64.0 * 64 + 2 * (64.0 * 32) + 64.0 * 64 + 3 * 64.0 * 160;
  const double matrix = 2 * (3 * per_layer + 100.0 * 64);
  const double causal_attn = 3 * (1001.0 * 4 * 32);  // per layer: (L + 1) H (d + dv)
  const train::TokenFlops f = train::model_flops_per_token(m, L);
  EXPECT_DOUBLE_EQ(f.causal, 3 * matrix + 3 * causal_attn);
  EXPECT_DOUBLE_EQ(f.full, 3 * matrix + 3 * (3 * 2 * 1000.0 * 4 * 32));
  // GOAT of the same head width counts the same attention (its prior lanes are part of d_h);
  // only its narrower q/k projections (content dims d_c) differ.
  ModelConfig g = m;
  g.attention.scheme = Scheme::GOAT;
  g.attention.goat.modes = 2;
  const train::TokenFlops fg = train::model_flops_per_token(g, L);
  EXPECT_DOUBLE_EQ(fg.full - fg.causal, f.full - f.causal);
  EXPECT_LT(fg.causal, f.causal);
}

TEST(TrainConfigFiles, EveryExperimentConfigParsesAndValidates) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(LCR_SOURCE_DIR "/experiments/configs")) {
    if (e.path().extension() != ".toml") continue;
    SCOPED_TRACE(e.path().string());
    TrainConfig cfg;
    EXPECT_NO_THROW(cfg = config::load_train_config(e.path().string(), {}));
    ++n;
  }
  EXPECT_GE(n, 5);
}

TEST(TrainConfigFiles, ResolvedTomlRoundTrips) {
  const TrainConfig a = config::load_train_config(
      LCR_SOURCE_DIR "/experiments/configs/default.toml", {"train.lr=0.002", "run.name=x"});
  const std::string text = config::train_config_toml(a);
  const std::string path = scratch() + "/resolved.toml";
  std::ofstream(path) << text;
  const TrainConfig b = config::load_train_config(path, {});
  EXPECT_EQ(config::train_config_toml(b), text);
  EXPECT_EQ(b.train.lr, 0.002);
  EXPECT_EQ(b.run_dir(), "runs/x");
  EXPECT_NE(text.find("[task.copy_mixture]"), std::string::npos);
}

TEST(TrainConfigFiles, EvalLengthsAndPriorLags) {
  TrainConfig c;
  c.train.seq_len = 100;
  c.eval.max_length_factor = 8;
  EXPECT_EQ(config::eval_lengths(c), (std::vector<int64_t>{100, 200, 400, 800}));
  const auto lags = train::prior_lags(800);
  ASSERT_GE(lags.size(), 33u);
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(lags[size_t(i)], i);
  for (size_t i = 1; i < lags.size(); ++i) EXPECT_LT(lags[i - 1], lags[i]);
  EXPECT_EQ(lags.back(), 799);
  EXPECT_EQ(config::split_paths(" a.bin, b ,,c "), (std::vector<std::string>{"a.bin", "b", "c"}));
}

// A checkpoint written before attention.alibi.slopes / attention.rope.yarn_convention
// existed trained under the rules lcr had then (geometric slopes, the paper's YaRN ramp). It
// reads as such where that differs from today's default, and resuming it with a config that
// means the new default is refused, naming the key to set.
TEST(TrainConfigFiles, CheckpointsFromBeforeAConventionKeyReadAsTheyTrained) {
  auto without = [](std::string toml, const std::string& line) {
    const size_t at = toml.find(line);
    EXPECT_NE(at, std::string::npos) << line;
    return at == std::string::npos ? toml : toml.erase(at, toml.find('\n', at) + 1 - at);
  };
  TrainConfig cfg;
  cfg.model.vocab_size = 32;
  cfg.model.attention.scheme = Scheme::ALiBi;
  cfg.model.attention.heads = cfg.model.attention.kv_heads = 6;
  cfg.model.attention.head_dim = 8;
  io::Checkpoint c;
  c.step = 7;
  c.config_toml = without(config::train_config_toml(cfg), "slopes = ");
  EXPECT_EQ(train::checkpoint_config(c).model.attention.alibi.slopes, AlibiSlopes::Geometric);
  Model<double> model(cfg.model, 1);
  try {
    train::restore_checkpoint(c, cfg, model, static_cast<AdamW<double>*>(nullptr));
    ADD_FAILURE() << "resumed an old geometric-slope checkpoint under the recipe's slopes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention.alibi.slopes = \"geometric\""),
              std::string::npos)
        << e.what();
  }
  c.config_toml = config::train_config_toml(cfg);  // the key present: as written
  EXPECT_EQ(train::checkpoint_config(c).model.attention.alibi.slopes, AlibiSlopes::Published);
  cfg.model.attention.heads = cfg.model.attention.kv_heads = 8;  // the rules agree: no change
  c.config_toml = without(config::train_config_toml(cfg), "slopes = ");
  EXPECT_EQ(train::checkpoint_config(c).model.attention.alibi.slopes, AlibiSlopes::Published);

  cfg.model.attention.scheme = Scheme::RoPE;
  cfg.model.attention.rope.yarn_factor = 4;
  c.config_toml = without(config::train_config_toml(cfg), "yarn_convention = ");
  EXPECT_EQ(train::checkpoint_config(c).model.attention.rope.yarn_convention,
            YarnConvention::Paper);
  cfg.model.attention.rope.yarn_factor = 1;  // no YaRN: either convention is plain RoPE
  c.config_toml = without(config::train_config_toml(cfg), "yarn_convention = ");
  EXPECT_EQ(train::checkpoint_config(c).model.attention.rope.yarn_convention,
            YarnConvention::Released);
}

}  // namespace
}  // namespace lcr::test
