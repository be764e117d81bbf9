// Token shards: round trips at odd sizes and both widths, the byte layout read back by
// hand (independent of the reader), several shards as one stream, and every header error.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/data/shard.hpp"
#include "kernels/base/error.hpp"
#include "temp_dir.hpp"

namespace {

using lcr::data::ShardDataset;
using lcr::data::ShardReader;
using lcr::data::write_shard;
namespace fs = std::filesystem;
using lcr::test::TempDir;

std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::vector<unsigned char>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), b.size());
}
uint64_t le(const std::vector<unsigned char>& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(b[at + i]) << (8 * i);
  return v;
}
void set_le(std::vector<unsigned char>& b, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}
// FNV-1a 64 written out here so the header checksum is checked independently.
uint64_t fnv(const unsigned char* p, size_t n) {
  uint64_t h = 14695981039346656037ull;  // offset basis 0xcbf29ce484222325
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
void reseal_header(std::vector<unsigned char>& b) { set_le(b, 56, fnv(b.data(), 56), 8); }
// New payload checksum (bytes 32..40), then the header checksum over it.
void reseal_payload(std::vector<unsigned char>& b) {
  set_le(b, 32, fnv(b.data() + 64, b.size() - 64), 8);
  reseal_header(b);
}

std::vector<int32_t> pattern(int64_t n, int32_t vocab) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 7919 + 13) % vocab);
  if (n > 0) t[n - 1] = vocab - 1;  // the largest id survives the width
  return t;
}

// Expects an lcr::Error whose message contains every fragment.
template <class F>
void expect_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const lcr::Error& e) {
    for (const std::string& s : fragments)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos)
          << "message '" << e.what() << "' lacks '" << s << "'";
  }
}

TEST(Shard, RoundTripOddSizesBothWidths) {
  TempDir tmp;
  for (int32_t vocab : {1, 256, 65536, 65537, 100000}) {
    for (int64_t n : {0, 1, 7, 129, 1000}) {
      const std::string p = tmp.path("s.bin");
      const std::vector<int32_t> tokens = pattern(n, vocab);
      write_shard(p, tokens, vocab);
      ShardReader r(p);
      EXPECT_EQ(r.size(), n);
      EXPECT_EQ(r.vocab_size(), vocab);
      EXPECT_EQ(r.header().token_bytes, vocab <= 65536 ? 2u : 4u);
      std::vector<int32_t> back(n);
      r.read(0, n, back.data());
      EXPECT_EQ(back, tokens) << "vocab " << vocab << " n " << n;
      if (n >= 7) {  // a read from the middle
        std::vector<int32_t> mid(3);
        r.read(4, 3, mid.data());
        EXPECT_EQ(mid, std::vector<int32_t>(tokens.begin() + 4, tokens.begin() + 7));
      }
      EXPECT_NO_THROW(r.verify());
    }
  }
}

TEST(Shard, ByteLayoutMatchesTheDocumentedFormat) {
  TempDir tmp;
  const std::string p = tmp.path("layout.bin");
  write_shard(p, std::vector<int32_t>{1, 258, 65535}, 65536);
  const std::vector<unsigned char> b = read_bytes(p);
  ASSERT_EQ(b.size(), 64u + 3 * 2);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "LCRTOKEN");
  EXPECT_EQ(le(b, 8, 4), 1u);       // version
  EXPECT_EQ(le(b, 12, 4), 64u);     // header size
  EXPECT_EQ(le(b, 16, 4), 2u);      // token width
  EXPECT_EQ(le(b, 20, 4), 65536u);  // vocab
  EXPECT_EQ(le(b, 24, 8), 3u);      // count
  EXPECT_EQ(le(b, 32, 8), fnv(b.data() + 64, 6));
  for (int i = 40; i < 56; ++i) EXPECT_EQ(b[i], 0) << "reserved byte " << i;
  EXPECT_EQ(le(b, 56, 8), fnv(b.data(), 56));
  EXPECT_EQ(le(b, 64, 2), 1u);
  EXPECT_EQ(le(b, 66, 2), 258u);
  EXPECT_EQ(le(b, 68, 2), 65535u);
  EXPECT_TRUE(lcr::data::is_token_shard(p));
}

TEST(Shard, SeveralShardsReadAsOneStream) {
  TempDir tmp;
  std::vector<int32_t> all = pattern(1000, 50000);
  const std::vector<int64_t> cuts = {0, 129, 129, 136, 1000};  // includes an empty shard
  std::vector<std::string> paths;
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    paths.push_back(tmp.path("part-" + std::to_string(s) + ".bin"));
    write_shard(paths.back(),
                std::vector<int32_t>(all.begin() + cuts[s], all.begin() + cuts[s + 1]), 50000);
  }
  ShardDataset ds(paths);
  ASSERT_EQ(ds.size(), 1000);
  EXPECT_EQ(ds.vocab_size(), 50000);
  for (int64_t begin : {0, 1, 120, 128, 129, 130, 135, 500}) {
    for (int64_t count : {1, 7, 129}) {
      if (begin + count > 1000) continue;
      std::vector<int32_t> got(count);
      ds.read(begin, count, got.data());
      EXPECT_EQ(got, std::vector<int32_t>(all.begin() + begin, all.begin() + begin + count))
          << "begin " << begin << " count " << count;
    }
  }
  expect_error(
      [&] {
        std::vector<int32_t> x(2);
        ds.read(999, 2, x.data());
      },
      {"outside"});
}

