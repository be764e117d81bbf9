#include "core/data/shard.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/data/rng.hpp"
#include "kernels/base/error.hpp"

namespace lcr::data {
namespace {

// Explicit little-endian encoding, so the format is the same on any host.
void put_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

void encode_header(const ShardHeader& h, unsigned char* out) {
  std::memset(out, 0, kShardHeaderBytes);
  put_le(out + 0, kShardMagic, 8);
  put_le(out + 8, h.version, 4);
  put_le(out + 12, h.header_bytes, 4);
  put_le(out + 16, h.token_bytes, 4);
  put_le(out + 20, h.vocab_size, 4);
  put_le(out + 24, h.token_count, 8);
  put_le(out + 32, h.payload_checksum, 8);
  put_le(out + 56, fnv1a64(out, 56), 8);
}

// Validates and decodes a header; `file_bytes` is the file's size. Every check names the
// file, so a user with many shards knows which one is broken.
ShardHeader decode_header(const std::string& path, const unsigned char* p, size_t have,
                          uint64_t file_bytes) {
  if (have >= 8) {
    const uint64_t magic = get_le(p, 8);
    require(magic == kShardMagic, path, ": bad magic ", hex(magic),
            ", not an lcr token shard (expected ", hex(kShardMagic), ", the bytes \"LCRTOKEN\")");
  }
  require(have >= kShardHeaderBytes, path, ": ", file_bytes, " bytes, shorter than the ",
          kShardHeaderBytes, "-byte shard header (truncated file)");
  ShardHeader h;
  h.version = static_cast<uint32_t>(get_le(p + 8, 4));
  require(h.version == kShardVersion, path, ": shard format version ", h.version,
          " is not supported (this build reads version ", kShardVersion, ")");
  h.header_bytes = static_cast<uint32_t>(get_le(p + 12, 4));
  require(h.header_bytes == kShardHeaderBytes, path, ": header size ", h.header_bytes,
          " is wrong for format version 1 (expected ", kShardHeaderBytes, ")");
  const uint64_t stored = get_le(p + 56, 8), computed = fnv1a64(p, 56);
  require(stored == computed, path, ": header checksum ", hex(stored), " does not match ",
          hex(computed), " (corrupt header)");
  h.token_bytes = static_cast<uint32_t>(get_le(p + 16, 4));
  require(h.token_bytes == 2 || h.token_bytes == 4, path, ": token width ", h.token_bytes,
          " bytes is not supported (2 = uint16 or 4 = uint32)");
  h.vocab_size = static_cast<uint32_t>(get_le(p + 20, 4));
  require(h.vocab_size >= 1 && h.vocab_size <= 0x7FFFFFFFu, path, ": vocabulary size ",
          h.vocab_size, " is out of range [1, 2^31 - 1]");
  require(h.token_bytes == 4 || h.vocab_size <= 65536, path, ": vocabulary size ", h.vocab_size,
          " does not fit uint16 tokens");
  h.token_count = get_le(p + 24, 8);
  h.payload_checksum = get_le(p + 32, 8);
  require(h.token_count <= (UINT64_MAX - kShardHeaderBytes) / h.token_bytes, path, ": token count ",
          h.token_count, " is impossible (corrupt header)");
  const uint64_t expected = kShardHeaderBytes + h.token_count * h.token_bytes;
  require(file_bytes >= expected, path, ": truncated: the header says ", h.token_count, " tokens (",
          expected, " bytes in all) but the file has ", file_bytes, " bytes");
  require(file_bytes == expected, path, ": ", file_bytes - expected, " unexpected bytes after the ",
          h.token_count, " tokens the header announces");
  return h;
}

}  // namespace

ShardHeader write_shard(const std::string& path, const int32_t* tokens, int64_t count,
                        int32_t vocab_size) {
  require(vocab_size >= 1, path, ": vocabulary size must be positive, got ", vocab_size);
  require(count >= 0, path, ": negative token count ", count);
  ShardHeader h;
  h.vocab_size = static_cast<uint32_t>(vocab_size);
  h.token_bytes = vocab_size <= 65536 ? 2 : 4;
  h.token_count = static_cast<uint64_t>(count);

  // Encode the payload in blocks; the checksum runs over exactly the bytes written.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  require(out.good(), tmp, ": cannot open for writing (", std::strerror(errno), ")");
  unsigned char header[kShardHeaderBytes];
  encode_header(h, header);  // placeholder; rewritten once the checksum is known
  out.write(reinterpret_cast<const char*>(header), kShardHeaderBytes);
  uint64_t checksum = 0xCBF29CE484222325ull;
  std::vector<unsigned char> block;
  const int64_t kBlock = 1 << 16;
  for (int64_t b = 0; b < count; b += kBlock) {
    const int64_t n = std::min(kBlock, count - b);
    block.resize(static_cast<size_t>(n) * h.token_bytes);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t t = tokens[b + i];
      if (t < 0 || t >= vocab_size) {
        out.close();
        std::remove(tmp.c_str());
        throw_error(path, ": token ", t, " at index ", b + i, " is outside the vocabulary [0, ",
                    vocab_size, ")");
      }
      put_le(block.data() + i * h.token_bytes, static_cast<uint32_t>(t),
             static_cast<int>(h.token_bytes));
    }
    checksum = fnv1a64(block.data(), block.size(), checksum);
    out.write(reinterpret_cast<const char*>(block.data()), block.size());
  }
  h.payload_checksum = checksum;
  encode_header(h, header);
  out.seekp(0);
  out.write(reinterpret_cast<const char*>(header), kShardHeaderBytes);
  out.close();
  if (!out.good()) {
    std::remove(tmp.c_str());
    throw_error(tmp, ": write failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw_error(path, ": cannot rename ", tmp, " into place (", why, ")");
  }
  return h;
}

ShardHeader write_shard(const std::string& path, const std::vector<int32_t>& tokens,
                        int32_t vocab_size) {
  return write_shard(path, tokens.data(), static_cast<int64_t>(tokens.size()), vocab_size);
}

bool is_token_shard(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char m[8];
  if (!in.read(reinterpret_cast<char*>(m), 8)) return false;
  return get_le(m, 8) == kShardMagic;
}

ShardReader::ShardReader(const std::string& path, int32_t expected_vocab) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  require(fd >= 0, path, ": cannot open token shard (", std::strerror(errno), ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw_error(path, ": cannot stat (", std::strerror(errno), ")");
  }
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  unsigned char head[kShardHeaderBytes];
  const ssize_t got = ::pread(fd, head, kShardHeaderBytes, 0);
  try {
    require(got >= 0, path, ": read error (", std::strerror(errno), ")");
    header_ = decode_header(path, head, static_cast<size_t>(got), file_bytes);
    require(expected_vocab == 0 || header_.vocab_size == static_cast<uint32_t>(expected_vocab),
            path, ": vocabulary size ", header_.vocab_size, " does not match the expected ",
            expected_vocab, " (the shard was tokenised for another model)");
  } catch (...) {
    ::close(fd);
    throw;
  }
  map_bytes_ = static_cast<size_t>(file_bytes);
  void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file open
  require(m != MAP_FAILED, path, ": mmap failed (", std::strerror(err), ")");
  map_ = static_cast<const unsigned char*>(m);
  // The payload checksum on open (one pass at memory speed; a changed in-vocabulary
  // token trained silently before). The `token < V` bound is checked by read().
  try {
    check_payload();
  } catch (...) {
    ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
    map_ = nullptr;
    throw;
  }
}

