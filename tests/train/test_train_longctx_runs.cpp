// Long-context evaluation end to end with the real `lcr`: a tiny token-form run evaluated at
// its end writes eval/longctx (read back here and equal to `lcr eval`'s JSON of the same
// checkpoint), `lcr eval` on several ranks -- context parallel (both layouts) and data
// parallel -- gives exactly the one-rank numbers, `lcr inspect` prints the tables, and a
// model whose vocabulary cannot hold the form is refused before any compute.
//
// Exactness: the per-span counts are integers summed over the ranks; the model runs in
// float64, where the ring's summation order changes logits by ~1e-15, so no argmax moves.
#include <cmath>
#include <regex>

#include "train_test_util.hpp"

namespace lcr::test {
namespace {

const char* const kTasks =
    "eval.longctx=niah_single,niah_multivalue,variable_tracking,fwe,phonebook";

std::vector<std::string> run_args(const std::string& dir) {
  auto a = tiny_args(dir, "goat");
  for (const char* x :
       {"data.source=niah_single", "task.niah_single.form=token", "train.seq_len=128",
        "attention.goat.train_len=128", "train.steps=4", "train.log_every=2", "train.ckpt_every=4",
        "train.precision=float64", "eval.at_end=true", "eval.max_length_factor=2",
        "eval.task_samples=2", "eval.longctx_depths=3", "eval.longctx_samples=3",
        "task.niah_multivalue.value=uuid", "task.niah_multivalue.values=2"})
    a.push_back(x);
  a.push_back(kTasks);
  return a;
}

// One trained run for every test of this file.
const std::string& trained() {
  static const std::string dir = [] {
    const std::string d = scratch() + "/longctx_run";
    std::string out;
    EXPECT_EQ(run_lcr(train_args(run_args(d)), 0, "longctx_train", &out), 0) << out;
    EXPECT_NE(out.find("long-context cells"), std::string::npos) << out;
    EXPECT_NE(out.find("| longctx avg"), std::string::npos) << out;
    return d;
  }();
  return dir;
}

// `lcr eval -o` of the trained run on `ranks` ranks (0: no mpirun); the JSON text.
std::string eval_json(int ranks, const std::vector<std::string>& extra, const std::string& tag) {
  const std::string json = scratch() + "/" + tag + ".json";
  std::vector<std::string> args = {"eval", "--run", trained(), "-o", json};
  args.insert(args.end(), extra.begin(), extra.end());
  std::string out;
  EXPECT_EQ(run_lcr(args, ranks, tag, &out), 0) << out;
  return read_text(json);
}

// The "longctx" object of an eval JSON.
std::string longctx_part(const std::string& json) {
  const size_t at = json.find("\"longctx\": ");
  return at == std::string::npos ? std::string() : json.substr(at);
}

struct Cell {
  std::string task, category;
  double length, depth, samples, token_accuracy, all_match, part_match;
};

std::vector<Cell> json_cells(const std::string& json) {
  static const std::regex re(
      "\\{\"task\": \"(\\w+)\", \"category\": \"(\\w+)\", \"length\": (\\d+), \"depth\": "
      "([^,]+), \"samples\": (\\d+), \"token_accuracy\": ([^,]+), \"all_match\": ([^,]+), "
      "\"part_match\": ([^}]+)\\}");
  std::vector<Cell> out;
  const auto num = [](const std::string& s) { return s == "null" ? NAN : std::stod(s); };
  for (std::sregex_iterator it(json.begin(), json.end(), re), end; it != end; ++it) {
    const auto& m = *it;
    out.push_back({m[1], m[2], num(m[3]), num(m[4]), num(m[5]), num(m[6]), num(m[7]), num(m[8])});
  }
  return out;
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

TEST(TrainLongctx, RunFileTableEqualsTheEvalOfTheSameCheckpoint) {
  io::RunReader r = io::RunReader::open(trained() + "/run.h5");
  EXPECT_EQ(r.columns("eval/longctx"),
            (std::vector<std::string>{"all_match", "category", "depth", "length", "part_match",
                                      "samples", "task", "token_accuracy"}));
  const auto attrs = r.attributes("eval/longctx");
  EXPECT_EQ(attrs.at("task_names"),
            "niah_single,niah_multikey,niah_multivalue,niah_multiquery,variable_tracking,cwe,fwe,"
            "phonebook");
  EXPECT_EQ(attrs.at("category_names"),
            "single_needle,multi_needle,aggregation,tracking,phonebook");
  // niah_single 2 lengths x 3 depths, niah_multivalue (uuids: 256 only) 3, variable_tracking
  // 6, fwe 2 (no depth), phonebook 6.
  const int64_t n = r.rows("eval/longctx");
  ASSERT_EQ(n, 23);
  for (int64_t s : r.steps("eval/longctx")) EXPECT_EQ(s, 4);
  const auto cells = json_cells(eval_json(0, {}, "longctx_eval1"));
  ASSERT_EQ(int64_t(cells.size()), n);
  const auto col = [&](const char* c) { return r.column("eval/longctx", c); };
  const auto task = col("task"), cat = col("category"), len = col("length"), depth = col("depth"),
             samples = col("samples"), tok = col("token_accuracy"), all = col("all_match"),
             part = col("part_match");
  const std::vector<std::string> names = {
      "niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "variable_tracking",
      "cwe",         "fwe",           "phonebook"};
  const std::vector<std::string> cats = {"single_needle", "multi_needle", "aggregation", "tracking",
                                         "phonebook"};
  for (int64_t i = 0; i < n; ++i) {
    const Cell& c = cells[size_t(i)];
    SCOPED_TRACE("row " + std::to_string(i) + " " + c.task);
    EXPECT_EQ(names[size_t(task[size_t(i)])], c.task);
    EXPECT_EQ(cats[size_t(cat[size_t(i)])], c.category);
    EXPECT_EQ(len[size_t(i)], c.length);
    EXPECT_TRUE(same(depth[size_t(i)], c.depth));
    EXPECT_EQ(samples[size_t(i)], 3);
    EXPECT_EQ(tok[size_t(i)], c.token_accuracy);
    EXPECT_EQ(all[size_t(i)], c.all_match);
    EXPECT_EQ(part[size_t(i)], c.part_match);
  }
  EXPECT_EQ(cells[6].task, "niah_multivalue");
  EXPECT_EQ(cells[6].length, 256);           // too short at 128: left out there
  EXPECT_TRUE(std::isnan(cells[15].depth));  // fwe: no needle
}

TEST(TrainLongctx, SeveralRanksGiveExactlyTheOneRankNumbers) {
  const std::string one = longctx_part(eval_json(0, {}, "longctx_r1"));
  ASSERT_FALSE(one.empty());
  double right = 0;
  for (const Cell& c : json_cells(one)) right += c.token_accuracy;
  EXPECT_GT(right, 0) << "some answer token should be right, or the comparison tests little\n"
                      << one;
  EXPECT_EQ(longctx_part(eval_json(2, {"parallel.cp=2"}, "longctx_cp2")), one);
  EXPECT_EQ(
      longctx_part(eval_json(2, {"parallel.cp=2", "parallel.layout=contiguous"}, "longctx_cp2c")),
      one);
  EXPECT_EQ(longctx_part(eval_json(2, {"eval.batch=1"}, "longctx_dp2")), one);  // dp 2
}

TEST(TrainLongctx, InspectPrintsTheTablesAndTheEffectiveLength) {
  std::string out;
  ASSERT_EQ(run_lcr({"inspect", trained()}, 0, "longctx_inspect", &out), 0) << out;
  for (const char* x : {"long-context tasks (step 4, 23 cells)", "long-context score (part_match",
                        "task \\ length", "niah_multivalue", "variable_tracking", "category",
                        "single_needle", "average", "effective length"})
    EXPECT_NE(out.find(x), std::string::npos) << x << "\n" << out;
  // The eval verb prints the same tables.
  ASSERT_EQ(run_lcr({"eval", "--run", trained()}, 0, "longctx_eval_print", &out), 0) << out;
  EXPECT_NE(out.find("long-context score (part_match"), std::string::npos) << out;
}

TEST(TrainLongctx, AVocabularyThatCannotHoldTheFormIsRefusedBeforeAnyCompute) {
  // A copy-mixture model of 16 tokens: the token form needs 486.
  const std::string dir = scratch() + "/longctx_small_vocab";
  std::string out;
  ASSERT_EQ(run_lcr(train_args(tiny_args(dir, "goat")), 0, "longctx_small", &out), 0) << out;
  ASSERT_EQ(run_lcr({"eval", "--run", dir, "eval.longctx=niah_single"}, 0, "longctx_refuse", &out),
            1)
      << out;
  EXPECT_NE(out.find("eval.longctx: the token form"), std::string::npos) << out;
  EXPECT_NE(out.find("at least 486 tokens; this model has 16"), std::string::npos) << out;
  EXPECT_EQ(out.find("evaluating"), std::string::npos) << "nothing may be computed\n" << out;
  // Training such a model with eval.longctx stops before the first step, writing nothing.
  const std::string bad = scratch() + "/longctx_refuse_train";
  auto args = tiny_args(bad, "goat");
  args.push_back("eval.longctx=niah_single");
  ASSERT_EQ(run_lcr(train_args(args), 0, "longctx_refuse_train", &out), 1) << out;
  EXPECT_NE(out.find("needs a model vocabulary of at least 486"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(bad + "/run.h5"));
}

}  // namespace
}  // namespace lcr::test
