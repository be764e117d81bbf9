// Long-context tasks: the registry, determinism, agreement of generate() and
// generate_spans(), the same content at every length and depth, needle depth, haystacks,
// evaluation cells, span scoring, minimum lengths and option errors. The answers
// themselves are checked by the independent oracles (test_longctx_niah.cpp,
// test_longctx_lists.cpp).
#include <cmath>
#include <map>
#include <set>

#include "longctx_oracle.hpp"

namespace {

using namespace lcr_test;

// Expects an lcr::Error from make_task whose message contains every fragment.
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

TaskOptions options(const std::string& task, const std::string& form, int64_t L = 4096) {
  TaskOptions o;
  o.seq_len = L;
  long_task_options(o, task).form = form;
  return o;
}

std::string text_of(const Batch& b, int64_t r) {
  return std::string(b.tokens_row(r), b.tokens_row(r) + b.seq_len);
}

// The answers of a row as id strings, read through the spans.
std::vector<Ids> span_answers(const Batch& b, int64_t r, const AnswerSpans& spans) {
  std::vector<Ids> out;
  for (const AnswerSpan& s : spans)
    out.emplace_back(b.tokens_row(r) + s.begin + 1, b.tokens_row(r) + s.end + 1);
  return out;
}

TEST(LongTasks, RegistryCategoriesAndVocabularies) {
  ASSERT_EQ(long_task_names().size(), 8u);
  const std::map<std::string, std::string> category = {{"niah_single", "single_needle"},
                                                       {"niah_multikey", "multi_needle"},
                                                       {"niah_multivalue", "multi_needle"},
                                                       {"niah_multiquery", "multi_needle"},
                                                       {"variable_tracking", "tracking"},
                                                       {"cwe", "aggregation"},
                                                       {"fwe", "aggregation"},
                                                       {"phonebook", "phonebook"}};
  for (const std::string& name : long_task_names()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(is_long_task(name));
    EXPECT_NE(std::find(task_names().begin(), task_names().end(), name), task_names().end());
    for (const std::string form : {"byte", "token"}) {
      const std::unique_ptr<LongTask> t = make_long_task(name, options(name, form));
      EXPECT_EQ(t->name(), name);
      EXPECT_EQ(long_category_name(t->category()), category.at(name));
      EXPECT_EQ(t->vocab_size(), form == "byte" ? 256 : 486);
      EXPECT_FALSE(t->description().empty());
      const Batch b = make_task(name, options(name, form))->batch(3, 0, 0, 1, 2);  // trainable
      EXPECT_GT(b.scored(), 0);
    }
  }
  EXPECT_FALSE(is_long_task("passkey"));
  try {
    make_long_task("passkey", TaskOptions{});
    ADD_FAILURE() << "no error";
  } catch (const lcr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("niah_multiquery"), std::string::npos) << e.what();
  }
}

TEST(LongTasks, DeterministicAndGenerateAgreesWithGenerateSpans) {
  for (const std::string& name : long_task_names())
    for (const std::string form : {"byte", "token"}) {
      SCOPED_TRACE(name + " " + form);
      TaskOptions o = options(name, form);
      const std::unique_ptr<LongTask> t = make_long_task(name, o);
      std::vector<AnswerSpans> s1, s2;
      const Batch a = t->samples_with_spans(5, Split::validation, 7, 4, 0.4, s1);
      const Batch b =
          make_long_task(name, o)->samples_with_spans(5, Split::validation, 7, 4, 0.4, s2);
      EXPECT_EQ(a.tokens, b.tokens);
      EXPECT_EQ(a.labels, b.labels);
      ASSERT_EQ(s1.size(), 4u);
      for (size_t r = 0; r < 4; ++r) {
        ASSERT_EQ(s1[r].size(), s2[r].size());
        for (size_t i = 0; i < s1[r].size(); ++i) {
          EXPECT_EQ(s1[r][i].begin, s2[r][i].begin);
          EXPECT_EQ(s1[r][i].end, s2[r][i].end);
        }
      }
      for (int64_t r = 1; r < 4; ++r)  // different indices differ
        EXPECT_NE(text_of(a, r), text_of(a, r - 1));
      // Task::samples (generate) at the option's fixed depth = generate_spans at it.
      long_task_options(o, name).random_depth = false;
      long_task_options(o, name).depth = 0.4;
      EXPECT_EQ(make_task(name, o)->samples(5, Split::validation, 7, 4).tokens, a.tokens);
      // Drawn depth: generate() draws exactly as generate_spans(rng, -1).
      long_task_options(o, name).random_depth = true;
      std::vector<AnswerSpans> s3;
      const Batch c = t->samples_with_spans(5, Split::train, 7, 4, -1.0, s3);
      const Batch d = make_task(name, o)->samples(5, Split::train, 7, 4);
      EXPECT_EQ(c.tokens, d.tokens);
      EXPECT_EQ(c.labels, d.labels);
      EXPECT_NE(c.tokens, a.tokens);  // train and validation streams differ
    }
}

