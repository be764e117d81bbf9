// The A5 word problem (PaTH Sec. 4.1, state tracking): a word of A5 elements; the label
// at position t is the running product g_1 ... g_t (a5.hpp fixes order and convention).
// A5 is the smallest non-solvable group, so tracking its products is NC1-complete: the
// task separates models that compose non-commuting transitions (PaTH) from those that
// cannot in bounded depth. The PaTH paper asks whether a word is the identity; with
// final_only the last position's label is the whole word's product, whose test "== 0"
// (the identity) is that question.
//
// Tokens: element indices 0 .. 59, each uniform (vocabulary 60). Labels: the running
// product's index at every position (or only at the last with final_only).
#include "core/data/tasks/a5.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace a5 {
namespace {

struct Group {
  std::vector<Perm> elements;                            // [60]
  std::array<std::array<int8_t, kOrder>, kOrder> table;  // table[a][b] = a then b
};

bool is_even(const Perm& p) {
  int inversions = 0;
  for (int i = 0; i < 5; ++i)
    for (int j = i + 1; j < 5; ++j) inversions += (p[i] > p[j]);
  return inversions % 2 == 0;
}

int find(const std::vector<Perm>& elements, const Perm& p) {
  const auto it = std::lower_bound(elements.begin(), elements.end(), p);  // sorted: lexicographic
  return (it != elements.end() && *it == p) ? static_cast<int>(it - elements.begin()) : -1;
}

const Group& group() {
  static const Group g = [] {
    Group out;
    Perm p = {0, 1, 2, 3, 4};
    do {  // next_permutation walks the lexicographic order
      if (is_even(p)) out.elements.push_back(p);
    } while (std::next_permutation(p.begin(), p.end()));
    for (int a = 0; a < kOrder; ++a)
      for (int b = 0; b < kOrder; ++b) {
        Perm ab;
        for (int i = 0; i < 5; ++i) ab[i] = out.elements[b][out.elements[a][i]];
        out.table[a][b] = static_cast<int8_t>(find(out.elements, ab));
      }
    return out;
  }();
  return g;
}

}  // namespace

const Perm& element(int index) {
  require(index >= 0 && index < kOrder, "A5 element index ", index, " is outside [0, 60)");
  return group().elements[index];
}

int index_of(const Perm& p) {
  const int i = find(group().elements, p);
  require(i >= 0, "permutation is not an element of A5 (odd, or not a permutation of 0..4)");
  return i;
}

int multiply(int a, int b) {
  require(a >= 0 && a < kOrder && b >= 0 && b < kOrder, "A5 element index outside [0, 60)");
  return group().table[a][b];
}

}  // namespace a5

namespace {

class A5Word : public Task {
 public:
  A5Word(int64_t seq_len, const A5Options& o) : Task(seq_len), o_(o) {}
  std::string name() const override { return "a5"; }
  std::string description() const override {
    std::ostringstream os;
    os << "A5 word problem (PaTH): " << seq_len() << " uniform elements of A5; label = running "
       << "product " << (o_.final_only ? "at the last position only" : "at every position");
    return os.str();
  }
  int32_t vocab_size() const override { return a5::kOrder; }

  void generate(data::Rng& rng, int32_t* tokens, int32_t* labels) const override {
    const auto& table = a5::group().table;
    int state = 0;  // identity
    const int64_t L = seq_len();
    for (int64_t t = 0; t < L; ++t) {
      tokens[t] = static_cast<int32_t>(rng.uniform(a5::kOrder));
      state = table[state][tokens[t]];
      labels[t] = (!o_.final_only || t == L - 1) ? state : data::kIgnoreLabel;
    }
  }

 private:
  A5Options o_;
};

}  // namespace

std::unique_ptr<Task> make_a5(int64_t seq_len, const A5Options& o) {
  return std::make_unique<A5Word>(seq_len, o);
}

}  // namespace lcr::tasks
