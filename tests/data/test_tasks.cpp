// Synthetic tasks: each task's invariant is re-derived here from the documented token
// layout (docs/data.md), not from the generator's code: the A5 running product by
// composing permutations enumerated independently, passkey answers parsed from the text,
// flip-flop reads against the last write, MQRAR answers against the pair history,
// indirect-indexing answers by locating the source symbol. Plus determinism, the
// DP-rank/step indexing, and the option errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/data/tasks/a5.hpp"
#include "core/data/tasks/longctx.hpp"
#include "core/data/tasks/task.hpp"
#include "kernels/base/error.hpp"

namespace {

using lcr::data::Batch;
using lcr::data::kIgnoreLabel;
using lcr::data::Split;
using namespace lcr::tasks;

// Expects an lcr::Error whose message contains every fragment.
void expect_error(const std::string& name, const TaskOptions& o,
                  const std::vector<std::string>& fragments) {
  try {
    make_task(name, o);
    ADD_FAILURE() << name << ": no error thrown";
  } catch (const lcr::Error& e) {
    for (const std::string& s : fragments)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos)
          << "message '" << e.what() << "' lacks '" << s << "'";
  }
}

Batch draw(const std::string& name, const TaskOptions& o, int64_t rows, uint64_t seed = 7) {
  return make_task(name, o)->batch(seed, 0, 0, 1, rows);
}

void expect_well_formed(const Task& task, const Batch& b) {
  ASSERT_EQ(b.vocab_size, task.vocab_size());
  ASSERT_EQ(b.seq_len, task.seq_len());
  ASSERT_EQ(b.tokens.size(), static_cast<size_t>(b.batch * b.seq_len));
  for (size_t i = 0; i < b.tokens.size(); ++i) {
    ASSERT_GE(b.tokens[i], 0);
    ASSERT_LT(b.tokens[i], b.vocab_size);
    ASSERT_GE(b.labels[i], kIgnoreLabel);
    ASSERT_LT(b.labels[i], b.vocab_size);
  }
}

// Default options with lengths every task accepts.
TaskOptions options_for(const std::string& name) {
  TaskOptions o;
  o.seq_len = name == "indirect_indexing" ? 40 : name == "a5" ? 20 : 128;
  if (is_long_task(name)) o.seq_len = 4096;  // cwe's defaults need ~3.7K bytes
  return o;
}

// ---------------------------------------------------------------------------------------
// Factory, determinism and indexing: every task.

TEST(Tasks, FactoryKnowsEveryTaskAndListsThemOnError) {
  EXPECT_EQ(task_names().size(), 6u + long_task_names().size() + 1);  // + longctx_mix
  for (const std::string& name : task_names()) {
    auto task = make_task(name, options_for(name));
    EXPECT_EQ(task->name(), name);
    EXPECT_FALSE(task->description().empty());
  }
  expect_error("copy", TaskOptions{},
               {"unknown task 'copy'", "copy_mixture", "passkey", "indirect_indexing", "flip_flop",
                "mqar", "a5", "longctx_mix"});
}

TEST(Tasks, DeterministicUnderTheSeedAndDistinctAcrossRanksAndSteps) {
  for (const std::string& name : task_names()) {
    SCOPED_TRACE(name);
    auto task = make_task(name, options_for(name));
    const Batch a = task->batch(42, 3, 1, 4, 5);
    expect_well_formed(*task, a);
    EXPECT_GT(a.scored(), 0);
    const Batch again = make_task(name, options_for(name))->batch(42, 3, 1, 4, 5);
    EXPECT_EQ(a.tokens, again.tokens);
    EXPECT_EQ(a.labels, again.labels);
    EXPECT_NE(a.tokens, task->batch(42, 3, 2, 4, 5).tokens);  // other rank
    EXPECT_NE(a.tokens, task->batch(42, 4, 1, 4, 5).tokens);  // other step
    EXPECT_NE(a.tokens, task->batch(43, 3, 1, 4, 5).tokens);  // other seed
    // Row b of (step, rank) is global sample (step * dp_size + rank) * rows + b.
    const Batch same = task->samples(42, Split::train, (3 * 4 + 1) * 5, 5);
    EXPECT_EQ(a.tokens, same.tokens);
    const Batch val = task->samples(42, Split::validation, (3 * 4 + 1) * 5, 5);
    EXPECT_NE(a.tokens, val.tokens);
  }
}