// Sample k carries the same keys and values at every length and depth.
TEST(LongTasks, SameAnswersAtEveryLengthAndDepth) {
  for (const std::string& name : long_task_names()) {
    if (name == "fwe") continue;  // the top words depend on how many words are drawn
    for (const std::string form : {"byte", "token"}) {
      SCOPED_TRACE(name + " " + form);
      std::vector<std::vector<std::set<Ids>>> seen(6);  // per sample: answers per cell
      std::vector<std::vector<std::vector<Ids>>> ordered(6);
      for (int64_t L : {4099, 9001})
        for (double depth : {0.0, 0.5, 1.0}) {
          const LongCell c = long_cell(name, options(name, form), L, depth, 6, 21);
          for (int64_t r = 0; r < 6; ++r) {
            const std::vector<Ids> ans = span_answers(c.batch, r, c.spans[r]);
            seen[r].push_back(std::set<Ids>(ans.begin(), ans.end()));
            ordered[r].push_back(ans);
          }
        }
      // cwe and niah_multivalue list answers in order of appearance, which moves.
      const bool any_order = name == "cwe" || name == "niah_multivalue";
      for (int64_t r = 0; r < 6; ++r)
        for (size_t k = 1; k < seen[r].size(); ++k) {
          if (any_order) {
            EXPECT_EQ(seen[r][k], seen[r][0]);
          } else {
            EXPECT_EQ(ordered[r][k], ordered[r][0]);
          }
        }
      EXPECT_NE(ordered[0][0], ordered[1][0]);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Depth

// Where the niah_single needle starts and the question starts, parsed.
struct Placement {
  int64_t needle = -1, needle_end = -1, question = -1;
};

Placement place_niah(const Batch& b, int64_t r) {
  Placement p;
  if (b.vocab_size == 256) {
    const std::string s = text_of(b, r);
    p.needle = static_cast<int64_t>(s.find("One of the special magic numbers for "));
    p.needle_end = static_cast<int64_t>(s.find(". ", s.find(" is: ", p.needle)) + 2);
    p.question = static_cast<int64_t>(s.find("What is the special magic number"));
  } else {
    const int32_t* x = b.tokens_row(r);
    p.needle = std::find(x, x + b.seq_len, NEEDLE) - x;
    p.needle_end = p.needle + 3 + 7;
    p.question = std::find(x, x + b.seq_len, QUERY) - x;
  }
  return p;
}

TEST(LongTasks, NeedleDepthIsMonotoneWithDocumentedEnds) {
  for (const std::string form : {"byte", "token"})
    for (const std::string haystack : {"noise", "essay"}) {
      if (form == "token" && haystack == "essay") continue;
      SCOPED_TRACE(form + " " + haystack);
      TaskOptions o = options("niah_single", form, 3001);
      o.niah_single.haystack = haystack;
      for (int64_t r = 0; r < 5; ++r) {
        int64_t last = -1;
        for (int k = 0; k <= 20; ++k) {
          const double depth = k / 20.0;
          const LongCell c = long_cell("niah_single", o, 3001, depth, 5, 8);
          const Placement p = place_niah(c.batch, r);
          ASSERT_GE(p.needle, 0);
          EXPECT_GE(p.needle, last) << "depth " << depth;
          last = p.needle;
          const int64_t start = form == "token" ? 1 : 0;  // after BOS
          const int64_t haystack_size = p.question - start - (p.needle_end - p.needle);
          if (k == 0) {
            EXPECT_EQ(p.needle, start);
          }
          if (k == 20) {
            EXPECT_EQ(p.needle_end, p.question);  // right before the question
          }
          const double target = start + depth * haystack_size;
          if (form == "token") {
            EXPECT_EQ(p.needle, start + std::llround(depth * haystack_size));
          } else {  // snapped to a sentence start: within one sentence
            EXPECT_LE(std::abs(p.needle - target), haystack == "noise" ? 20.0 : 100.0);
            if (k > 0 && k < 20) {
              EXPECT_EQ(c.batch.tokens_row(r)[p.needle - 2], '.');
            }
          }
        }
      }
    }
}

// The asked phonebook entry's index and the number of entries, parsed.
std::pair<int64_t, int64_t> asked_entry(const Batch& b, int64_t r) {
  int64_t index = -1, n = 0;
  if (b.vocab_size == 256) {
    const std::string s = text_of(b, r);
    const std::string head = "What is the phone number of ";
    const size_t q = s.find(head);
    const std::string name = s.substr(q + head.size(), s.find("? ", q) - q - head.size());
    size_t p = s.find_first_not_of(' ');
    for (; p < q; p = s.find('\n', p) + 1, ++n)
      if (s.compare(p, name.size() + 2, name + ": ") == 0) index = n;
  } else {
    const int32_t* x = b.tokens_row(r);
    const int64_t q = std::find(x, x + b.seq_len, QUERY) - x;
    int64_t t = 1;
    while (x[t] == PAD) ++t;
    for (; t < q; t += 11, ++n)
      if (x[t + 1] == x[q + 1] && x[t + 2] == x[q + 2]) index = n;
  }
  return {index, n};
}

TEST(LongTasks, TrackingAndPhonebookDepth) {
  for (const std::string form : {"byte", "token"}) {
    SCOPED_TRACE(form);
    // variable_tracking, one chain: depth 0 starts it first; depth 1 puts all of it last.
    TaskOptions o = options("variable_tracking", form, 2000);
    for (double depth : {0.0, 1.0}) {
      const LongCell c = long_cell("variable_tracking", o, 2000, depth, 4, 2);
      for (int64_t r = 0; r < 4; ++r) {
        const std::string s = text_of(c.batch, r);
        if (form == "byte") {
          const size_t q = s.find("Which variables");
          if (depth == 0.0) {
            EXPECT_EQ(s.find("VAR "), 0u);
          }
          if (depth == 1.0) {  // five assignments back to back, then the question
            const size_t first = s.find("VAR ");
            EXPECT_EQ(q - first, 19u + 4 * 23);  // "VAR ABCDE = 12345. ", "VAR FGHIJ = VAR ABCDE. "
          }
        } else {
          const int32_t* x = c.batch.tokens_row(r);
          const int64_t q = std::find(x, x + 2000, QUERY) - x;
          if (depth == 0.0) {
            EXPECT_EQ(x[1], NEEDLE);
          }
          if (depth == 1.0) {
            EXPECT_EQ(std::find(x, x + 2000, NEEDLE) - x, q - (8 + 4 * 4));
          }
        }
      }
    }
    // phonebook: the asked entry moves from the first line to the last.
    for (double depth : {0.0, 0.5, 1.0}) {
      const LongCell c =
          long_cell("phonebook", options("phonebook", form, 1500), 1500, depth, 4, 2);
      for (int64_t r = 0; r < 4; ++r) {
        const std::pair<int64_t, int64_t> at = asked_entry(c.batch, r);
        ASSERT_GT(at.second, 10);
        EXPECT_EQ(at.first, std::llround(depth * (at.second - 1)));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Haystacks

TEST(LongTasks, EssayHaystackIsVariedText) {
  TaskOptions o = options("niah_single", "byte", 4099);
  std::set<std::string> noise, essay;
  for (const std::string h : {"noise", "essay"}) {
    o.niah_single.haystack = h;
    const LongCell c = long_cell("niah_single", o, 4099, 0.0, 1, 3);
    const std::string s = text_of(c.batch, 0);
    std::set<std::string>& seen = h == "noise" ? noise : essay;
    std::string previous;
    // Whole sentences: after the needle (depth 0: first) and the cut first sentence.
    const size_t from = s.find(". ", s.find(". ") + 2) + 2;
    for (size_t p = from, e; (e = s.find(". ", p)) < s.find("What is"); p = e + 2) {
      const std::string sentence = s.substr(p, e - p);
      if (h == "essay") {
        EXPECT_NE(sentence, previous) << "a sentence twice in a row";
      }
      previous = sentence;
      seen.insert(sentence);
    }
  }
  EXPECT_EQ(noise.size(), 5u);  // the five filler sentences
  EXPECT_GE(essay.size(), 20u);
}

TEST(LongTasks, HaystackTextIsAWindowEndingOnASentence) {
  std::string text;
  for (int i = 0; text.size() < 50000; ++i)
    text += "Line " + std::to_string(i) + " of the held-out text ends here. ";
  TaskOptions o = options("niah_single", "byte", 2000);
  o.niah_single.haystack = "essay";
  o.niah_single.haystack_text = std::make_shared<const std::string>(text);
  const LongCell c = long_cell("niah_single", o, 2000, 0.5, 5, 4);
  std::set<std::string> windows;
  for (int64_t r = 0; r < 5; ++r) {
    const std::string s = text_of(c.batch, r);
    const Placement p = place_niah(c.batch, r);
    const std::string haystack =
        s.substr(0, p.needle) + s.substr(p.needle_end, p.question - p.needle_end);
    EXPECT_NE(text.find(haystack), std::string::npos) << "not a window of the text";
    EXPECT_EQ(haystack.substr(haystack.size() - 2), ". ");
    windows.insert(haystack);
  }
  EXPECT_EQ(windows.size(), 5u);  // a seeded window per sample
}

// ---------------------------------------------------------------------------------------
// Cells and scoring

TEST(LongTasks, CellsAreValidationSamplesAtTheirDepth) {
  TaskOptions base = options("niah_multikey", "token");
  const std::vector<LongCell> grid = long_grid("niah_multikey", base, {600, 900}, {0.0, 1.0}, 3, 9);
  ASSERT_EQ(grid.size(), 4u);
  EXPECT_EQ(grid[1].length, 600);
  EXPECT_EQ(grid[1].depth, 1.0);
  EXPECT_EQ(grid[2].length, 900);
  EXPECT_EQ(grid[2].category, LongCategory::MultiNeedle);
  base.seq_len = 900;
  base.niah_multikey.random_depth = false;
  base.niah_multikey.depth = 0.0;
  EXPECT_EQ(make_task("niah_multikey", base)->samples(9, Split::validation, 0, 3).tokens,
            grid[2].batch.tokens);
  EXPECT_EQ(grid[2].spans.size(), 3u);
}

TEST(LongTasks, ScoreAllAndPartMatch) {
  TaskOptions base = options("niah_multiquery", "byte");
  const LongCell c = long_cell("niah_multiquery", base, 1500, 0.5, 2, 1);
  ASSERT_EQ(c.spans[0].size(), 4u);
  std::vector<int32_t> pred(c.batch.labels);
  for (int32_t& p : pred)
    if (p == kIgnoreLabel) p = 'x';  // unscored positions: anything
  LongScore s = score_long(c, pred.data());
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.scored_tokens, c.batch.scored());
  EXPECT_EQ(s.token_accuracy(), 1.0);
  EXPECT_EQ(s.all_match(), 1.0);
  EXPECT_EQ(s.part_match(), 1.0);
  // Unscored positions do not matter.
  for (int64_t t = 0; t < 1400; ++t) pred[t] = 'a' + t % 26;
  EXPECT_EQ(score_long(c, pred.data()).all_match(), 1.0);
  // One wrong token in the third span of row 0.
  pred[c.spans[0][2].begin + 1] = '#';
  s = score_long(c, pred.data());
  EXPECT_EQ(s.correct_tokens, s.scored_tokens - 1);
  EXPECT_EQ(s.all_match_sum, 1.0);    // row 1 only
  EXPECT_EQ(s.part_match_sum, 1.75);  // 0.75 + 1
  const LongCell one = long_cell("niah_multiquery", base, 1500, 0.5, 1, 1);
  const LongScore r0 = score_long(one, pred.data());
  EXPECT_EQ(r0.all_match(), 0.0);
  EXPECT_EQ(r0.part_match(), 0.75);
  LongScore sum = r0;
  sum += r0;
  EXPECT_EQ(sum.rows, 2);
  EXPECT_EQ(sum.part_match(), 0.75);
  EXPECT_EQ(sum.scored_tokens, 2 * r0.scored_tokens);
  EXPECT_THROW(score_spans(c.batch, {c.spans[0]}, pred.data()), lcr::Error);
}

// ---------------------------------------------------------------------------------------
// Minimum lengths and option errors

// The "use seq_len >= N" of an error, or -1.
int64_t suggested_minimum(const std::string& name, TaskOptions o) {
  try {
    make_task(name, o);
  } catch (const lcr::Error& e) {
    const std::string m = e.what();
    const size_t p = m.find("use seq_len >= ");
    EXPECT_NE(m.find("too short for " + name), std::string::npos) << m;
    if (p != std::string::npos) return std::stoll(m.substr(p + 15));
  }
  return -1;
}

TEST(LongTasks, MinimumLengthIsExact) {
  for (const std::string& name : long_task_names())
    for (const std::string form : {"byte", "token"}) {
      SCOPED_TRACE(name + " " + form);
      TaskOptions o = options(name, form, 20);
      const int64_t need = suggested_minimum(name, o);
      ASSERT_GT(need, 20);
      o.seq_len = need - 1;
      EXPECT_EQ(suggested_minimum(name, o), need);
      o.seq_len = need;  // fits, for every sample: the longest keys and values included
      const Batch b = make_task(name, o)->samples(1, Split::train, 0, 300);
      EXPECT_EQ(b.seq_len, need);
    }
  TaskOptions o = options("niah_multivalue", "byte", 300);
  expect_error("niah_multivalue", o,
               {"task.seq_len 300 is too short for niah_multivalue (byte form, number values, 4 "
                "values): the needles, question and answers take up to",
                "bytes; use seq_len >= "});
}

TEST(LongTasks, BadOptionsNameTheOption) {
  auto with = [](const std::string& task, const std::function<void(TaskOptions&)>& f) {
    TaskOptions o = options(task, "byte");
    f(o);
    return o;
  };
  expect_error("niah_single",
               with("niah_single", [](TaskOptions& o) { o.niah_single.form = "bits"; }),
               {"task.niah_single.form", "\"byte\" or \"token\""});
  expect_error("niah_single",
               with("niah_single", [](TaskOptions& o) { o.niah_single.haystack = "paper"; }),
               {"task.niah_single.haystack", "\"noise\" or \"essay\""});
  expect_error("niah_single",
               with("niah_single",
                    [](TaskOptions& o) {
                      o.niah_single.form = "token";
                      o.niah_single.haystack = "essay";
                    }),
               {"task.niah_single.haystack", "needs form = \"byte\""});
  expect_error("niah_single",
               with("niah_single",
                    [](TaskOptions& o) {
                      o.niah_single.haystack_text = std::make_shared<const std::string>(10000, 'a');
                    }),
               {"task.niah_single.haystack_text", "haystack = \"essay\""});
  expect_error("niah_single",
               with("niah_single",
                    [](TaskOptions& o) {
                      o.niah_single.haystack = "essay";
                      o.niah_single.haystack_text =
                          std::make_shared<const std::string>("Too short. ");
                    }),
               {"task.niah_single.haystack_text", "fewer than seq_len = 4096"});
  expect_error("niah_single",
               with("niah_single", [](TaskOptions& o) { o.niah_single.value = "float"; }),
               {"task.niah_single.value", "\"number\", \"uuid\" or \"word\""});
  for (double d : {-0.1, 1.5, std::nan("")})
    expect_error("niah_multikey",
                 with("niah_multikey", [&](TaskOptions& o) { o.niah_multikey.depth = d; }),
                 {"task.niah_multikey.depth", "[0, 1]"});
  expect_error("niah_multikey",
               with("niah_multikey", [](TaskOptions& o) { o.niah_multikey.distractors = -1; }),
               {"task.niah_multikey.distractors", "[0, 2303]"});
  expect_error("niah_multikey",
               with("niah_multikey",
                    [](TaskOptions& o) {
                      o.niah_multikey.value = "word";
                      o.niah_multikey.distractors = 64;
                    }),
               {"task.niah_multikey.distractors", "[0, 63]", "64 value words"});
  expect_error("niah_multikey",
               with("niah_multikey",
                    [](TaskOptions& o) {
                      o.niah_multikey.form = "token";
                      o.niah_multikey.distractors = 256;
                    }),
               {"task.niah_multikey.distractors", "[0, 255]"});
  expect_error("niah_multivalue",
               with("niah_multivalue", [](TaskOptions& o) { o.niah_multivalue.values = 0; }),
               {"task.niah_multivalue.values", "[1, 1000]"});
  expect_error("niah_multiquery",
               with("niah_multiquery",
                    [](TaskOptions& o) {
                      o.niah_multiquery.form = "token";
                      o.niah_multiquery.queries = 257;
                    }),
               {"task.niah_multiquery.queries", "[1, 256]"});
  expect_error("variable_tracking",
               with("variable_tracking", [](TaskOptions& o) { o.variable_tracking.chains = 0; }),
               {"task.variable_tracking.chains", "[1, 1000]"});
  expect_error("variable_tracking",
               with("variable_tracking", [](TaskOptions& o) { o.variable_tracking.hops = -1; }),
               {"task.variable_tracking.hops", "[0, 1000]"});
  expect_error("variable_tracking",
               with("variable_tracking",
                    [](TaskOptions& o) {
                      o.variable_tracking.form = "token";
                      o.variable_tracking.chains = 60;
                    }),
               {"task.variable_tracking.chains * (hops + 1) = 300", "256"});
  expect_error("cwe", with("cwe", [](TaskOptions& o) { o.cwe.common = 0; }),
               {"task.cwe.common", "[1, 1000]"});
  expect_error("cwe", with("cwe", [](TaskOptions& o) { o.cwe.common_freq = 1; }),
               {"task.cwe.common_freq", "[2, 100000]"});
  expect_error("cwe", with("cwe", [](TaskOptions& o) { o.cwe.rare_freq = 30; }),
               {"task.cwe.rare_freq", "[1, common_freq - 1 = 29]"});
  expect_error("fwe", with("fwe", [](TaskOptions& o) { o.fwe.alpha = 0.0; }),
               {"task.fwe.alpha", "(0, 100]"});
  expect_error("fwe", with("fwe", [](TaskOptions& o) { o.fwe.alpha = std::nan(""); }),
               {"task.fwe.alpha"});
  expect_error("fwe", with("fwe", [](TaskOptions& o) { o.fwe.answers = 0; }),
               {"task.fwe.answers", "[1, 100]"});
  expect_error("phonebook", with("phonebook", [](TaskOptions& o) { o.phonebook.form = "ascii"; }),
               {"task.phonebook.form"});
  expect_error("phonebook", with("phonebook", [](TaskOptions& o) { o.seq_len = 1000000; }),
               {"too long for phonebook", "16384 distinct names", "use seq_len <= "});
  expect_error("phonebook",
               with("phonebook",
                    [](TaskOptions& o) {
                      o.phonebook.form = "token";
                      o.seq_len = 1000000;
                    }),
               {"too long for phonebook (token form)", "65536 distinct names"});
  expect_error("cwe", with("cwe", [](TaskOptions& o) { o.seq_len = 1000; }),
               {"too short for cwe (byte form, 10 common words x 30)", "use seq_len >= "});
  expect_error("fwe", with("fwe", [](TaskOptions& o) { o.seq_len = 50; }),
               {"too short for fwe (byte form, 3 answers)"});
  expect_error("variable_tracking",
               with("variable_tracking", [](TaskOptions& o) { o.seq_len = 100; }),
               {"too short for variable_tracking (byte form, 1 chains of 4 hops)"});
  expect_error("phonebook", with("phonebook", [](TaskOptions& o) { o.seq_len = 30; }),
               {"too short for phonebook (byte form)"});
  EXPECT_THROW(long_cell("niah_single", TaskOptions{}, 1000, 1.5, 2, 0), lcr::Error);
}

}  // namespace
