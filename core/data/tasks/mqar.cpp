// Multi-query repeated associative recall, MQRAR-N (PaTH Sec. 4.1): variables are assigned
// several times; a query asks for the N-th most recent value of a variable (N = 1 is the
// plain MQAR of Zoology). MQRAR-2 example from the seed: a variable assigned 1, then 5,
// must recall 1. Assignments are counted before the query, which here means the whole
// context, since all queries follow it.
//
// Token ids (K = num_keys, V = num_values): keys 0 .. K-1, value v is K + v, SEP = K + V,
// PAD = K + V + 1; vocabulary K + V + 2. One sequence of seq_len tokens:
//
//   context  C = num_vars * assignments pairs "key value": num_vars distinct keys, each
//            assigned `assignments` times, the C assignments in random order, each value
//            uniform
//   SEP
//   queries  pairs "key answer" filling the rest, key uniform among the num_vars
//            variables, answer = its recall_n-th most recent context value
//   PAD      one token if the remainder is odd
//
// Scored: each query key position, labelled with the answer (the next token).
#include <sstream>
#include <vector>

#include "core/data/tasks/task_list.hpp"
#include "kernels/base/error.hpp"

namespace lcr::tasks {
namespace {

class Mqar : public Task {
 public:
  Mqar(int64_t seq_len, const MqarOptions& o) : Task(seq_len), o_(o) {
    require(o.num_keys >= 1, "task.mqar.num_keys must be >= 1, got ", o.num_keys);
    require(o.num_values >= 2, "task.mqar.num_values must be >= 2, got ", o.num_values);
    require(o.num_vars >= 1 && o.num_vars <= o.num_keys, "task.mqar.num_vars must be in [1, ",
            "num_keys = ", o.num_keys, "] (variables are distinct keys), got ", o.num_vars);
    require(o.recall_n >= 1, "task.mqar.recall_n must be >= 1, got ", o.recall_n);
    require(o.assignments >= o.recall_n, "task.mqar.assignments (", o.assignments,
            ") must be >= recall_n (", o.recall_n,
            "): a variable needs N assignments to have an N-th most recent value");
    const int64_t need = 2 * context_pairs() + 3;
    require(seq_len >= need, "task.seq_len ", seq_len, " is too short for mqar: ", context_pairs(),
            " context pairs, the separator and one query take ", need, " tokens");
  }
  std::string name() const override { return "mqar"; }
  std::string description() const override {
    std::ostringstream os;
    os << "multi-query repeated associative recall MQRAR-" << o_.recall_n
       << " (PaTH): " << o_.num_vars << " variables x " << o_.assignments << " assignments, then "
       << (seq_len() - 2 * context_pairs() - 1) / 2 << " queries; " << o_.num_keys << " keys, "
       << o_.num_values << " values, length " << seq_len();
    return os.str();
  }
  int32_t vocab_size() const override { return o_.num_keys + o_.num_values + 2; }

  void generate(data::Rng& rng, int32_t* tokens, int32_t* labels) const override {
    const int32_t K = o_.num_keys, V = o_.num_values, nv = o_.num_vars;
    const int32_t sep = K + V, pad = K + V + 1;
    // Distinct variable keys: partial Fisher-Yates over all keys.
    std::vector<int32_t> keys(K);
    for (int32_t k = 0; k < K; ++k) keys[k] = k;
    for (int32_t k = 0; k < nv; ++k) std::swap(keys[k], keys[k + rng.uniform(K - k)]);
    // The assignment events (variable indices), shuffled.
    const int64_t C = context_pairs();
    std::vector<int32_t> events(C);
    for (int64_t e = 0; e < C; ++e) events[e] = static_cast<int32_t>(e % nv);
    for (int64_t e = C - 1; e > 0; --e) std::swap(events[e], events[rng.uniform(e + 1)]);

    std::vector<std::vector<int32_t>> history(nv);  // values per variable, oldest first
    const int64_t L = seq_len();
    for (int64_t t = 0; t < L; ++t) labels[t] = data::kIgnoreLabel;
    int64_t t = 0;
    for (int64_t e = 0; e < C; ++e) {
      const int32_t value = static_cast<int32_t>(rng.uniform(V));
      history[events[e]].push_back(value);
      tokens[t++] = keys[events[e]];
      tokens[t++] = K + value;
    }
    tokens[t++] = sep;
    while (t + 2 <= L) {
      const int64_t var = rng.uniform(nv);
      const std::vector<int32_t>& h = history[var];
      const int32_t answer = K + h[h.size() - o_.recall_n];
      tokens[t] = keys[var];
      labels[t] = answer;
      tokens[t + 1] = answer;
      t += 2;
    }
    if (t < L) tokens[t] = pad;
  }

 private:
  int64_t context_pairs() const { return static_cast<int64_t>(o_.num_vars) * o_.assignments; }
  MqarOptions o_;
};

}  // namespace

std::unique_ptr<Task> make_mqar(int64_t seq_len, const MqarOptions& o) {
  return std::make_unique<Mqar>(seq_len, o);
}

}  // namespace lcr::tasks
