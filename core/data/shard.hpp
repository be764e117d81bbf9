#pragma once
// Token shards: the binary format for tokenised corpora (docs/data.md is the reference).
//
//   offset size  field
//   0      8     magic, the ASCII bytes "LCRTOKEN" (0x4E454B4F5452434C as a LE uint64)
//   8      4     format version (1)
//   12     4     header size in bytes (64)
//   16     4     token width in bytes: 2 (uint16) or 4 (uint32)
//   20     4     vocabulary size V (every token < V)
//   24     8     token count N
//   32     8     FNV-1a 64 of the N * width payload bytes
//   40     16    reserved, zero
//   56     8     FNV-1a 64 of header bytes [0, 56)
//   64     ...   N tokens, little-endian, of the given width; nothing after them
//
// All integers little-endian. The writer picks width 2 when V <= 65536, else 4.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/token_source.hpp"

namespace lcr::data {

constexpr uint64_t kShardMagic = 0x4E454B4F5452434Cull;  // "LCRTOKEN"
constexpr uint32_t kShardVersion = 1;
constexpr uint32_t kShardHeaderBytes = 64;

struct ShardHeader {
  uint32_t version = kShardVersion;
  uint32_t header_bytes = kShardHeaderBytes;
  uint32_t token_bytes = 2;
  uint32_t vocab_size = 0;
  uint64_t token_count = 0;
  uint64_t payload_checksum = 0;
};

// Writes tokens as one shard. The file appears complete or not at all (written to a
// temporary name in the same folder, then renamed). Throws for a token outside
// [0, vocab_size) naming its index, or when the file cannot be written.
ShardHeader write_shard(const std::string& path, const int32_t* tokens, int64_t count,
                        int32_t vocab_size);
ShardHeader write_shard(const std::string& path, const std::vector<int32_t>& tokens,
                        int32_t vocab_size);

// True when the file starts with the shard magic (how a data path is recognised).
bool is_token_shard(const std::string& path);

// One shard, memory-mapped read-only. The constructor validates the header and the file
// size and throws an lcr::Error naming the file and the problem: bad magic, unsupported
// version, corrupt header (checksum), bad token width, token count that does not match
// the file size (truncated or trailing bytes), a vocabulary other than `expected_vocab`
// (0 accepts any), or a corrupt payload (its checksum, one pass over the file).
class ShardReader {
 public:
  explicit ShardReader(const std::string& path, int32_t expected_vocab = 0);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::string& path() const { return path_; }
  const ShardHeader& header() const { return header_; }
  int64_t size() const { return static_cast<int64_t>(header_.token_count); }
  int32_t vocab_size() const { return static_cast<int32_t>(header_.vocab_size); }

  // Tokens [begin, begin + count) decoded to int32.
  void read(int64_t begin, int64_t count, int32_t* out) const;

  // Reads the whole payload: checks its checksum and that every token is < vocab. The
  // constructor checks the checksum already; read() checks the tokens it returns.
  void verify() const;

 private:
  std::string path_;
  ShardHeader header_;
  const unsigned char* map_ = nullptr;  // whole file
  size_t map_bytes_ = 0;
  void check_payload() const;  // Error unless the payload matches its header checksum
};

// Several shards read as one stream, in the order given. All must share one vocabulary.
class ShardDataset : public TokenSource {
 public:
  explicit ShardDataset(const std::vector<std::string>& paths, int32_t expected_vocab = 0);
  int64_t size() const override { return offsets_.back(); }
  int32_t vocab_size() const override { return vocab_; }
  void read(int64_t begin, int64_t count, int32_t* out) const override;
  std::string describe() const override;
  const std::vector<std::unique_ptr<ShardReader>>& shards() const { return shards_; }

 private:
  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<int64_t> offsets_;  // offsets_[s] = first global token of shard s; back() = size
  int32_t vocab_ = 0;
};

}  // namespace lcr::data
