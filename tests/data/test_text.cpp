// Byte-level text, the built-in corpus, the train/validation split and open_token_source.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/data/dataset.hpp"
#include "core/data/shard.hpp"
#include "core/data/text.hpp"
#include "kernels/base/error.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using lcr::test::TempDir;
using namespace lcr::data;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<int32_t> all_tokens(const TokenSource& s) {
  std::vector<int32_t> out(s.size());
  s.read(0, s.size(), out.data());
  return out;
}

TEST(Text, DefaultCorpusIsTheLicenseTextsInOrder) {
  const std::vector<std::string> files = default_corpus_files();
  ASSERT_GE(files.size(), 10u);
  std::string expected;
  for (const std::string& f : files) {
    ASSERT_TRUE(fs::is_regular_file(f)) << f;
    expected += slurp(f);
  }
  const auto corpus = load_default_corpus();
  EXPECT_EQ(corpus->vocab_size(), 256);
  ASSERT_EQ(corpus->size(), static_cast<int64_t>(expected.size()));
  const std::vector<int32_t>& t = corpus->tokens();
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(t[i], static_cast<unsigned char>(expected[i])) << "byte " << i;
  EXPECT_EQ(bytes_to_text(t.data(), 40), expected.substr(0, 40));
  EXPECT_NE(corpus->describe().find("fnv1a 0x"), std::string::npos);
  EXPECT_EQ(load_default_corpus()->describe(), corpus->describe());  // deterministic
}

TEST(Text, MissingCorpusNamesThePathAndTheFix) {
  TempDir tmp;  // an empty folder standing in for /usr/share/common-licenses
  try {
    load_default_corpus({}, tmp.dir.string());
    ADD_FAILURE();
  } catch (const lcr::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find((tmp.dir / "GPL-3").string() + " not found"), std::string::npos) << m;
    EXPECT_NE(m.find("base-files"), std::string::npos) << m;
    EXPECT_NE(m.find("--data <path>"), std::string::npos) << m;
  }
}

TEST(Text, EndOfDocumentTokenAfterEachFile) {
  TempDir tmp;
  const std::string a = tmp.write("a.txt", "ab"), b = tmp.write("b.txt", "c\xff");
  TextOptions opt;
  opt.end_of_document = true;
  const auto text = load_byte_text({a, b}, opt);
  EXPECT_EQ(text->vocab_size(), 257);
  EXPECT_EQ(text->tokens(), (std::vector<int32_t>{'a', 'b', 256, 'c', 255, 256}));
  EXPECT_EQ(load_byte_text({a, b})->tokens(), (std::vector<int32_t>{'a', 'b', 'c', 255}));
}

TEST(Text, SplitTailIsDeterministicAndComplete) {
  TempDir tmp;
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>('a' + i % 26);
  SourcePtr src = load_byte_text({tmp.write("t.txt", text)});
  const TrainValidation tv = split_tail(src, 0.1);
  EXPECT_EQ(tv.train->size(), 900);
  EXPECT_EQ(tv.validation->size(), 100);
  std::vector<int32_t> joined = all_tokens(*tv.train), val = all_tokens(*tv.validation);
  joined.insert(joined.end(), val.begin(), val.end());
  EXPECT_EQ(joined, all_tokens(*src));
  EXPECT_EQ(tv.validation->vocab_size(), 256);

  // Tiny sources still give one token each side; bad fractions are errors.
  SourcePtr two = load_byte_text({tmp.write("two.txt", "xy")});
  EXPECT_EQ(split_tail(two, 0.1).validation->size(), 1);
  EXPECT_THROW(split_tail(src, 0.0), lcr::Error);
  EXPECT_THROW(split_tail(src, 1.0), lcr::Error);
}

TEST(Text, OpenTokenSourceFilesDirectoriesAndErrors) {
  TempDir tmp;
  const std::string a = tmp.write("a.txt", "hello "), b = tmp.write("b.txt", "world");
  EXPECT_EQ(open_token_source({a, b})->size(), 11);
  EXPECT_EQ(open_token_source({tmp.dir.string()})->size(), 11);  // directory: sorted files
  EXPECT_EQ(open_token_source({})->size(), load_default_corpus()->size());

  try {
    open_token_source({(tmp.dir / "nope.txt").string()});
    ADD_FAILURE();
  } catch (const lcr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.txt does not exist"), std::string::npos);
  }
  EXPECT_THROW(open_token_source({a}, {}, 50257), lcr::Error);  // vocabulary mismatch

  fs::create_directories(tmp.dir / "shards");
  write_shard((tmp.dir / "shards" / "0.bin").string(), std::vector<int32_t>{1, 2, 3}, 10);
  write_shard((tmp.dir / "shards" / "1.bin").string(), std::vector<int32_t>{4, 5}, 10);
  SourcePtr shards = open_token_source({(tmp.dir / "shards").string()});
  EXPECT_EQ(all_tokens(*shards), (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(shards->vocab_size(), 10);
  try {
    open_token_source({(tmp.dir / "shards" / "0.bin").string(), a});
    ADD_FAILURE();
  } catch (const lcr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not both"), std::string::npos);
  }
}

}  // namespace
