#pragma once
// Synthetic tasks from the papers, as seeded, deterministic batch generators.
//
//   TaskOptions opt;                      // seq_len and each task's parameters
//   opt.seq_len = 128;
//   auto task = make_task("flip_flop", opt);       // validates the options
//   data::Batch b = task->batch(seed, step, dp_rank, dp_size, rows);
//
// Every sample is a pure function of (seed, split, sample index): sample g of a split is
// generated from its own counter-based generator, so batches are reproducible, a resumed
// run continues exactly, and DP ranks draw different samples (global sample index
// (step * dp_size + dp_rank) * rows + b, as for text). Batches use the one format of
// core/data/batch.hpp: tokens [B, L] and labels [B, L], -1 where not scored, where
// labels[t] is the target of the model's output at position t.
//
// The exact constructions are documented in docs/data.md (token ids, layouts, labels).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/batch.hpp"
#include "core/data/rng.hpp"
#include "core/data/tasks/longctx_options.hpp"

namespace lcr::tasks {

// GOAT Fig. 1: every token copies the first token, copies the token `relative_offset`
// back, or is uniform noise; a prior learns a first-token column and a relative stripe.
struct CopyMixtureOptions {
  int32_t vocab = 64;           // symbols 0 .. vocab-1
  double p_first = 0.25;        // P(token t = token 0)
  double p_relative = 0.5;      // P(token t = token t - relative_offset)
  int64_t relative_offset = 1;  // 1 = copy the previous token (the paper's setting)
};

// Needle in a haystack, byte-level (vocabulary 256): filler sentences, "The pass key is
// <digits>. Remember it. ..." at a depth fraction, the question at the end, labels on the
// answer digits only.
struct PasskeyOptions {
  int32_t key_digits = 8;    // the GOAT paper's single 8-digit key
  bool random_depth = true;  // training: depth uniform in [0, 1] per sample
  double depth = 0.5;        // evaluation grid: fixed depth when random_depth is false
};

// PoPE indirect indexing: a string of distinct symbols, then a source symbol and a
// relative offset; the answer is the symbol at (position of source) + offset.
struct IndirectIndexingOptions {
  int32_t alphabet = 64;       // symbols 0 .. alphabet-1
  int64_t string_length = 32;  // distinct symbols per string; <= alphabet
  int32_t max_offset = 8;      // offsets in [-max_offset, max_offset] \ {0}
  int32_t queries = 1;         // (source, offset, answer) triples after the string, each scored
};

// PaTH flip-flop language modelling: (instruction, bit) pairs; a read must repeat the
// bit of the most recent write.
struct FlipFlopOptions {
  double p_ignore = 0.8;  // P(instruction = ignore); write and read share the rest equally
};

// PaTH multi-query repeated associative recall (MQRAR-N): variables assigned several
// times, then queries asking for the N-th most recent value of a variable.
struct MqarOptions {
  int32_t num_keys = 64;    // key (variable) token ids
  int32_t num_values = 64;  // value token ids
  int32_t num_vars = 8;     // distinct variables per sequence
  int32_t assignments = 2;  // assignments per variable in the context
  int32_t recall_n = 1;     // N: 1 = most recent value (plain MQAR)
};

// A5 word problem: a sequence of elements of the alternating group A5; the label at each
// position is the running product (state tracking).
struct A5Options {
  bool final_only = false;  // score only the last position (the product of the whole word)
};

struct TaskOptions {
  int64_t seq_len = 256;  // tokens per sequence, every task
  CopyMixtureOptions copy_mixture;
  PasskeyOptions passkey;
  IndirectIndexingOptions indirect_indexing;
  FlipFlopOptions flip_flop;
  MqarOptions mqar;
  A5Options a5;
  // The long-context evaluation tasks (longctx.hpp), one options struct per task name.
  NiahOptions niah_single;
  NiahOptions niah_multikey;
  NiahOptions niah_multivalue;
  NiahOptions niah_multiquery;
  VariableTrackingOptions variable_tracking;
  CweOptions cwe;
  FweOptions fwe;
  PhonebookOptions phonebook;
  LongMixOptions longctx_mix;  // longctx_mix.cpp
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;  // one line, with the parameters
  virtual int32_t vocab_size() const = 0;
  int64_t seq_len() const { return seq_len_; }

  // Writes one sequence: tokens[0..seq_len), labels[0..seq_len) (-1 = not scored), using
  // only `rng` for randomness.
  virtual void generate(data::Rng& rng, int32_t* tokens, int32_t* labels) const = 0;

  // The generator of sample `index` of the (seed, split) stream: keyed by the seed, the
  // task's name, the split and the index.
  data::Rng sample_rng(uint64_t seed, data::Split split, uint64_t index) const;

  // Samples [first, first + count) of the (seed, split) stream as one batch.
  data::Batch samples(uint64_t seed, data::Split split, uint64_t first, int64_t count) const;

  // The training batch of DP rank dp_rank at `step` (rows per rank: `rows`).
  data::Batch batch(uint64_t seed, int64_t step, int dp_rank, int dp_size, int64_t rows) const;

 protected:
  explicit Task(int64_t seq_len) : seq_len_(seq_len) {}

 private:
  int64_t seq_len_;
};

// "copy_mixture", "passkey", "indirect_indexing", "flip_flop", "mqar", "a5", then the
// long-context tasks of longctx.hpp: "niah_single", "niah_multikey", "niah_multivalue",
// "niah_multiquery", "variable_tracking", "cwe", "fwe", "phonebook".
const std::vector<std::string>& task_names();

// Builds a task from its name; throws for an unknown name (listing the valid ones) or
// invalid options (naming the option and its valid range).
std::unique_ptr<Task> make_task(const std::string& name, const TaskOptions& options);

// Accuracy of predictions (argmax token per position, [B, L]) on the scored positions:
// token accuracy over all scored positions, and the fraction of rows whose scored
// positions are all right (passkey exact match). Rows without scored positions are left
// out of the sequence accuracy.
struct TaskScore {
  int64_t scored_tokens = 0;
  int64_t correct_tokens = 0;
  int64_t scored_rows = 0;
  int64_t correct_rows = 0;
  double token_accuracy() const;
  double sequence_accuracy() const;
};
TaskScore score_predictions(const data::Batch& batch, const int32_t* predictions);

}  // namespace lcr::tasks