TEST(Tasks, ScorePredictions) {
  const Batch b = draw("flip_flop", options_for("flip_flop"), 4);
  std::vector<int32_t> pred = b.labels;  // perfect on scored positions
  TaskScore s = score_predictions(b, pred.data());
  EXPECT_EQ(s.scored_tokens, b.scored());
  EXPECT_EQ(s.token_accuracy(), 1.0);
  EXPECT_EQ(s.sequence_accuracy(), 1.0);
  for (size_t i = 0; i < pred.size(); ++i)  // break the first scored position of row 0
    if (b.labels[i] != kIgnoreLabel) {
      pred[i] = 1 - pred[i];
      break;
    }
  s = score_predictions(b, pred.data());
  EXPECT_EQ(s.correct_tokens, s.scored_tokens - 1);
  EXPECT_EQ(s.correct_rows, 3);
}

// ---------------------------------------------------------------------------------------
// copy_mixture

TEST(CopyMixture, LabelsAreNextTokensAndPureModesCopy) {
  TaskOptions o = options_for("copy_mixture");
  o.copy_mixture.p_first = 1.0;
  o.copy_mixture.p_relative = 0.0;
  Batch b = draw("copy_mixture", o, 3);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t t = 0; t < b.seq_len; ++t) EXPECT_EQ(b.tokens_row(r)[t], b.tokens_row(r)[0]);
    for (int64_t t = 0; t + 1 < b.seq_len; ++t)
      EXPECT_EQ(b.labels_row(r)[t], b.tokens_row(r)[t + 1]);
    EXPECT_EQ(b.labels_row(r)[b.seq_len - 1], kIgnoreLabel);
  }
  o.copy_mixture.p_first = 0.0;
  o.copy_mixture.p_relative = 1.0;
  o.copy_mixture.relative_offset = 3;
  b = draw("copy_mixture", o, 3);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t t = 3; t < b.seq_len; ++t)
      EXPECT_EQ(b.tokens_row(r)[t], b.tokens_row(r)[t - 3]);  // period 3
}

TEST(CopyMixture, MixtureFrequencies) {
  // Stationary P(x_t = x_0) = q solves q = p_first + p_relative q (noise collisions are
  // ~1/vocab): q = 0.3 / 0.5 = 0.6. Noise (neither copy) has probability 0.2.
  TaskOptions o;
  o.seq_len = 256;
  o.copy_mixture.vocab = 4096;
  o.copy_mixture.p_first = 0.3;
  o.copy_mixture.p_relative = 0.5;
  o.copy_mixture.relative_offset = 2;
  const Batch b = draw("copy_mixture", o, 200);
  int64_t n = 0, first = 0, neither = 0;
  for (int64_t r = 0; r < b.batch; ++r) {
    const int32_t* x = b.tokens_row(r);
    for (int64_t t = 32; t < b.seq_len; ++t) {  // past the start-up transient
      ++n;
      first += x[t] == x[0];
      neither += x[t] != x[0] && x[t] != x[t - 2];
    }
  }
  EXPECT_NEAR(static_cast<double>(first) / n, 0.6, 0.02);
  EXPECT_NEAR(static_cast<double>(neither) / n, 0.2, 0.01);
}

TEST(CopyMixture, BadOptions) {
  TaskOptions o = options_for("copy_mixture");
  o.copy_mixture.p_first = 0.7;
  o.copy_mixture.p_relative = 0.5;
  expect_error("copy_mixture", o, {"p_first + p_relative <= 1"});
  o = options_for("copy_mixture");
  o.copy_mixture.relative_offset = 128;
  expect_error("copy_mixture", o, {"task.copy_mixture.relative_offset", "[1, seq_len - 1"});
  o = options_for("copy_mixture");
  o.copy_mixture.vocab = 1;
  expect_error("copy_mixture", o, {"task.copy_mixture.vocab"});
}