void ShardReader::check_payload() const {
  const uint64_t checksum =
      fnv1a64(map_ + kShardHeaderBytes, header_.token_count * header_.token_bytes);
  require(checksum == header_.payload_checksum, path_, ": payload checksum ", hex(checksum),
          " does not match the header's ", hex(header_.payload_checksum),
          " (corrupt data: the tokens were changed after the shard was written)");
}

ShardReader::~ShardReader() {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

void ShardReader::read(int64_t begin, int64_t count, int32_t* out) const {
  check_range(begin, count, size(), path_);
  const int w = static_cast<int>(header_.token_bytes);
  const unsigned char* p = map_ + kShardHeaderBytes + static_cast<size_t>(begin) * w;
  uint32_t bad = 0;
  if (w == 2) {
    for (int64_t i = 0; i < count; ++i, p += 2) {
      const uint32_t t = p[0] | (p[1] << 8);
      bad |= t >= header_.vocab_size;
      out[i] = static_cast<int32_t>(t);
    }
  } else {
    for (int64_t i = 0; i < count; ++i, p += 4) {
      const uint64_t t = get_le(p, 4);
      bad |= t >= header_.vocab_size;
      out[i] = static_cast<int32_t>(t);
    }
  }
  if (bad)  // name the shard and the token's offset in it
    for (int64_t i = 0; i < count; ++i)
      require(uint32_t(out[i]) < header_.vocab_size, path_, ": token ", uint32_t(out[i]),
              " at index ", begin + i, " (byte offset ", kShardHeaderBytes + (begin + i) * w,
              ") is outside the vocabulary [0, ", header_.vocab_size, ")");
}

void ShardReader::verify() const {
  const int w = static_cast<int>(header_.token_bytes);
  const unsigned char* payload = map_ + kShardHeaderBytes;
  check_payload();
  for (uint64_t i = 0; i < header_.token_count; ++i) {
    const uint64_t t = get_le(payload + i * w, w);
    require(t < header_.vocab_size, path_, ": token ", t, " at index ", i,
            " is outside the vocabulary [0, ", header_.vocab_size, ")");
  }
}

ShardDataset::ShardDataset(const std::vector<std::string>& paths, int32_t expected_vocab) {
  require(!paths.empty(), "token shards: no files given");
  offsets_.push_back(0);
  for (const std::string& p : paths) {
    shards_.push_back(std::make_unique<ShardReader>(p, expected_vocab));
    const ShardReader& s = *shards_.back();
    if (shards_.size() == 1) vocab_ = s.vocab_size();
    require(s.vocab_size() == vocab_, p, ": vocabulary size ", s.vocab_size(), " differs from ",
            paths.front(), "'s ", vocab_, "; the shards of one dataset share one vocabulary");
    offsets_.push_back(offsets_.back() + s.size());
  }
  require(size() > 0, "token shards: all ", paths.size(), " shards are empty (", paths.front(),
          ", ...)");
}

void ShardDataset::read(int64_t begin, int64_t count, int32_t* out) const {
  check_range(begin, count, size(), describe());
  // First shard whose range contains `begin`, then walk forward across boundaries.
  size_t s = std::upper_bound(offsets_.begin(), offsets_.end(), begin) - offsets_.begin() - 1;
  while (count > 0) {
    const int64_t local = begin - offsets_[s];
    const int64_t n = std::min(count, shards_[s]->size() - local);
    shards_[s]->read(local, n, out);
    begin += n;
    out += n;
    count -= n;
    ++s;
  }
}

std::string ShardDataset::describe() const {
  std::ostringstream os;
  os << "token shards: " << shards_.size() << (shards_.size() == 1 ? " file (" : " files (")
     << shards_.front()->path() << (shards_.size() > 1 ? ", ...)" : ")") << ", " << size()
     << " tokens, vocab " << vocab_;
  return os.str();
}

}  // namespace lcr::data
