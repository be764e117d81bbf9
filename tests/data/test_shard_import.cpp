// Shards from raw token arrays (core/data/shard_import.hpp, `lcr shards`): every input type
// round-trips through ShardReader at odd sizes and shard lengths, several inputs form one
// stream across shard boundaries, and every bad input is an error that names the file and
// leaves no shard behind.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/data/shard.hpp"
#include "core/data/shard_import.hpp"
#include "kernels/base/error.hpp"
#include "temp_dir.hpp"

namespace {

using lcr::data::import_raw_tokens;
using lcr::data::RawTokenType;
using lcr::data::ShardReader;
namespace fs = std::filesystem;
using lcr::test::TempDir;

// Little-endian bytes of the values at the given width, written by hand (independent of the
// importer's decoding).
void write_raw(const std::string& path, const std::vector<int64_t>& v, int width) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int64_t x : v) {
    const uint64_t u = uint64_t(x);
    for (int b = 0; b < width; ++b) out.put(char((u >> (8 * b)) & 0xff));
  }
}

std::vector<int64_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = int64_t(rng() % uint64_t(vocab));
  return v;
}

std::vector<int64_t> read_all(const std::vector<lcr::data::ImportedShard>& shards, int64_t vocab) {
  std::vector<int64_t> all;
  for (const auto& s : shards) {
    ShardReader r(s.path, int32_t(vocab));
    r.verify();
    EXPECT_EQ(r.size(), s.tokens) << s.path;
    std::vector<int32_t> t(size_t(r.size()));
    r.read(0, r.size(), t.data());
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lcr::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ShardImport, EveryTypeRoundTripsAsOneStreamAcrossShards) {
  struct Case {
    RawTokenType type;
    int width;
    int64_t vocab;
  };
  // uint16 at GPT-2's vocabulary; 4-byte types with tokens above 2^16 (shards of width 4).
  for (const Case c : {Case{RawTokenType::UInt16, 2, 50257}, Case{RawTokenType::UInt32, 4, 100000},
                       Case{RawTokenType::Int32, 4, 70001}}) {
    TempDir t;
    const auto a = random_tokens(7, c.vocab, 1), b = random_tokens(16, c.vocab, 2);
    write_raw(t.path("a.bin"), a, c.width);
    write_raw(t.path("empty.bin"), {}, c.width);
    write_raw(t.path("b.bin"), b, c.width);
    const auto shards = import_raw_tokens({t.path("a.bin"), t.path("empty.bin"), t.path("b.bin")},
                                          c.type, c.vocab, t.path("out"), "train", 5);
    ASSERT_EQ(shards.size(), 5u);  // 23 tokens: 5 5 5 5 3, the first shard boundary inside a
    EXPECT_EQ(shards.back().tokens, 3);
    EXPECT_EQ(fs::path(shards[4].path).filename().string(), "train_00004.bin");
    std::vector<int64_t> want = a;
    want.insert(want.end(), b.begin(), b.end());
    EXPECT_EQ(read_all(shards, c.vocab), want);
  }
}

TEST(ShardImport, NoTokensWritesNoShard) {
  TempDir t;
  write_raw(t.path("empty.bin"), {}, 2);
  EXPECT_TRUE(
      import_raw_tokens({t.path("empty.bin")}, RawTokenType::UInt16, 10, t.path("out"), "s", 4)
          .empty());
  EXPECT_FALSE(fs::exists(t.path("out")));
}

TEST(ShardImport, ATokenOutsideTheVocabularyNamesItsFileAndIndexAndLeavesNoShard) {
  TempDir t;
  write_raw(t.path("a.bin"), random_tokens(9, 100, 3), 2);
  auto b = random_tokens(6, 100, 4);
  b[4] = 100;  // the first token not below vocab = 100
  write_raw(t.path("b.bin"), b, 2);
  const std::string e = error_of([&] {
    import_raw_tokens({t.path("a.bin"), t.path("b.bin")}, RawTokenType::UInt16, 100, t.path("out"),
                      "s", 4);  // shards 0 and 1 are written before b's token
  });
  EXPECT_NE(e.find("b.bin: token 100 at index 4 is outside [0, 100)"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(t.path("out"))) << "the shards written before the bad token stay";
}

TEST(ShardImport, NegativeAndTooLargeValuesAreErrors) {
  TempDir t;
  write_raw(t.path("neg.bin"), {3, -1}, 4);
  EXPECT_NE(error_of([&] {
              import_raw_tokens({t.path("neg.bin")}, RawTokenType::Int32, 10, t.path("o1"), "s", 8);
            }).find("token -1 at index 1"),
            std::string::npos);
  write_raw(t.path("big.bin"), {int64_t(0x80000000u)}, 4);  // above INT32_MAX as uint32
  EXPECT_NE(error_of([&] {
              import_raw_tokens({t.path("big.bin")}, RawTokenType::UInt32, 1000, t.path("o2"), "s",
                                8);
            }).find("token 2147483648 at index 0"),
            std::string::npos);
}

TEST(ShardImport, BadInputsAndExistingShardsFailBeforeAnythingIsWritten) {
  TempDir t;
  write_raw(t.path("ok.bin"), random_tokens(8, 50, 5), 2);
  std::ofstream(t.path("odd.bin"), std::ios::binary) << "abc";  // 3 bytes: 1.5 uint16 tokens
  std::string e = error_of([&] {
    import_raw_tokens({t.path("ok.bin"), t.path("odd.bin")}, RawTokenType::UInt16, 50,
                      t.path("out"), "s", 4);
  });
  EXPECT_NE(e.find("odd.bin has 3 bytes, not a whole number of uint16 tokens"), std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(t.path("out")));

  fs::create_directories(t.path("out"));
  std::ofstream(t.path("out/s_00001.bin")) << "keep me";
  e = error_of([&] {
    import_raw_tokens({t.path("ok.bin")}, RawTokenType::UInt16, 50, t.path("out"), "s", 4);
  });
  EXPECT_NE(e.find("s_00001.bin exists already"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(t.path("out/s_00000.bin")));
  std::ifstream kept(t.path("out/s_00001.bin"));
  std::string text;
  std::getline(kept, text);
  EXPECT_EQ(text, "keep me");

  for (const auto& [f, msg] : std::vector<std::pair<std::function<void()>, std::string>>{
           {[&] { import_raw_tokens({}, RawTokenType::UInt16, 50, t.path("o"), "s", 4); },
            "no input file"},
           {[&] {
              import_raw_tokens({t.path("ok.bin")}, RawTokenType::UInt16, 0, t.path("o"), "s", 4);
            },
            "vocabulary size 0"},
           {[&] {
              import_raw_tokens({t.path("ok.bin")}, RawTokenType::UInt16, 50, t.path("o"), "s", 0);
            },
            "tokens per shard must be >= 1"},
           {[&] {
              import_raw_tokens({t.path("ok.bin")}, RawTokenType::UInt16, 50, t.path("o"), "a/b",
                                4);
            },
            "plain, non-empty file name"},
           {[&] { lcr::data::parse_raw_token_type("float32"); }, "uint16, uint32, int32"}})
    EXPECT_NE(error_of(f).find(msg), std::string::npos) << msg;
}

}  // namespace
