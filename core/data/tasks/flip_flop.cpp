// Flip-flop language modelling (PaTH Sec. 4.1, after Liu et al.'s FFLM): a sequence of
// (instruction, bit) pairs. "write b" stores b, "ignore b" is a distractor, "read b" must
// repeat the bit of the most recent write. The PaTH paper's settings: in-distribution
// p_ignore = 0.8, out-of-distribution sparse 0.98 and dense 0.1.
//
// Token ids: bit 0 = 0, bit 1 = 1, write = 2, ignore = 3, read = 4 (vocabulary 5).
// seq_len is even: seq_len / 2 pairs. The first instruction is always a write and the
// last always a read (so every read has an answer and every sequence is scored); the
// others are ignore with probability p_ignore, otherwise write or read with equal
// probability. Bits after write and ignore are uniform. Scored positions: each read
// instruction, labelled with the bit that follows it (the last written bit).
#include <sstream>

#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

constexpr int32_t kWrite = 2, kIgnore = 3, kRead = 4;

class FlipFlop : public Task {
 public:
  FlipFlop(int64_t seq_len, const FlipFlopOptions& o) : Task(seq_len), o_(o) {
    require(seq_len >= 4 && seq_len % 2 == 0, "task.seq_len must be even and >= 4 for flip_flop ",
            "((instruction, bit) pairs starting with a write and ending with a read), got ",
            seq_len);
    require(o.p_ignore >= 0.0 && o.p_ignore <= 1.0,
            "task.flip_flop.p_ignore must be in [0, 1], got ", o.p_ignore);
  }
  std::string name() const override { return "flip_flop"; }
  std::string description() const override {
    std::ostringstream os;
    os << "flip-flop language modelling (PaTH): " << seq_len() / 2
       << " (instruction, bit) pairs, p_ignore " << o_.p_ignore
       << "; each read repeats the last written bit";
    return os.str();
  }
  int32_t vocab_size() const override { return 5; }

  void generate(data::Rng& rng, int32_t* tokens, int32_t* labels) const override {
    const int64_t pairs = seq_len() / 2;
    int32_t last = 0;
    for (int64_t p = 0; p < pairs; ++p) {
      int32_t op;
      if (p == 0)
        op = kWrite;
      else if (p == pairs - 1)
        op = kRead;
      else if (rng.bernoulli(o_.p_ignore))
        op = kIgnore;
      else
        op = rng.bernoulli(0.5) ? kWrite : kRead;
      int32_t bit = static_cast<int32_t>(rng.uniform(2));
      if (op == kWrite) last = bit;
      if (op == kRead) bit = last;
      tokens[2 * p] = op;
      tokens[2 * p + 1] = bit;
      labels[2 * p] = (op == kRead) ? bit : data::kIgnoreLabel;
      labels[2 * p + 1] = data::kIgnoreLabel;
    }
  }

 private:
  FlipFlopOptions o_;
};

}  // namespace

std::unique_ptr<Task> make_flip_flop(int64_t seq_len, const FlipFlopOptions& o) {
  return std::make_unique<FlipFlop>(seq_len, o);
}

}  // namespace lcr::tasks
