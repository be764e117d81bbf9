#include "core/data/dataset.hpp"

#include <algorithm>
#include <filesystem>

#include "core/data/shard.hpp"
#include "kernels/base/error.hpp"

namespace lcr::data {
namespace fs = std::filesystem;

std::vector<std::string> expand_data_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    require(!ec && fs::exists(st), "data path ", p, " does not exist");
    if (fs::is_directory(st)) {
      std::vector<std::string> inside;
      for (const fs::directory_entry& e : fs::directory_iterator(p)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && !name.empty() && name[0] != '.')
          inside.push_back(e.path().string());
      }
      std::sort(inside.begin(), inside.end());
      require(!inside.empty(), "data directory ", p, " has no files");
      files.insert(files.end(), inside.begin(), inside.end());
    } else {
      require(fs::is_regular_file(st), "data path ", p, " is not a regular file or directory");
      files.push_back(p);
    }
  }
  return files;
}

SourcePtr open_token_source(const std::vector<std::string>& paths, const TextOptions& text,
                            int32_t expected_vocab) {
  SourcePtr source;
  if (paths.empty()) {
    source = load_default_corpus(text);
  } else {
    const std::vector<std::string> files = expand_data_paths(paths);
    std::vector<std::string> shards, texts;
    for (const std::string& f : files) (is_token_shard(f) ? shards : texts).push_back(f);
    if (!shards.empty() && !texts.empty())
      throw_error("data: ", shards.front(), " is a token shard but ", texts.front(),
                  " is not; pass either text files or token shards, not both");
    if (!shards.empty())
      source = std::make_shared<ShardDataset>(shards, expected_vocab);
    else
      source = load_byte_text(texts, text);
  }
  require(expected_vocab == 0 || source->vocab_size() == expected_vocab, source->describe(),
          ": vocabulary size ", source->vocab_size(), " does not match the model's ",
          expected_vocab);
  return source;
}

}  // namespace lcr::data
