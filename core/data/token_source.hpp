#pragma once
// A token source is one long stream of token ids (a corpus as the sampler sees it):
// byte text, one or many token shards, or a slice of another source (the train or
// validation part). Documents are concatenated; windows may span a document or shard
// boundary, as is usual for packed pre-training data.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lcr::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t size() const = 0;        // number of tokens
  virtual int32_t vocab_size() const = 0;  // every token is in [0, vocab_size)
  // Copies tokens [begin, begin + count) to out[0 .. count). Throws if out of range.
  virtual void read(int64_t begin, int64_t count, int32_t* out) const = 0;
  // One line for logs and the run file's provenance ("byte text: 12 files, ...").
  virtual std::string describe() const = 0;
};

using SourcePtr = std::shared_ptr<const TokenSource>;

// Tokens held in memory (byte text, tests).
class TokenBuffer : public TokenSource {
 public:
  TokenBuffer(std::vector<int32_t> tokens, int32_t vocab_size, std::string description);
  int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
  int32_t vocab_size() const override { return vocab_; }
  void read(int64_t begin, int64_t count, int32_t* out) const override;
  std::string describe() const override { return description_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  std::vector<int32_t> tokens_;
  int32_t vocab_;
  std::string description_;
};

// Tokens [begin, begin + count) of another source, renumbered from 0.
class TokenSlice : public TokenSource {
 public:
  TokenSlice(SourcePtr parent, int64_t begin, int64_t count, std::string label);
  int64_t size() const override { return count_; }
  int32_t vocab_size() const override { return parent_->vocab_size(); }
  void read(int64_t begin, int64_t count, int32_t* out) const override;
  std::string describe() const override;

 private:
  SourcePtr parent_;
  int64_t begin_, count_;
  std::string label_;
};

struct TrainValidation {
  SourcePtr train;
  SourcePtr validation;
};

// Deterministic split: the last `validation_fraction` of the stream (rounded down to whole
// tokens, at least one token each side) is validation, everything before it is training.
// A tail split keeps validation text contiguous, so long evaluation windows fit.
TrainValidation split_tail(SourcePtr source, double validation_fraction = 0.1);

// Throws unless [begin, begin + count) lies inside [0, size); `what` names the source.
void check_range(int64_t begin, int64_t count, int64_t size, const std::string& what);

}  // namespace lcr::data
