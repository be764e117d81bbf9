// Indirect indexing (PoPE Sec. 4, Table 1; seed 002 Sec. 4.1): the input is a source
// string, a source symbol and a relative offset; the answer is the symbol `offset` places
// from the source symbol ("ABCDE, D, -2 -> B": find D, move two left, read B). The task
// needs "locate by content, then read by relative position", which is what separates
// PoPE from RoPE.
//
// Token ids (A = alphabet, M = max_offset):
//   symbols 0 .. A-1,  SEP = A,  PAD = A+1,  offset o in [-M, M] is A + 2 + (o + M)
//   vocabulary A + 2M + 3
// One sequence of seq_len tokens, n = string_length, Q = queries:
//   PAD x (seq_len - n - 1 - 3Q), s_0 .. s_{n-1}, SEP, then Q triples s_i, offset(o), s_{i+o}
// s is n distinct symbols in random order (so the source symbol occurs once); per triple i
// is uniform in [0, n) and o uniform over the nonzero offsets in [-M, M] with
// 0 <= i + o < n. The scored positions are the offset tokens: each is labelled s_{i+o}
// (the next token). Q = 1 is the paper's form; Q > 1 gives Q answers per string, i.e. Q
// times the supervision per sequence at the same string (a CPU-sized budget then learns).
#include <algorithm>
#include <numeric>
#include <sstream>
#include <vector>

#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

class IndirectIndexing : public Task {
 public:
  IndirectIndexing(int64_t seq_len, const IndirectIndexingOptions& o) : Task(seq_len), o_(o) {
    require(o.alphabet >= 2, "task.indirect_indexing.alphabet must be >= 2, got ", o.alphabet);
    require(o.string_length >= 2 && o.string_length <= o.alphabet,
            "task.indirect_indexing.string_length must be in [2, alphabet = ", o.alphabet,
            "] (the symbols of a string are distinct), got ", o.string_length);
    require(o.max_offset >= 1 && o.max_offset < o.string_length,
            "task.indirect_indexing.max_offset must be in [1, string_length - 1 = ",
            o.string_length - 1, "], got ", o.max_offset);
    require(o.queries >= 1, "task.indirect_indexing.queries must be >= 1, got ", o.queries);
    const int64_t need = o.string_length + 1 + 3 * int64_t(o.queries);
    require(seq_len >= need, "task.seq_len ", seq_len,
            " is too short for indirect_indexing: string_length + 1 + 3 * queries = ", need,
            " tokens are needed (string, separator, then source, offset, answer per query)");
  }
  std::string name() const override { return "indirect_indexing"; }
  std::string description() const override {
    std::ostringstream os;
    os << "indirect indexing (PoPE): " << o_.string_length << " distinct symbols of " << o_.alphabet
       << ", a source symbol and an offset in [-" << o_.max_offset << ", " << o_.max_offset
       << "]; answer the symbol at source + offset (" << o_.queries
       << (o_.queries == 1 ? " query" : " queries") << " per string); length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return o_.alphabet + 2 * o_.max_offset + 3; }

  void generate(data::Rng& rng, int32_t* tokens, int32_t* labels) const override {
    const int64_t n = o_.string_length, M = o_.max_offset, A = o_.alphabet;
    // n distinct symbols: the first n entries of a partial Fisher-Yates shuffle.
    std::vector<int32_t> pool(A);
    std::iota(pool.begin(), pool.end(), 0);
    for (int64_t k = 0; k < n; ++k) std::swap(pool[k], pool[k + rng.uniform(A - k)]);

    const int64_t Q = o_.queries;
    const int64_t pad = seq_len() - n - 1 - 3 * Q;
    int64_t t = 0;
    for (; t < pad; ++t) tokens[t] = static_cast<int32_t>(A + 1);
    for (int64_t k = 0; k < n; ++k) tokens[t++] = pool[k];
    tokens[t++] = static_cast<int32_t>(A);  // SEP
    for (int64_t k = 0; k < seq_len(); ++k) labels[k] = data::kIgnoreLabel;
    for (int64_t q = 0; q < Q; ++q) {
      const int64_t i = rng.uniform(n);
      const int64_t lo = std::max(-M, -i), hi = std::min(M, n - 1 - i);  // lo <= 0 <= hi
      int64_t off = lo + rng.uniform(hi - lo);  // hi - lo nonzero offsets to choose from
      if (off >= 0) ++off;                      // skip 0
      tokens[t++] = pool[i];
      tokens[t++] = static_cast<int32_t>(A + 2 + off + M);
      labels[t - 1] = pool[i + off];
      tokens[t++] = pool[i + off];
    }
  }

 private:
  IndirectIndexingOptions o_;
};

}  // namespace

std::unique_ptr<Task> make_indirect_indexing(int64_t seq_len, const IndirectIndexingOptions& o) {
  return std::make_unique<IndirectIndexing>(seq_len, o);
}

}  // namespace lcr::tasks