// ---------------------------------------------------------------------------------------
// passkey

const std::string kNeedleHead = "The pass key is ";
const std::string kQuestion = "What is the pass key? The pass key is ";

std::string row_text(const Batch& b, int64_t r) {
  std::string s;
  for (int64_t t = 0; t < b.seq_len; ++t) s += static_cast<char>(b.tokens_row(r)[t]);
  return s;
}

TEST(Passkey, AnswerTokensEqualTheInsertedKey) {
  TaskOptions o;
  o.seq_len = 1000;
  const Batch b = draw("passkey", o, 20);
  std::set<std::string> keys;
  for (int64_t r = 0; r < b.batch; ++r) {
    const std::string text = row_text(b, r);
    const size_t at = text.find(kNeedleHead);
    ASSERT_NE(at, std::string::npos) << text;
    const std::string key = text.substr(at + kNeedleHead.size(), 8);
    for (char c : key) ASSERT_TRUE(c >= '0' && c <= '9') << key;
    keys.insert(key);
    // The sequence ends with question + key; only the positions before the key's digits
    // are scored, each with the next digit.
    EXPECT_EQ(text.substr(1000 - 8 - kQuestion.size()), kQuestion + key);
    for (int64_t t = 0; t < b.seq_len; ++t) {
      const int32_t l = b.labels_row(r)[t];
      if (t >= 1000 - 9 && t < 999)
        EXPECT_EQ(l, static_cast<unsigned char>(key[t - (1000 - 9)]));
      else
        EXPECT_EQ(l, kIgnoreLabel) << t;
    }
    EXPECT_NE(text.find(". Remember it. " + key + " is the pass key. "), std::string::npos);
  }
  EXPECT_GT(keys.size(), 15u);  // keys vary between samples
}

TEST(Passkey, FixedDepthPlacesTheNeedle) {
  for (int64_t L : {200, 1000, 4096}) {
    for (double depth : {0.0, 0.25, 0.5, 1.0}) {
      TaskOptions o;
      o.seq_len = L;
      o.passkey.random_depth = false;
      o.passkey.depth = depth;
      const Batch b = draw("passkey", o, 2);
      const std::string text = row_text(b, 0);
      const int64_t needle_len = static_cast<int64_t>(
          (kNeedleHead + "00000000. Remember it. 00000000 is the pass key. ").size());
      const int64_t filler = L - needle_len - static_cast<int64_t>(kQuestion.size()) - 8;
      const int64_t at = static_cast<int64_t>(text.find(kNeedleHead));
      // Snapped to a sentence start: within one filler sentence (<= 20 bytes) of depth * F.
      EXPECT_LE(std::abs(at - depth * filler), 20.0) << "L " << L << " depth " << depth;
      if (depth == 1.0) {
        EXPECT_EQ(at, filler);  // right before the question
      }
      if (depth == 0.0) {
        EXPECT_EQ(at, 0);
      }
    }
  }
}

TEST(Passkey, BadOptions) {
  TaskOptions o;
  o.seq_len = 50;
  expect_error("passkey", o, {"too short for passkey", "seq_len >= "});
  o.seq_len = 500;
  o.passkey.depth = 1.5;
  expect_error("passkey", o, {"task.passkey.depth"});
  o.passkey.depth = 0.5;
  o.passkey.key_digits = 0;
  expect_error("passkey", o, {"task.passkey.key_digits"});
}

// ---------------------------------------------------------------------------------------
// indirect_indexing: layout PAD.. s_0..s_{n-1} SEP src offset answer

