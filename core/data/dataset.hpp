#pragma once
// One entry point from a `--data` value to a token source:
//
//   no paths              the built-in byte-level corpus (text.hpp)
//   files / directories   a directory stands for its regular files sorted by name
//                         (hidden files skipped); files that start with the shard magic
//                         are token shards, all others byte text; mixing the two is an
//                         error
//
//   SourcePtr all = open_token_source(paths);
//   TrainValidation tv = split_tail(all, 0.1);   // last 10% is validation
#include <string>
#include <vector>

#include "core/data/text.hpp"
#include "core/data/token_source.hpp"

namespace lcr::data {

// `expected_vocab` (0 = any) is checked against the data's vocabulary, so a model whose
// embedding table is too small fails before training starts.
SourcePtr open_token_source(const std::vector<std::string>& paths, const TextOptions& text = {},
                            int32_t expected_vocab = 0);

// The files a list of paths stands for (directories expanded, order kept).
std::vector<std::string> expand_data_paths(const std::vector<std::string>& paths);

}  // namespace lcr::data
