#include "core/data/token_source.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <utility>

#include "kernels/base/error.hpp"

namespace lcr::data {

void check_range(int64_t begin, int64_t count, int64_t size, const std::string& what) {
  require(begin >= 0 && count >= 0 && begin <= size && count <= size - begin, what,
          ": read of tokens [", begin, ", ", begin + count, ") is outside [0, ", size, ")");
}

TokenBuffer::TokenBuffer(std::vector<int32_t> tokens, int32_t vocab_size, std::string description)
    : tokens_(std::move(tokens)), vocab_(vocab_size), description_(std::move(description)) {
  require(vocab_ > 0, description_, ": vocabulary size must be positive, got ", vocab_);
  for (size_t i = 0; i < tokens_.size(); ++i)
    require(tokens_[i] >= 0 && tokens_[i] < vocab_, description_, ": token ", tokens_[i],
            " at index ", i, " is outside the vocabulary [0, ", vocab_, ")");
}

void TokenBuffer::read(int64_t begin, int64_t count, int32_t* out) const {
  check_range(begin, count, size(), description_);
  if (count > 0) std::memcpy(out, tokens_.data() + begin, sizeof(int32_t) * count);
}

TokenSlice::TokenSlice(SourcePtr parent, int64_t begin, int64_t count, std::string label)
    : parent_(std::move(parent)), begin_(begin), count_(count), label_(std::move(label)) {
  require(parent_ != nullptr, "TokenSlice: no parent source");
  check_range(begin_, count_, parent_->size(), parent_->describe());
}

void TokenSlice::read(int64_t begin, int64_t count, int32_t* out) const {
  check_range(begin, count, count_, describe());
  parent_->read(begin_ + begin, count, out);
}

std::string TokenSlice::describe() const {
  std::ostringstream os;
  os << label_ << " [" << begin_ << ", " << begin_ + count_ << ") of " << parent_->describe();
  return os.str();
}

TrainValidation split_tail(SourcePtr source, double validation_fraction) {
  require(source != nullptr, "split_tail: no source");
  require(validation_fraction > 0.0 && validation_fraction < 1.0,
          "validation fraction must be in (0, 1), got ", validation_fraction);
  const int64_t n = source->size();
  require(n >= 2, source->describe(), ": has ", n,
          " tokens; a train/validation split needs at least 2");
  int64_t n_val = static_cast<int64_t>(std::floor(validation_fraction * static_cast<double>(n)));
  n_val = std::clamp<int64_t>(n_val, 1, n - 1);
  TrainValidation out;
  out.train = std::make_shared<TokenSlice>(source, 0, n - n_val, "train");
  out.validation = std::make_shared<TokenSlice>(source, n - n_val, n_val, "validation");
  return out;
}

}  // namespace lcr::data
