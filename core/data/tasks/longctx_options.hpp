#pragma once
// Options of the long-context evaluation tasks (RULER-style retrieval, tracking and
// aggregation, and PhoneBook), one struct per task family; TaskOptions holds one per task
// name, so errors name them "task.<name>.<option>". The tasks are in longctx.hpp, the
// layouts in docs/data.md ("Long-context evaluation tasks").
#include <cstdint>
#include <memory>
#include <string>

namespace lcr::tasks {

// Every long-context task.
struct LongContextOptions {
  // Not an aggregate: GCC 12 warns (-Wmaybe-uninitialized, falsely) on the cleanup of
  // aggregate-initialised bases holding strings, as in TaskOptions{}.
  LongContextOptions() {}
  std::string form = "byte";  // "byte": ASCII text, vocabulary 256; "token": the compact
                              // synthetic vocabulary of longctx.hpp (486 ids)
  bool random_depth = true;   // training: the depth is drawn uniform in [0, 1] per sample
  double depth = 0.5;         // evaluation: the fixed depth when random_depth is false
                              // (cwe and fwe have no needle and ignore it)
};

// Tasks whose context is a haystack with needles in it (the niah tasks, variable_tracking).
struct HaystackOptions : LongContextOptions {
  std::string haystack = "noise";  // "noise": the repeated filler sentences of passkey
                                   // (byte) or uniform noise symbols (token); "essay":
                                   // natural sentences, byte form only
  // essay, optional: held-out text to cut the haystack from (a seeded window starting at
  // a sentence or word start) instead of the built-in sentences; at least seq_len bytes.
  std::shared_ptr<const std::string> haystack_text;
};

// niah_single, niah_multikey, niah_multivalue, niah_multiquery: needles "key -> value".
// Each task reads only its own count.
struct NiahOptions : HaystackOptions {
  std::string value = "number";  // "number" (7 digits), "uuid" (8-4-4-4-12 hex), "word"
  int32_t distractors = 3;       // niah_multikey: needles with other keys and values
  int32_t values = 4;            // niah_multivalue: values of the one key, one needle each
  int32_t queries = 4;           // niah_multiquery: keys asked for, one needle each
};

// variable_tracking: chains "VAR A = 12345", "VAR B = VAR A", ...; the question asks for
// every variable of the first chain.
struct VariableTrackingOptions : HaystackOptions {
  int32_t chains = 1;  // chains per sample; chain 0 is asked for, the others distract
  int32_t hops = 4;    // copy assignments per chain after its value assignment (RULER's
                       // num_hops): hops + 1 variables per chain
};

// cwe: common-word extraction from a numbered list.
struct CweOptions : LongContextOptions {
  int32_t common = 10;       // common words: the answer
  int32_t common_freq = 30;  // occurrences of each common word
  int32_t rare_freq = 3;     // occurrences of each other word (at most; < common_freq)
};

// fwe: frequent-word extraction from Zipf-distributed words.
struct FweOptions : LongContextOptions {
  double alpha = 2.0;   // Zipf exponent: P(rank r) proportional to r^-alpha
  int32_t answers = 3;  // the most frequent words asked for
};

// phonebook: "First Last: 555-dddd-ddd" lines; asked for one number.
struct PhonebookOptions : LongContextOptions {};

// longctx_mix: training on several long-context tasks at once; each sample is one task's,
// drawn uniformly. The tasks keep their own [task.<name>] options but take this form.
struct LongMixOptions {
  std::string tasks = "all";   // comma-separated names, or "all": every long-context task
                               // whose fixed parts fit seq_len
  std::string form = "token";  // of every task: "token" (one shared vocabulary) or "byte"
};

}  // namespace lcr::tasks
