// Configuration: [attention] TOML -> AttentionSpec, command-line overrides, error
// messages (they must name the key and list the valid choices), resolved-TOML round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../error_text.hpp"  // tests/error_text.hpp
#include "core/config/attention_config.hpp"

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
  EXPECT_NE(msg("attention.heads=").find("must look like section.key=value"), std::string::npos);
  EXPECT_NE(msg("attention..heads=4").find("is not a dotted key"), std::string::npos);
  EXPECT_NE(msg("attention.scheme=a b").find("cannot parse the value 'a b'"), std::string::npos);
  const std::string m = error_of([] {
    from_text("", {"attention.heads=2", "attention.heads.x=1"});
  });
  EXPECT_NE(m.find("attention.heads is a value, not a table"), std::string::npos) << m;
  // A well-formed override of an unknown key fails when the spec is read, naming it.
  const std::string u = error_of([] { from_text("", {"attention.rope.bse=2"}); });
  EXPECT_NE(u.find("unknown key 'attention.rope.bse' (command-line override"), std::string::npos)
      << u;
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
