#include "core/data/text.hpp"

#include <fstream>
#include <iterator>
#include <sstream>

#include "core/data/rng.hpp"
#include "kernels/base/error.hpp"

namespace lcr::data {

std::vector<std::string> default_corpus_files(const std::string& dir) {
  // Fixed order, largest prose first; the unversioned names (GPL, LGPL, GFDL) are
  // symlinks to files already listed and are left out so no text appears twice.
  static const char* names[] = {"GPL-3",   "GPL-2",    "GPL-1",    "LGPL-3",     "LGPL-2.1",
                                "LGPL-2",  "GFDL-1.3", "GFDL-1.2", "Apache-2.0", "MPL-2.0",
                                "MPL-1.1", "Artistic", "CC0-1.0",  "BSD"};
  std::vector<std::string> out;
  for (const char* n : names) out.push_back(dir + "/" + n);
  return out;
}

std::shared_ptr<TokenBuffer> load_byte_text(const std::vector<std::string>& paths,
                                            const TextOptions& options) {
  require(!paths.empty(), "byte text: no files given");
  std::vector<int32_t> tokens;
  uint64_t checksum = 0xCBF29CE484222325ull;
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    require(in.good(), path, ": cannot open for reading (byte-level text input)");
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    require(!in.bad(), path, ": read error");
    checksum = fnv1a64(bytes.data(), bytes.size(), checksum);
    tokens.reserve(tokens.size() + bytes.size() + 1);
    for (unsigned char c : bytes) tokens.push_back(c);
    if (options.end_of_document) tokens.push_back(kEndOfDocument);
  }
  require(!tokens.empty(), "byte text: the files are empty (", paths.front(), ", ...)");
  std::ostringstream desc;
  desc << "byte text: " << paths.size() << (paths.size() == 1 ? " file (" : " files (")
       << paths.front() << (paths.size() > 1 ? ", ...)" : ")") << ", " << tokens.size()
       << " tokens, fnv1a 0x" << std::hex << checksum;
  const int32_t vocab = options.end_of_document ? kByteVocab + 1 : kByteVocab;
  return std::make_shared<TokenBuffer>(std::move(tokens), vocab, desc.str());
}

std::shared_ptr<TokenBuffer> load_default_corpus(const TextOptions& options,
                                                 const std::string& dir) {
  const std::vector<std::string> files = default_corpus_files(dir);
  for (const std::string& f : files) {
    std::ifstream probe(f, std::ios::binary);
    require(probe.good(), "built-in corpus: ", f,
            " not found (the license texts come with Debian's base-files package). "
            "Pass your own data instead with --data <path> (a text file, a directory, or "
            "lcr token shards).");
  }
  return load_byte_text(files, options);
}

std::string bytes_to_text(const int32_t* tokens, int64_t n) {
  std::string s;
  s.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] == kEndOfDocument)
      s += "\n<eod>\n";
    else
      s += static_cast<char>(tokens[i] & 0xFF);
  }
  return s;
}

}  // namespace lcr::data