TEST(IndirectIndexing, AnswerIsTheSymbolAtSourcePlusOffset) {
  TaskOptions o;
  o.seq_len = 45;  // 5 pad tokens
  o.indirect_indexing.alphabet = 40;
  o.indirect_indexing.string_length = 36;
  o.indirect_indexing.max_offset = 5;
  const int32_t A = 40, M = 5, n = 36, L = 45;
  const Batch b = draw("indirect_indexing", o, 300);
  EXPECT_EQ(b.vocab_size, A + 2 * M + 3);
  std::set<int> offsets_seen;
  for (int64_t r = 0; r < b.batch; ++r) {
    const int32_t* x = b.tokens_row(r);
    for (int t = 0; t < L - n - 4; ++t) EXPECT_EQ(x[t], A + 1);  // PAD
    const int32_t* s = x + (L - n - 4);
    EXPECT_EQ(x[L - 4], A);                                                 // SEP
    EXPECT_EQ(std::set<int32_t>(s, s + n).size(), static_cast<size_t>(n));  // distinct
    const int32_t src = x[L - 3];
    const int off = x[L - 2] - (A + 2) - M;
    ASSERT_TRUE(off != 0 && off >= -M && off <= M) << off;
    const int64_t idx = std::find(s, s + n, src) - s;
    ASSERT_LT(idx, n) << "source symbol not in the string";
    ASSERT_TRUE(idx + off >= 0 && idx + off < n);
    EXPECT_EQ(x[L - 1], s[idx + off]);
    for (int t = 0; t < L; ++t)
      EXPECT_EQ(b.labels_row(r)[t], t == L - 2 ? s[idx + off] : kIgnoreLabel);
    offsets_seen.insert(off);
  }
  EXPECT_EQ(offsets_seen.size(), 10u);  // every nonzero offset in [-5, 5] occurs
}

// queries = Q: the string once, then Q scored (source, offset, answer) triples.
TEST(IndirectIndexing, SeveralQueriesPerStringEachScored) {
  TaskOptions o;
  o.seq_len = 7 + 1 + 3 * 5 + 2;  // 2 pad tokens
  o.indirect_indexing.alphabet = 11;
  o.indirect_indexing.string_length = 7;
  o.indirect_indexing.max_offset = 3;
  o.indirect_indexing.queries = 5;
  const int32_t A = 11, M = 3, n = 7, Q = 5, L = o.seq_len;
  const Batch b = draw("indirect_indexing", o, 200);
  for (int64_t r = 0; r < b.batch; ++r) {
    const int32_t* x = b.tokens_row(r);
    const int32_t* y = b.labels_row(r);
    EXPECT_EQ(x[0], A + 1);
    EXPECT_EQ(x[1], A + 1);
    const int32_t* s = x + 2;
    EXPECT_EQ(x[2 + n], A);  // SEP
    int scored = 0;
    for (int t = 0; t < L; ++t) scored += y[t] != kIgnoreLabel;
    EXPECT_EQ(scored, Q);
    for (int q = 0; q < Q; ++q) {
      const int t = 2 + n + 1 + 3 * q;  // source token of triple q
      const int64_t idx = std::find(s, s + n, x[t]) - s;
      ASSERT_LT(idx, n) << "source symbol not in the string";
      const int off = x[t + 1] - (A + 2) - M;
      ASSERT_TRUE(off != 0 && off >= -M && off <= M) << off;
      ASSERT_TRUE(idx + off >= 0 && idx + off < n);
      EXPECT_EQ(x[t + 2], s[idx + off]);
      EXPECT_EQ(y[t + 1], s[idx + off]);
    }
  }
  o.seq_len = n + 3 * Q;  // one short
  expect_error("indirect_indexing", o, {"too short for indirect_indexing", "23"});
}

TEST(IndirectIndexing, BadOptions) {
  TaskOptions o;
  o.seq_len = 40;
  o.indirect_indexing.alphabet = 20;
  o.indirect_indexing.string_length = 30;
  expect_error("indirect_indexing", o, {"string_length", "alphabet = 20", "distinct"});
  o.indirect_indexing.alphabet = 64;
  o.indirect_indexing.max_offset = 30;
  expect_error("indirect_indexing", o, {"max_offset", "[1, string_length - 1 = 29]"});
  o.indirect_indexing.max_offset = 4;
  o.seq_len = 33;
  expect_error("indirect_indexing", o, {"too short for indirect_indexing", "34"});
  o.seq_len = 40;
  o.indirect_indexing.queries = 0;
  expect_error("indirect_indexing", o, {"queries must be >= 1"});
}

