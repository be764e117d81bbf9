// Configuration: [attention] TOML -> AttentionSpec, command-line overrides, error
// messages (they must name the key and list the valid choices), resolved-TOML round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../error_text.hpp"  // tests/error_text.hpp
#include "core/config/attention_config.hpp"
#include "core/config/train_config.hpp"

namespace lcr::config {
namespace {

AttentionSpec from_text(const std::string& text, const std::vector<std::string>& overrides = {}) {
  Document root = Document::parse(text, "test.toml");
  for (const auto& o : overrides) apply_override(root, o);
  return attention_spec_from(root);
}

using lcr::test::error_of;

TEST(Config, ReadsEveryKindOfField) {
  const AttentionSpec s = from_text(R"(
[attention]
scheme = "rope"
heads = 8
kv_heads = 2
head_dim = 128
[attention.rope]
pairing = "interleaved"
base = 500000          # an integer where a float belongs is fine
yarn_factor = 4.0
[attention.goat]
train_len = 8192
[attention.numerics]
sink = true
softcap = 30
)");
  EXPECT_EQ(s.scheme, Scheme::RoPE);
  EXPECT_EQ(s.heads, 8);
  EXPECT_EQ(s.kv_heads, 2);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.rope.pairing, RopePairing::Interleaved);
  EXPECT_EQ(s.rope.base, 500000.0);
  EXPECT_EQ(s.rope.yarn_factor, 4.0);
  EXPECT_EQ(s.goat.train_len, 8192);
  EXPECT_TRUE(s.numerics.sink);
  EXPECT_EQ(s.numerics.softcap, 30.0);
  EXPECT_EQ(s.pope.base, AttentionSpec{}.pope.base);  // untouched keys keep their defaults
}

TEST(Config, EmptyConfigIsTheDefaultSpec) {
  const AttentionSpec s = attention_spec_from(load_config("", {}));
  EXPECT_EQ(attention_spec_toml(s), attention_spec_toml(AttentionSpec{}));
}

TEST(Config, UnknownKeyListsTheValidKeys) {
  const std::string m = error_of([] { from_text("[attention.rope]\nbse = 1.0\n"); });
  EXPECT_NE(m.find("unknown key 'attention.rope.bse'"), std::string::npos) << m;
  EXPECT_NE(m.find("test.toml line 2"), std::string::npos) << m;
  EXPECT_NE(m.find("valid keys in [attention.rope]: pairing, rotary_dim, base, yarn_factor"),
            std::string::npos)
      << m;
  const std::string top = error_of([] { from_text("[atention]\nheads = 2\n"); });
  EXPECT_NE(top.find("unknown key 'atention'"), std::string::npos) << top;
  EXPECT_NE(top.find("valid keys at the top level: attention.*"), std::string::npos) << top;
  const std::string nested = error_of([] { from_text("[attention]\nsink = true\n"); });
  EXPECT_NE(nested.find("numerics.*"), std::string::npos) << nested;  // sub-tables listed too
}

TEST(Config, WrongTypesNameTheKeyAndTheTypes) {
  std::string m = error_of([] { from_text("[attention]\nheads = \"four\"\n"); });
  EXPECT_NE(m.find("attention.heads must be an integer, got a string 'four'"), std::string::npos)
      << m;
  m = error_of([] { from_text("[attention.rope]\nbase = \"big\"\n"); });
  EXPECT_NE(m.find("attention.rope.base must be a number"), std::string::npos) << m;
  m = error_of([] { from_text("[attention.numerics]\nsink = 1\n"); });
  EXPECT_NE(m.find("attention.numerics.sink must be true or false, got an integer 1"),
            std::string::npos)
      << m;
  m = error_of([] { from_text("[attention]\nrope = 3\n"); });
  EXPECT_NE(m.find("attention.rope must be a table [attention.rope]"), std::string::npos) << m;
  m = error_of([] { from_text("[attention]\nheads = 1.5\n"); });
  EXPECT_NE(m.find("must be an integer, got a float 1.5"), std::string::npos) << m;
  m = error_of([] { from_text("[attention]\nheads = 9999999999\n"); });
  EXPECT_NE(m.find("attention.heads = 9999999999 is out of range"), std::string::npos) << m;
}

TEST(Config, UnknownSchemeListsTheSchemes) {
  const std::string m = error_of([] { from_text("", {"attention.scheme=ropee"}); });
  EXPECT_NE(m.find("unknown value 'ropee' for attention.scheme; valid values: nope, rope, alibi"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("command-line override 'attention.scheme=ropee'"), std::string::npos) << m;
  const std::string p = error_of([] { from_text("", {"attention.rope.pairing=half"}); });
  EXPECT_NE(p.find("valid values: half_split, interleaved"), std::string::npos) << p;
}

TEST(Config, OverridesParseTomlValuesAndBareWords) {
  const AttentionSpec s =
      from_text("[attention]\nscheme = \"rope\"\nheads = 2\n",
                {"attention.scheme=goat", "attention.rope.base=500000",
                 "attention.numerics.sink=true", "attention.heads = 4",
                 "attention.numerics.qk_norm_eps=1e-5", "attention.rope.pairing=\"interleaved\""});
  EXPECT_EQ(s.scheme, Scheme::GOAT);  // bare word -> string; overrides beat the file
  EXPECT_EQ(s.rope.base, 500000.0);
  EXPECT_TRUE(s.numerics.sink);
  EXPECT_EQ(s.heads, 4);
  EXPECT_EQ(s.numerics.qk_norm_eps, 1e-5);
  EXPECT_EQ(s.rope.pairing, RopePairing::Interleaved);
}

TEST(Config, MalformedOverridesAreClearErrors) {
  auto msg = [](const std::string& o) {
    return error_of([&] {
      Document t;
      apply_override(t, o);
    });
  };
  EXPECT_NE(msg("attention.heads").find("must look like section.key=value"), std::string::npos);
  EXPECT_NE(msg("=4").find("must look like section.key=value"), std::string::npos);
  EXPECT_NE(msg("attention..heads=4").find("is not a dotted key"), std::string::npos);
  // A value that is not TOML is an error once the key's type is known (not a string).
  std::string v = error_of([] { from_text("", {"attention.heads=a b"}); });
  EXPECT_NE(v.find("attention.heads must be an integer, got 'a b' (command-line override "
                   "'attention.heads=a b')"),
            std::string::npos)
      << v;
  v = error_of([] { from_text("", {"attention.heads="}); });
  EXPECT_NE(v.find("attention.heads must be an integer, got nothing after '='"), std::string::npos)
      << v;
  const std::string m = error_of([] {
    from_text("", {"attention.heads=2", "attention.heads.x=1"});
  });
  EXPECT_NE(m.find("attention.heads is a value, not a table"), std::string::npos) << m;
  // A well-formed override of an unknown key fails when the spec is read, naming it.
  const std::string u = error_of([] { from_text("", {"attention.rope.bse=2"}); });
  EXPECT_NE(u.find("unknown key 'attention.rope.bse' (command-line override"), std::string::npos)
      << u;
}

// A value TOML reads as a local date: a run named after its day must stay that text.
const std::string kDateLike = "2026-12-05";

// The train config's keys as the overrides set them; no validation (check_train_config).
TrainConfig train_from(const std::vector<std::string>& overrides) {
  TrainConfig cfg;
  Table root;
  bind_train_config(root, cfg);
  root.read(load_config("", overrides));
  return cfg;
}

TEST(Config, StringKeysTakeTheOverrideTextVerbatim) {
  TrainConfig c =
      train_from({"run.dir=runs/x", "data.paths=data/c4/train", "run.name=" + kDateLike});
  EXPECT_EQ(c.run.dir, "runs/x");
  EXPECT_EQ(c.data.paths, "data/c4/train");
  EXPECT_EQ(c.run.name, kDateLike);  // not a TOML date
  // Whatever TOML would make of the text, a string key takes the text itself.
  EXPECT_EQ(train_from({"run.name=true"}).run.name, "true");
  EXPECT_EQ(train_from({"run.name=12"}).run.name, "12");
  EXPECT_EQ(train_from({"run.name=1e-6"}).run.name, "1e-6");
  EXPECT_EQ(train_from({"run.name=007"}).run.name, "007");
  EXPECT_EQ(train_from({"run.name=a b"}).run.name, "a b");
  EXPECT_EQ(train_from({"run.name=[1, 2]"}).run.name, "[1, 2]");
  EXPECT_EQ(train_from({"run.name={a = 1}"}).run.name, "{a = 1}");
  EXPECT_EQ(train_from({"run.dir=/scratch/a=b/c"}).run.dir, "/scratch/a=b/c");  // first '='
  EXPECT_EQ(train_from({"run.dir = runs/x "}).run.dir, "runs/x");  // spaces around trimmed
  EXPECT_EQ(train_from({"data.paths=a.txt,b.txt"}).data.paths, "a.txt,b.txt");
  // Choices are strings too.
  EXPECT_EQ(train_from({"data.source=text"}).data.source, "text");
  EXPECT_EQ(train_from({"attention.scheme=rope"}).model.attention.scheme, Scheme::RoPE);
}

TEST(Config, QuotedStringOverridesMeanTheirContent) {
  EXPECT_EQ(train_from({"run.dir=\"runs/x\""}).run.dir, "runs/x");
  EXPECT_EQ(train_from({"run.dir='runs/x'"}).run.dir, "runs/x");
  EXPECT_EQ(train_from({"run.name=\"" + kDateLike + "\""}).run.name, kDateLike);
  EXPECT_EQ(train_from({"data.paths=\"data/c4/train\""}).data.paths, "data/c4/train");
  EXPECT_EQ(train_from({"run.name=\" x \""}).run.name, " x ");  // spaces kept inside quotes
  EXPECT_EQ(train_from({"run.name=\"\""}).run.name, "");
  EXPECT_EQ(train_from({"attention.scheme=\"goat\""}).model.attention.scheme, Scheme::GOAT);
  EXPECT_EQ(train_from({"attention.scheme='pope'"}).model.attention.scheme, Scheme::PoPE);
  // Not one TOML string: the text as it is.
  EXPECT_EQ(train_from({"run.name=\"a\"b"}).run.name, "\"a\"b");
  // Inside an inline table the values are TOML, as in a file.
  const TrainConfig t = train_from({"run={name = \"n1\", dir = 'd/1'}"});
  EXPECT_EQ(t.run.name, "n1");
  EXPECT_EQ(t.run.dir, "d/1");
}

TEST(Config, EmptyOverrideOfAStringKeyIsTheEmptyString) {
  EXPECT_EQ(train_from({"run.dir=runs/x", "run.dir="}).run.dir, "");  // "" = runs/<name>
  EXPECT_EQ(train_from({"run.name="}).run.name, "");
  // Where the empty string is not a valid value, validation says so, naming the key.
  const std::string m = error_of([] { load_train_config("", {"run.name="}); });
  EXPECT_NE(m.find("run.name must be a non-empty name"), std::string::npos) << m;
}

TEST(Config, OverridesOfOtherTypesStayTomlWithErrorsNamingTheKey) {
  const TrainConfig c = train_from({"train.steps=100", "train.lr=3e-4", "run.overwrite=true",
                                    "train.lr = 1"});  // an integer where a float belongs
  EXPECT_EQ(c.train.steps, 100);
  EXPECT_EQ(c.train.lr, 1.0);
  EXPECT_TRUE(c.run.overwrite);
  auto err = [](const std::string& o) { return error_of([&] { train_from({o}); }); };
  std::string m = err("train.steps=ten");
  EXPECT_NE(m.find("train.steps must be an integer, got 'ten' (command-line override "
                   "'train.steps=ten')"),
            std::string::npos)
      << m;
  m = err("train.steps=");
  EXPECT_NE(m.find("train.steps must be an integer, got nothing after '='"), std::string::npos)
      << m;
  m = err("train.steps=\"ten\"");
  EXPECT_NE(m.find("train.steps must be an integer, got a string"), std::string::npos) << m;
  m = err("train.steps=" + kDateLike);
  EXPECT_NE(m.find("train.steps must be an integer, got a date/time"), std::string::npos) << m;
  m = err("train.lr=1e");
  EXPECT_NE(m.find("train.lr must be a number, got '1e'"), std::string::npos) << m;
  m = err("run.overwrite=yes");
  EXPECT_NE(m.find("run.overwrite must be true or false, got 'yes'"), std::string::npos) << m;
  m = err("run={name = }");
  EXPECT_NE(m.find("run must be a table [run], got '{name = }'"), std::string::npos) << m;
  m = err("data.source=");
  EXPECT_NE(m.find("unknown value '' for data.source; valid values: text, shards"),
            std::string::npos)
      << m;
  // An unknown key is an error naming it, whatever its value.
  m = err("run.dri=runs/x");
  EXPECT_NE(m.find("unknown key 'run.dri' (command-line override 'run.dri=runs/x')"),
            std::string::npos)
      << m;
}

TEST(Config, ResolvedTomlRoundTripsWithEveryKey) {
  AttentionSpec s;
  s.scheme = Scheme::PoPE;
  s.heads = 6;
  s.kv_heads = 3;
  s.rope.base = 123456.789;
  s.rope.pairing = RopePairing::Interleaved;
  s.goat.train_len = 1LL << 40;
  s.numerics.qk_norm = true;
  s.numerics.qk_norm_eps = 1e-7;
  const std::string text = attention_spec_toml(s);
  EXPECT_NE(text.find("[attention.numerics]"), std::string::npos) << text;
  EXPECT_NE(text.find("base = 123456.789"), std::string::npos) << text;
  EXPECT_NE(text.find("qk_norm_eps = 1e-07"), std::string::npos) << text;
  EXPECT_NE(text.find("scheme = \"pope\""), std::string::npos) << text;
  EXPECT_NE(text.find("  # "), std::string::npos) << text;  // documented keys
  EXPECT_EQ(attention_spec_toml(from_text(text)), text);
  // Every key is written: as many "key = value" lines as bound values.
  size_t lines = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines += !line.empty() && line[0] != '[';
  EXPECT_EQ(lines, attention_spec_values(s).size());
}

TEST(Config, ValuesAreWrittenAsTomlThatReadsBack) {
  EXPECT_EQ(format_value(10000.0), "10000.0");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(format_value(1.0 / 3.0), "0.3333333333333333");  // as Python repr
  EXPECT_EQ(format_value(-INFINITY), "-inf");
  EXPECT_EQ(format_value(int64_t(-3)), "-3");
  EXPECT_EQ(format_value(true), "true");
  EXPECT_EQ(format_value(std::string("a\"b\\c\n")), "\"a\\\"b\\\\c\\u000a\"");
  for (const Value& v : {Value(1.0 / 3.0), Value(1e-300), Value(std::string("x\"\t\\y"))}) {
    EXPECT_EQ(Document::parse("v = " + format_value(v), "test").value("v"), v);
  }
}

TEST(Config, FileErrorsNameTheFileAndLine) {
  const auto path = std::filesystem::temp_directory_path() / "lcr_test_config_bad.toml";
  std::ofstream(path) << "[attention]\nheads = = 3\n";
  const std::string m = error_of([&] { load_config(path.string(), {}); });
  EXPECT_NE(m.find(path.string() + ":2:"), std::string::npos) << m;
  std::ofstream(path) << "[attention]\nheads = 3\n";
  EXPECT_EQ(attention_spec_from(load_config(path.string(), {"attention.kv_heads=3"})).kv_heads, 3);
  std::filesystem::remove(path);
  const std::string missing = error_of([] { load_config("/nonexistent/run.toml", {}); });
  EXPECT_NE(missing.find("/nonexistent/run.toml"), std::string::npos) << missing;
}

TEST(Config, TablesFromDottedValuesMergeDeeply) {
  Document a = table_from_values({{"attention.heads", int64_t(4)},
                                  {"attention.rope.base", 1e4},
                                  {"attention.scheme", std::string("rope")}});
  merge(a, table_from_values({{"attention.rope.base", 5e5}, {"attention.numerics.sink", true}}));
  const AttentionSpec s = attention_spec_from(a);
  EXPECT_EQ(s.heads, 4);
  EXPECT_EQ(s.scheme, Scheme::RoPE);
  EXPECT_EQ(s.rope.base, 5e5);
  EXPECT_TRUE(s.numerics.sink);
  EXPECT_TRUE(a.has("attention.rope"));
  EXPECT_FALSE(a.has("attention.rope.bse"));
  EXPECT_FALSE(a.has("attention.heads.x"));
  EXPECT_EQ(a.value("attention.heads"), Value(int64_t(4)));
  EXPECT_EQ(a.value("attention.rope"), std::nullopt);  // a table, not a value
  const auto leaves = a.leaves();
  EXPECT_EQ(leaves.size(), 4u);
  EXPECT_EQ(leaves.at("attention.scheme"), "\"rope\"");
  EXPECT_EQ(leaves.at("attention.rope.base"), "5e+05");  // shortest round-trip text
}

}  // namespace
}  // namespace lcr::config
