#pragma once
// Byte-level text: the zero-setup default. Every byte of a file is one token, so the
// vocabulary is the 256 byte values; with `end_of_document` one special token (id 256)
// is appended after each file and the vocabulary is 257.
//
// The built-in corpus is the license texts Debian's base-files package installs under
// /usr/share/common-licenses (about 290 KB of English), concatenated in the fixed order
// of default_corpus_files(), so every Debian machine has the same data without downloads.
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/token_source.hpp"

namespace lcr::data {

constexpr int32_t kByteVocab = 256;
constexpr int32_t kEndOfDocument = 256;  // only when TextOptions::end_of_document

struct TextOptions {
  bool end_of_document = false;  // append token 256 after each file (vocabulary 257)
};

constexpr const char* kDefaultCorpusDir = "/usr/share/common-licenses";

// The built-in corpus's files, in the order they are concatenated. `dir` exists for
// tests; the corpus is defined by kDefaultCorpusDir.
std::vector<std::string> default_corpus_files(const std::string& dir = kDefaultCorpusDir);

// Reads the files in order as byte tokens. Throws naming the file when one cannot be read.
// describe() reports the file count, byte count and an FNV-1a checksum of the bytes, so a
// run file records exactly which text it trained on.
std::shared_ptr<TokenBuffer> load_byte_text(const std::vector<std::string>& paths,
                                            const TextOptions& options = {});

// The built-in corpus. A missing file is an error naming the path looked for and how to
// pass other data instead.
std::shared_ptr<TokenBuffer> load_default_corpus(const TextOptions& options = {},
                                                 const std::string& dir = kDefaultCorpusDir);

// Decodes byte tokens back to text (the special token prints as "\n<eod>\n"); for logs and
// for looking at samples.
std::string bytes_to_text(const int32_t* tokens, int64_t n);

}  // namespace lcr::data