// ---------------------------------------------------------------------------------------
// flip_flop: ids bit0 0, bit1 1, write 2, ignore 3, read 4

TEST(FlipFlop, ReadsRepeatTheLastWrittenBit) {
  TaskOptions o;
  o.seq_len = 512;
  o.flip_flop.p_ignore = 0.8;
  const Batch b = draw("flip_flop", o, 50);
  int64_t middle = 0, ignores = 0, reads = 0;
  for (int64_t r = 0; r < b.batch; ++r) {
    const int32_t* x = b.tokens_row(r);
    const int32_t* l = b.labels_row(r);
    EXPECT_EQ(x[0], 2);              // starts with a write
    EXPECT_EQ(x[b.seq_len - 2], 4);  // ends with a read
    int32_t last = -1;
    for (int64_t p = 0; p < b.seq_len / 2; ++p) {
      const int32_t op = x[2 * p], bit = x[2 * p + 1];
      ASSERT_TRUE(op >= 2 && op <= 4);
      ASSERT_TRUE(bit == 0 || bit == 1);
      EXPECT_EQ(l[2 * p + 1], kIgnoreLabel);
      if (op == 2) last = bit;
      if (op == 4) {
        ++reads;
        EXPECT_EQ(bit, last);
        EXPECT_EQ(l[2 * p], last);
      } else {
        EXPECT_EQ(l[2 * p], kIgnoreLabel);
      }
      if (p > 0 && p < b.seq_len / 2 - 1) {
        ++middle;
        ignores += op == 3;
      }
    }
  }
  EXPECT_NEAR(static_cast<double>(ignores) / middle, 0.8, 0.01);
  EXPECT_EQ(reads, b.scored());
}

TEST(FlipFlop, BadOptions) {
  TaskOptions o;
  o.seq_len = 31;
  expect_error("flip_flop", o, {"even and >= 4"});
  o.seq_len = 32;
  o.flip_flop.p_ignore = 1.5;
  expect_error("flip_flop", o, {"task.flip_flop.p_ignore"});
}

// ---------------------------------------------------------------------------------------
// mqar: keys [0, K), value v = K + v, SEP = K + V, PAD = K + V + 1

TEST(Mqar, QueryLabelIsTheNthMostRecentValue) {
  for (int N : {1, 2, 3}) {
    TaskOptions o;
    o.seq_len = 102;  // 36 context + SEP + 32 queries + 1 trailing PAD
    o.mqar.num_keys = 20;
    o.mqar.num_values = 30;
    o.mqar.num_vars = 6;
    o.mqar.assignments = 3;
    o.mqar.recall_n = N;
    const int32_t K = 20, V = 30, sep = K + V, pad = K + V + 1;
    const Batch b = draw("mqar", o, 40);
    EXPECT_EQ(b.vocab_size, K + V + 2);
    for (int64_t r = 0; r < b.batch; ++r) {
      const int32_t* x = b.tokens_row(r);
      const int32_t* l = b.labels_row(r);
      std::map<int32_t, std::vector<int32_t>> history;
      int64_t t = 0;
      for (; x[t] != sep; t += 2) {
        ASSERT_LT(t + 1, b.seq_len);
        ASSERT_LT(x[t], K);
        ASSERT_GE(x[t + 1], K);
        ASSERT_LT(x[t + 1], K + V);
        EXPECT_EQ(l[t], kIgnoreLabel);
        history[x[t]].push_back(x[t + 1]);
      }
      EXPECT_EQ(t, 2 * 6 * 3);
      EXPECT_EQ(history.size(), 6u);
      for (const auto& h : history) EXPECT_EQ(h.second.size(), 3u);
      int64_t queries = 0;
      for (++t; t + 1 < b.seq_len; t += 2) {
        ASSERT_TRUE(history.count(x[t])) << "query of an unassigned key";
        const std::vector<int32_t>& h = history[x[t]];
        EXPECT_EQ(l[t], h[h.size() - N]);
        EXPECT_EQ(x[t + 1], l[t]);
        EXPECT_EQ(l[t + 1], kIgnoreLabel);
        ++queries;
      }
      EXPECT_EQ(queries, 32);
      EXPECT_EQ(x[b.seq_len - 1], pad);
    }
  }
}

