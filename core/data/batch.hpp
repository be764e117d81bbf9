#pragma once
// The one batch format the trainer consumes, from text, token shards and synthetic tasks
// alike.
//
//   tokens [batch, seq_len]  model inputs, row-major, each in [0, vocab_size)
//   labels [batch, seq_len]  labels[b][t] is the target of the model's output at position
//                            t (which has seen tokens[b][0..t]); -1 = not scored
//
// For language modelling labels[b][t] = tokens[b][t+1] (next token); a task may score only
// its answer positions, or score something that is not the next token (the A5 running
// product).
#include <cstdint>
#include <vector>

namespace lcr::data {

constexpr int32_t kIgnoreLabel = -1;

// Which stream of samples: validation samples are drawn from a different key than
// training samples, so no evaluation sequence is ever a training sequence.
enum class Split : uint64_t { train = 0, validation = 1 };

struct Batch {
  int64_t batch = 0;
  int64_t seq_len = 0;
  int32_t vocab_size = 0;
  std::vector<int32_t> tokens;  // [batch, seq_len]
  std::vector<int32_t> labels;  // [batch, seq_len], kIgnoreLabel where not scored

  Batch() = default;
  Batch(int64_t b, int64_t l, int32_t vocab)
      : batch(b), seq_len(l), vocab_size(vocab), tokens(b * l, 0), labels(b * l, kIgnoreLabel) {}

  int32_t* tokens_row(int64_t b) { return tokens.data() + b * seq_len; }
  int32_t* labels_row(int64_t b) { return labels.data() + b * seq_len; }
  const int32_t* tokens_row(int64_t b) const { return tokens.data() + b * seq_len; }
  const int32_t* labels_row(int64_t b) const { return labels.data() + b * seq_len; }

  // Number of scored positions (labels != -1): the loss's denominator.
  int64_t scored() const {
    int64_t n = 0;
    for (int32_t l : labels) n += (l != kIgnoreLabel);
    return n;
  }
};

}  // namespace lcr::data
