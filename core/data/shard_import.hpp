#pragma once
// Token shards (shard.hpp, docs/data.md) from the raw token arrays a tokenizer elsewhere
// wrote: values of one integer type back to back, little-endian, no header, e.g. numpy's
// `np.asarray(ids, np.uint16).tofile("train.bin")` (what nanoGPT-style prepare scripts
// write). The inputs are read in order as one stream and cut into shards of at most
// `tokens_per_shard` tokens, `out_dir/<prefix>_00000.bin`, `_00001.bin`, ...; each shard
// appears complete or not at all (write_shard). Behind `lcr shards` (core/cli/shards_cmd.cpp).
#include <cstdint>
#include <string>
#include <vector>

namespace lcr::data {

enum class RawTokenType { UInt16, UInt32, Int32 };

// "uint16", "uint32" or "int32"; an lcr::Error naming the choices otherwise.
RawTokenType parse_raw_token_type(const std::string& name);

struct ImportedShard {
  std::string path;
  int64_t tokens = 0;
};

// Writes the shards and returns them in order. lcr::Error, naming the file and what to do,
// for: no input, an input that cannot be read or whose size is not a whole number of
// tokens, a token outside [0, vocab) (its input file and index in that file), vocab outside
// [1, 2^31 - 1], tokens_per_shard < 1, or a shard file that exists already (nothing is
// overwritten; the check runs before anything is written). A token found bad after some
// shards were written removes them (and the output folder, if this call made it) again
// before the error is thrown. An input of zero
// tokens adds nothing; inputs without any token at all write no shard.
std::vector<ImportedShard> import_raw_tokens(const std::vector<std::string>& inputs,
                                             RawTokenType type, int64_t vocab,
                                             const std::string& out_dir, const std::string& prefix,
                                             int64_t tokens_per_shard);

}  // namespace lcr::data