TEST(Shard, BadMagic) {
  TempDir tmp;
  const std::string p = tmp.path("data.bin");
  write_bytes(p, std::vector<unsigned char>(100, 'x'));
  expect_error([&] { ShardReader r(p); },
               {"data.bin: bad magic 0x7878787878787878", "not an lcr token shard"});
  EXPECT_FALSE(lcr::data::is_token_shard(p));
}

TEST(Shard, TruncatedHeaderPayloadAndTrailingBytes) {
  TempDir tmp;
  const std::string p = tmp.path("t.bin");
  write_shard(p, pattern(129, 1000), 1000);
  const std::vector<unsigned char> good = read_bytes(p);

  write_bytes(p, std::vector<unsigned char>(good.begin(), good.begin() + 40));
  expect_error([&] { ShardReader r(p); }, {"t.bin", "40 bytes", "truncated"});

  write_bytes(p, std::vector<unsigned char>(good.begin(), good.end() - 1));
  expect_error([&] { ShardReader r(p); }, {"t.bin", "truncated", "129 tokens"});

  std::vector<unsigned char> longer = good;
  longer.push_back(0);
  write_bytes(p, longer);
  expect_error([&] { ShardReader r(p); }, {"t.bin", "1 unexpected bytes"});
}

TEST(Shard, VersionChecksumWidthAndVocabErrors) {
  TempDir tmp;
  const std::string p = tmp.path("h.bin");
  write_shard(p, pattern(7, 1000), 1000);
  const std::vector<unsigned char> good = read_bytes(p);

  std::vector<unsigned char> b = good;
  set_le(b, 8, 2, 4);
  reseal_header(b);
  write_bytes(p, b);
  expect_error([&] { ShardReader r(p); }, {"version 2 is not supported"});

  b = good;
  set_le(b, 20, 999, 4);  // vocab changed without resealing: the checksum catches it
  write_bytes(p, b);
  expect_error([&] { ShardReader r(p); }, {"h.bin", "header checksum", "corrupt header"});

  b = good;
  set_le(b, 16, 3, 4);
  reseal_header(b);
  write_bytes(p, b);
  expect_error([&] { ShardReader r(p); }, {"token width 3"});

  b = good;
  set_le(b, 20, 0, 4);
  reseal_header(b);
  write_bytes(p, b);
  expect_error([&] { ShardReader r(p); }, {"vocabulary size 0"});

  write_bytes(p, good);
  expect_error([&] { ShardReader r(p, 50257); },
               {"h.bin", "vocabulary size 1000", "expected 50257"});
  EXPECT_NO_THROW(ShardReader(p, 1000));
}

// Issue 39 item 9: a changed in-vocabulary payload byte is refused on open (it trained
// silently), and an out-of-range token read names the shard and its offset.
TEST(Shard, CorruptPayloadIsRefusedOnOpenAndBadTokensNameTheirOffset) {
  TempDir tmp;
  const std::string p = tmp.path("h.bin");
  write_shard(p, pattern(100, 1000), 1000);
  std::vector<unsigned char> b = read_bytes(p);
  b[64 + 2 * 7] ^= 0x01;  // token 7 changes but stays < 1000
  write_bytes(p, b);
  expect_error([&] { ShardReader r(p); }, {"h.bin", "payload checksum", "corrupt data"});
  expect_error([&] { ShardDataset ds({p}); }, {"h.bin", "payload checksum"});

  // A token >= V with a matching checksum (a buggy writer): read() names shard and offset.
  b[64 + 2 * 7] = 0xE8, b[64 + 2 * 7 + 1] = 0x03;  // 1000
  reseal_payload(b);
  write_bytes(p, b);
  ShardReader r(p);
  std::vector<int32_t> out(20);
  expect_error([&] { r.read(0, 20, out.data()); },
               {"h.bin", "token 1000 at index 7 (byte offset 78)", "outside the vocabulary"});
}

TEST(Shard, MixedVocabulariesAndBadTokensAreRejected) {
  TempDir tmp;
  write_shard(tmp.path("a.bin"), pattern(10, 300), 300);
  write_shard(tmp.path("b.bin"), pattern(10, 400), 400);
  expect_error(
      [&] {
        ShardDataset ds({tmp.path("a.bin"), tmp.path("b.bin")});
      },
      {"b.bin", "vocabulary size 400", "share one vocabulary"});

  expect_error(
      [&] {
        write_shard(tmp.path("c.bin"), std::vector<int32_t>{1, 2, 300}, 300);
      },
      {"token 300 at index 2", "outside the vocabulary"});
  EXPECT_FALSE(fs::exists(tmp.path("c.bin")));
  for (const auto& e : fs::directory_iterator(tmp.dir))  // no temporary left behind
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();

  expect_error([&] { ShardReader r(tmp.path("missing.bin")); }, {"missing.bin", "cannot open"});
}

}  // namespace
