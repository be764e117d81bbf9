#pragma once
// A long-context evaluation set in the text form (docs/data.md, "Text form"): the cells
// (task, length, depth) that experiments/data/prepare_longctx.py writes, token arrays and
// answer spans made with the tokenizer of a model's shards. open() checks the whole file
// against the model before anything is computed; every refusal is an Error naming the file,
// the problem and the fix. A cell's labels are not stored: labels[t] = tokens[t + 1] on its
// answer spans, -1 elsewhere (core/data/tasks/longctx.hpp's AnswerSpan).
//
//   LongSet set = LongSet::open("set.h5", model_vocab);  // Error when it cannot be used
//   for (size_t k = 0; k < set.cells().size(); ++k) {
//     tasks::LongCell c = set.read(k);                     // batch [samples, length]
//     ...score_long(c, argmax)...
//   }
//
// Cells are read one at a time, so a long set is never held in memory at once.
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/tasks/longctx.hpp"

namespace lcr::data {

// One cell as the file describes it.
struct LongSetCell {
  std::string task;
  tasks::LongCategory category = tasks::LongCategory::SingleNeedle;
  int64_t length = 0;
  double depth = 0.0;   // NaN for cwe and fwe (no needle)
  int64_t samples = 0;  // rows of tokens
  int64_t answers = 0;  // spans per row
};

class LongSet {
 public:
  static constexpr const char* kFormat = "lcr-longctx-set";
  static constexpr int64_t kVersion = 1;

  // Opens `path` and checks every cell for a model of `vocab` tokens: the format and
  // version, the tokenizer's vocabulary (= vocab), every token id in [0, vocab), the arrays'
  // shapes against the cell's length and samples, every span inside [0, length - 1) (its
  // labels are next tokens), non-empty and after the previous one.
  static LongSet open(const std::string& path, int64_t vocab);

  const std::string& path() const { return path_; }
  int64_t vocab_size() const { return vocab_; }
  const std::string& tokenizer_sha256() const { return sha_; }
  const std::string& source() const { return source_; }  // the held-out text, in words
  const std::vector<LongSetCell>& cells() const { return cells_; }
  std::vector<int64_t> lengths() const;  // the cells' lengths, distinct, increasing

  // Cell k's samples and spans, checked again as they are read (the file may have changed).
  tasks::LongCell read(size_t k) const;

 private:
  std::string path_, sha_, source_;
  int64_t vocab_ = 0;
  std::vector<LongSetCell> cells_;
};

}  // namespace lcr::data
