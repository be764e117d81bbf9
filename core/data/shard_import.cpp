#include "core/data/shard_import.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/data/shard.hpp"
#include "kernels/base/error.hpp"

namespace lcr::data {
namespace {

namespace fs = std::filesystem;

// Each type's name (as numpy spells its dtype) and width in bytes.
struct TypeInfo {
  RawTokenType type;
  const char* name;
  int width;
};
constexpr TypeInfo kTypes[] = {
    {RawTokenType::UInt16, "uint16", 2},
    {RawTokenType::UInt32, "uint32", 4},
    {RawTokenType::Int32, "int32", 4},
};
const TypeInfo& info(RawTokenType t) {
  for (const TypeInfo& i : kTypes)
    if (i.type == t) return i;
  throw_error("raw token type ", int(t), " is not one lcr knows");
}

std::string shard_path(const std::string& dir, const std::string& prefix, int64_t i) {
  char num[32];
  std::snprintf(num, sizeof num, "_%05lld.bin", static_cast<long long>(i));
  return (fs::path(dir) / (prefix + num)).string();
}

// Little-endian value of `width` bytes at p, as a signed 64-bit number (int32: sign kept).
int64_t decode(const unsigned char* p, RawTokenType t) {
  if (t == RawTokenType::UInt16) return int64_t(p[0]) | int64_t(p[1]) << 8;
  const uint32_t u =
      uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  return t == RawTokenType::Int32 ? int64_t(int32_t(u)) : int64_t(u);
}

}  // namespace

RawTokenType parse_raw_token_type(const std::string& name) {
  for (const TypeInfo& i : kTypes)
    if (name == i.name) return i.type;
  throw_error("raw token type '", name, "' is not one of uint16, uint32, int32 (the numpy dtype ",
              "the tokenizer's output was written with)");
}

std::vector<ImportedShard> import_raw_tokens(const std::vector<std::string>& inputs,
                                             RawTokenType type, int64_t vocab,
                                             const std::string& out_dir, const std::string& prefix,
                                             int64_t tokens_per_shard) {
  require(!inputs.empty(), "shards: no input file; pass the tokenizer's raw token arrays");
  require(vocab >= 1 && vocab <= INT32_MAX, "shards: vocabulary size ", vocab,
          " must be in [1, 2^31 - 1] (the tokenizer's vocabulary, e.g. 50257 for GPT-2)");
  require(tokens_per_shard >= 1, "shards: tokens per shard must be >= 1, got ", tokens_per_shard);
  require(!prefix.empty() && prefix.find('/') == std::string::npos,
          "shards: the shard name prefix '", prefix, "' must be a plain, non-empty file name");
  const int w = info(type).width;

  // Sizes first: a bad input fails before any shard is written.
  int64_t total = 0;
  std::vector<int64_t> counts;  // tokens per input
  for (const std::string& in : inputs) {
    std::error_code ec;
    const auto bytes = fs::file_size(in, ec);
    require(!ec, "shards: cannot read the size of ", in, ": ", ec.message());
    require(bytes % uintmax_t(w) == 0, "shards: ", in, " has ", bytes,
            " bytes, not a whole number of ", info(type).name, " tokens (", w,
            " bytes each); check --dtype");
    counts.push_back(int64_t(bytes / uintmax_t(w)));
    total += counts.back();
  }
  const int64_t n_shards = (total + tokens_per_shard - 1) / tokens_per_shard;
  for (int64_t i = 0; i < n_shards; ++i) {
    const std::string p = shard_path(out_dir, prefix, i);
    require(!fs::exists(p), "shards: ", p,
            " exists already; choose another output folder or --prefix (nothing is overwritten)");
  }
  const bool made_dir = n_shards > 0 && !fs::exists(out_dir);
  if (n_shards > 0) fs::create_directories(out_dir);

  std::vector<ImportedShard> out;
  std::vector<int32_t> shard;
  shard.reserve(size_t(std::min(tokens_per_shard, total)));
  auto flush = [&] {
    const std::string p = shard_path(out_dir, prefix, int64_t(out.size()));
    write_shard(p, shard, int32_t(vocab));
    out.push_back({p, int64_t(shard.size())});
    shard.clear();
  };
  constexpr int64_t kChunk = int64_t(1) << 20;  // tokens read at a time
  std::vector<unsigned char> bytes(size_t(kChunk) * size_t(w));
  try {
    for (size_t j = 0; j < inputs.size(); ++j) {
      const std::string& in = inputs[j];
      std::ifstream f(in, std::ios::binary);
      require(bool(f), "shards: cannot open ", in);
      const int64_t n = counts[j];
      for (int64_t at = 0; at < n;) {
        const int64_t k = std::min(kChunk, n - at);
        f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(k * w));
        require(f.gcount() == std::streamsize(k * w), "shards: ", in, " ended early at token ", at,
                " (was it changed while being read?)");
        for (int64_t i = 0; i < k; ++i) {
          const int64_t t = decode(bytes.data() + size_t(i * w), type);
          require(t >= 0 && t < vocab, "shards: ", in, ": token ", t, " at index ", at + i,
                  " is outside [0, ", vocab, "); check --vocab and --dtype");
          shard.push_back(int32_t(t));
          if (int64_t(shard.size()) == tokens_per_shard) flush();
        }
        at += k;
      }
    }
    if (!shard.empty()) flush();
  } catch (...) {
    // A bad token late in the stream: remove this call's shards, so a rerun starts clean.
    for (const ImportedShard& sh : out) fs::remove(sh.path);
    std::error_code ec;
    if (made_dir && fs::is_empty(out_dir, ec)) fs::remove(out_dir, ec);
    throw;
  }
  return out;
}

}  // namespace lcr::data