TEST(Mqar, BadOptions) {
  TaskOptions o;
  o.seq_len = 100;
  o.mqar.recall_n = 3;
  o.mqar.assignments = 2;
  expect_error("mqar", o, {"task.mqar.assignments (2) must be >= recall_n (3)"});
  o = TaskOptions{};
  o.mqar.num_vars = 100;
  expect_error("mqar", o, {"task.mqar.num_vars"});
  o = TaskOptions{};
  o.seq_len = 30;
  expect_error("mqar", o, {"too short for mqar"});
}

// ---------------------------------------------------------------------------------------
// a5: the group enumerated here independently: all 5-tuples in lexicographic order,
// kept when they are permutations with an even number of even-length cycles.

using P = std::array<int, 5>;

bool even_by_cycles(const P& p) {
  std::array<bool, 5> seen{};
  int even_cycles = 0;
  for (int i = 0; i < 5; ++i) {
    if (seen[i]) continue;
    int len = 0;
    for (int j = i; !seen[j]; j = p[j]) seen[j] = true, ++len;
    even_cycles += (len % 2 == 0);
  }
  return even_cycles % 2 == 0;
}

std::vector<P> enumerate_a5() {
  std::vector<P> out;
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 5; ++c)
        for (int d = 0; d < 5; ++d)
          for (int e = 0; e < 5; ++e) {
            const P p = {a, b, c, d, e};
            if (std::set<int>(p.begin(), p.end()).size() == 5 && even_by_cycles(p))
              out.push_back(p);
          }
  return out;
}

TEST(A5, LabelsAreTheRunningProductOfPermutations) {
  const std::vector<P> g = enumerate_a5();
  ASSERT_EQ(g.size(), 60u);
  for (int i = 0; i < 60; ++i)  // the library's order and ours agree
    for (int k = 0; k < 5; ++k) ASSERT_EQ(a5::element(i)[k], g[i][k]);
  TaskOptions o;
  o.seq_len = 37;
  const Batch b = draw("a5", o, 30);
  EXPECT_EQ(b.vocab_size, 60);
  for (int64_t r = 0; r < b.batch; ++r) {
    P state = {0, 1, 2, 3, 4};
    for (int64_t t = 0; t < b.seq_len; ++t) {
      const P& e = g[b.tokens_row(r)[t]];
      P next;
      for (int i = 0; i < 5; ++i) next[i] = e[state[i]];  // apply the word left to right
      state = next;
      const int idx = static_cast<int>(std::find(g.begin(), g.end(), state) - g.begin());
      ASSERT_EQ(b.labels_row(r)[t], idx) << "row " << r << " t " << t;
    }
  }
  o.a5.final_only = true;
  const Batch f = draw("a5", o, 30);
  EXPECT_EQ(f.tokens, b.tokens);  // same words
  for (int64_t r = 0; r < f.batch; ++r)
    for (int64_t t = 0; t < f.seq_len; ++t)
      EXPECT_EQ(f.labels_row(r)[t], t == f.seq_len - 1 ? b.labels_row(r)[t] : kIgnoreLabel);
}

TEST(A5, GroupIsNonAbelianWithIdentityFirst) {
  EXPECT_EQ(a5::index_of({0, 1, 2, 3, 4}), 0);
  bool commutes = true;
  for (int a = 0; a < 60; ++a)
    for (int b = 0; b < 60; ++b) {
      EXPECT_EQ(a5::multiply(0, b), b);
      if (a5::multiply(a, b) != a5::multiply(b, a)) commutes = false;
    }
  EXPECT_FALSE(commutes);
  EXPECT_THROW(a5::index_of({1, 0, 2, 3, 4}), lcr::Error);  // a transposition is odd
}

}  // namespace
