// Long-context tasks against an independent oracle, variable_tracking, cwe, fwe and
// phonebook: each sequence parsed from scratch by the documented layout (docs/data.md),
// the answers recomputed from the parsed context alone (the assignments executed as a
// program; the list's words counted; the asked name looked up), then the answer region,
// labels and spans checked (longctx_oracle.hpp).
#include <map>
#include <set>

#include "longctx_oracle.hpp"

namespace {

using namespace lcr_test;

// ---------------------------------------------------------------------------------------
// variable_tracking: runs the assignments in text order; the answer is every variable
// holding the asked value, in the order they were assigned.

struct Assignment {
  Ids var, from_var, value;  // from_var empty: a value assignment
};

void resolve_chain(const std::vector<Assignment>& program, const Ids& asked, int chain_size,
                   Expected& e) {
  std::map<Ids, Ids> env;
  std::vector<Ids> order;
  for (const Assignment& a : program) {
    ASSERT_EQ(env.count(a.var), 0u) << "a variable assigned twice";
    if (a.from_var.empty()) {
      env[a.var] = a.value;
    } else {
      ASSERT_EQ(env.count(a.from_var), 1u) << "copy from a variable not yet assigned";
      env[a.var] = env[a.from_var];
    }
    order.push_back(a.var);
  }
  for (const Ids& v : order)
    if (env[v] == asked) e.answers.push_back(v);
  ASSERT_EQ(static_cast<int>(e.answers.size()), chain_size);
}

Oracle vt_byte_oracle(int chains, int hops) {
  return [=](const Row& row, Expected& e) {
    const std::string& s = row.text;
    const std::string head = "Which variables are assigned the value ";
    const size_t q = s.find(head);
    ASSERT_NE(q, std::string::npos);
    const std::string value = s.substr(q + head.size(), 5);
    ASSERT_TRUE(all_chars(value, digit));
    const std::string tail =
        " in the text above? The variables assigned the value " + value + " are: ";
    ASSERT_EQ(s.substr(q + head.size() + 5, tail.size()), tail);
    e.answer_start = static_cast<int64_t>(q + head.size() + 5 + tail.size());
    e.separator = ids_of(", ");
    std::vector<Assignment> program;
    const std::string context = s.substr(0, q);
    for (size_t p = context.find("VAR "); p != std::string::npos; p = context.find("VAR ", p)) {
      Assignment a;
      const std::string var = context.substr(p + 4, 5);
      ASSERT_TRUE(all_chars(var, upper)) << var;
      ASSERT_EQ(context.substr(p + 9, 3), " = ");
      a.var = ids_of(var);
      if (context.compare(p + 12, 4, "VAR ") == 0) {
        const std::string from = context.substr(p + 16, 5);
        ASSERT_TRUE(all_chars(from, upper));
        a.from_var = ids_of(from);
        p += 21;
      } else {
        const std::string v = context.substr(p + 12, 5);
        ASSERT_TRUE(all_chars(v, digit));
        a.value = ids_of(v);
        p += 17;
      }
      ASSERT_EQ(context.substr(p, 2), ". ");
      program.push_back(a);
    }
    ASSERT_EQ(static_cast<int>(program.size()), chains * (hops + 1));
    resolve_chain(program, ids_of(value), hops + 1, e);
  };
}

Oracle vt_token_oracle(int chains, int hops) {
  return [=](const Row& row, Expected& e) {
    const Ids& x = row.tokens;
    ASSERT_EQ(x[0], BOS);
    const int64_t q = std::find(x.begin(), x.end(), QUERY) - x.begin();
    ASSERT_LT(q + 7, static_cast<int64_t>(x.size()));
    const Ids value(x.begin() + q + 1, x.begin() + q + 6);
    for (int32_t d : value) ASSERT_TRUE(d >= 16 && d < 26);
    ASSERT_EQ(x[q + 6], ANSWER);
    e.answer_start = q + 7;
    e.separator = {SEP};
    std::vector<Assignment> program;
    for (int64_t t = 1; t < q;) {
      if (x[t] != NEEDLE) {
        ASSERT_TRUE(is_noise_id(x[t]));
        ++t;
        continue;
      }
      Assignment a;
      ASSERT_TRUE(is_key_id(x[t + 1]));
      ASSERT_EQ(x[t + 2], IS);
      a.var = {x[t + 1]};
      if (is_key_id(x[t + 3])) {
        a.from_var = {x[t + 3]};
        t += 4;
      } else {
        a.value.assign(x.begin() + t + 3, x.begin() + t + 8);
        for (int32_t d : a.value) ASSERT_TRUE(d >= 16 && d < 26);
        t += 8;
      }
      program.push_back(a);
    }
    ASSERT_EQ(static_cast<int>(program.size()), chains * (hops + 1));
    resolve_chain(program, value, hops + 1, e);
  };
}

TEST(LongOracle, VariableTracking) {
  for (const std::string form : {"byte", "token"})
    for (auto ch : std::vector<std::pair<int, int>>{{1, 4}, {3, 2}, {2, 0}}) {
      TaskOptions o;
      o.variable_tracking.form = form;
      o.variable_tracking.chains = ch.first;
      o.variable_tracking.hops = ch.second;
      SCOPED_TRACE(form);
      run_oracle("variable_tracking", o,
                 form == "byte" ? vt_byte_oracle(ch.first, ch.second)
                                : vt_token_oracle(ch.first, ch.second));
      if (HasFatalFailure()) return;
    }
  TaskOptions o;
  o.variable_tracking.haystack = "essay";
  run_oracle("variable_tracking", o, vt_byte_oracle(1, 4));
}

// ---------------------------------------------------------------------------------------
// cwe and fwe: the list parsed into words (as strings of ids), counted.

// Byte lists: leading spaces, then items; token lists: BOS, PADs, then ITEM s s s items.
// Returns the words and where the question starts.
std::vector<Ids> parse_byte_list(const std::string& s, size_t q, bool numbered) {
  std::vector<Ids> words;
  size_t p = 0;
  while (p < q && s[p] == ' ') ++p;
  EXPECT_LT(p, numbered ? 16u : 7u) << "padding longer than one item";
  while (p < q) {
    if (numbered) {
      const std::string num = std::to_string(words.size() + 1) + ". ";
      EXPECT_EQ(s.compare(p, num.size(), num), 0) << "item " << words.size() + 1;
      p += num.size();
    }
    const std::string word = s.substr(p, 6);
    EXPECT_TRUE(all_chars(word, lower)) << word;
    EXPECT_EQ(s[p + 6], numbered ? '\n' : ' ');
    words.push_back(ids_of(word));
    p += 7;
  }
  EXPECT_EQ(p, q);
  return words;
}

std::vector<Ids> parse_token_list(const Ids& x, int64_t q) {
  EXPECT_EQ(x[0], BOS);
  int64_t t = 1;
  while (t < q && x[t] == PAD) ++t;
  EXPECT_LT(t, 5) << "padding longer than one item";
  std::vector<Ids> words;
  for (; t < q; t += 4) {
    EXPECT_EQ(x[t], ITEM);
    const Ids w(x.begin() + t + 1, x.begin() + t + 4);
    for (int32_t s : w) EXPECT_TRUE(is_syllable_id(s));
    words.push_back(w);
  }
  EXPECT_EQ(t, q);
  return words;
}

// Words by count, descending (ties: first appearance), and the counts.
std::vector<std::pair<Ids, int64_t>> ranked(const std::vector<Ids>& words) {
  std::map<Ids, int64_t> count, first;
  for (size_t i = 0; i < words.size(); ++i) {
    if (!count.count(words[i])) first[words[i]] = static_cast<int64_t>(i);
    ++count[words[i]];
  }
  std::vector<std::pair<Ids, int64_t>> out(count.begin(), count.end());
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : first[a.first] < first[b.first];
  });
  return out;
}

// Parses the context of a cwe or fwe row; the question is found by its opening words.
std::vector<Ids> list_words(const Row& row, const std::string& question_head, bool numbered,
                            int64_t& q) {
  if (row.tokens[0] != BOS) {
    q = static_cast<int64_t>(row.text.find(question_head));
    EXPECT_GT(q, 0);
    return parse_byte_list(row.text, q, numbered);
  }
  q = std::find(row.tokens.begin(), row.tokens.end(), QUERY) - row.tokens.begin();
  return parse_token_list(row.tokens, q);
}

Oracle cwe_oracle(int common, int common_freq, int rare_freq) {
  return [=](const Row& row, Expected& e) {
    int64_t q = 0;
    const std::vector<Ids> words = list_words(row, "What are the ", true, q);
    const std::vector<std::pair<Ids, int64_t>> r = ranked(words);
    ASSERT_GE(static_cast<int>(r.size()), common);
    for (int i = 0; i < common; ++i) ASSERT_EQ(r[i].second, common_freq);
    for (size_t i = common; i < r.size(); ++i)  // strictly below every answer word
      ASSERT_LE(r[i].second, rare_freq);
    std::set<Ids> answer_words;
    for (int i = 0; i < common; ++i) answer_words.insert(r[i].first);
    std::set<Ids> seen;
    for (const Ids& w : words)  // order of first appearance
      if (answer_words.count(w) && seen.insert(w).second) e.answers.push_back(w);
    if (row.tokens[0] == BOS) {
      ASSERT_EQ(row.tokens[q + 1], ANSWER);
      e.answer_start = q + 2;
      e.separator = {SEP};
    } else {
      const std::string n = std::to_string(common);
      const std::string question = "What are the " + n +
                                   " most common words in the list above? The " + n +
                                   " most common words in the list above are: ";
      ASSERT_EQ(row.text.substr(q, question.size()), question);
      e.answer_start = q + static_cast<int64_t>(question.size());
      e.separator = ids_of(", ");
    }
  };
}

TEST(LongOracle, CommonWordExtraction) {
  struct Variant {
    int common, common_freq, rare_freq;
  };
  for (const std::string form : {"byte", "token"})
    for (const Variant v : {Variant{10, 30, 3}, Variant{3, 6, 2}, Variant{1, 4, 3}}) {
      TaskOptions o;
      o.cwe.form = form;
      o.cwe.common = v.common;
      o.cwe.common_freq = v.common_freq;
      o.cwe.rare_freq = v.rare_freq;
      SCOPED_TRACE(form + " common " + std::to_string(v.common));
      run_oracle("cwe", o, cwe_oracle(v.common, v.common_freq, v.rare_freq));
      if (HasFatalFailure()) return;
    }
}

Oracle fwe_oracle(int answers) {
  return [=](const Row& row, Expected& e) {
    int64_t q = 0;
    const std::vector<Ids> words = list_words(row, "What are the ", false, q);
    const std::vector<std::pair<Ids, int64_t>> r = ranked(words);
    ASSERT_GT(static_cast<int>(r.size()), 0);
    for (int i = 0; i < answers; ++i) {  // strictly decreasing, strictly above the rest
      ASSERT_LT(i, static_cast<int>(r.size()));
      const int64_t next = i + 1 < static_cast<int>(r.size()) ? r[i + 1].second : 0;
      ASSERT_GT(r[i].second, next) << "rank " << i;
      e.answers.push_back(r[i].first);
    }
    if (row.tokens[0] == BOS) {
      ASSERT_EQ(row.tokens[q + 1], ANSWER);
      e.answer_start = q + 2;
      e.separator = {SEP};
    } else {
      const std::string n = std::to_string(answers);
      const std::string question = "What are the " + n +
                                   " most frequent words in the text above? The " + n +
                                   " most frequent words in the text above, most frequent "
                                   "first, are: ";
      ASSERT_EQ(row.text.substr(q, question.size()), question);
      e.answer_start = q + static_cast<int64_t>(question.size());
      e.separator = ids_of(", ");
    }
  };
}

TEST(LongOracle, FrequentWordExtraction) {
  for (const std::string form : {"byte", "token"})
    for (double alpha : {2.0, 0.5, 6.0})
      for (int answers : {3, 1}) {
        TaskOptions o;
        o.fwe.form = form;
        o.fwe.alpha = alpha;
        o.fwe.answers = answers;
        SCOPED_TRACE(form + " alpha " + std::to_string(alpha));
        run_oracle("fwe", o, fwe_oracle(answers), {257, 1001});
        if (HasFatalFailure()) return;
      }
}

// ---------------------------------------------------------------------------------------
// phonebook: the asked name's line.

void phonebook_byte(const Row& row, Expected& e) {
  const std::string& s = row.text;
  const std::string head = "What is the phone number of ";
  const size_t q = s.find(head);
  ASSERT_NE(q, std::string::npos);
  const size_t mark = s.find("? ", q);
  ASSERT_NE(mark, std::string::npos);
  const std::string asked = s.substr(q + head.size(), mark - q - head.size());
  e.answer_start = static_cast<int64_t>(mark + 2);
  size_t p = 0;
  while (s[p] == ' ') ++p;
  EXPECT_LT(p, 40u);
  std::map<std::string, std::string> book;
  while (p < q) {
    const size_t colon = s.find(": ", p), end = s.find('\n', p);
    ASSERT_TRUE(colon < end && end < q);
    const std::string name = s.substr(p, colon - p);
    const std::string number = s.substr(colon + 2, end - colon - 2);
    const size_t space = name.find(' ');
    ASSERT_NE(space, std::string::npos);
    EXPECT_TRUE(upper(name[0]) && upper(name[space + 1])) << name;
    ASSERT_EQ(number.size(), 12u);
    EXPECT_EQ(number.substr(0, 4), "555-");
    EXPECT_EQ(number[8], '-');
    ASSERT_TRUE(book.emplace(name, number).second) << "name twice: " << name;
    p = end + 1;
  }
  ASSERT_EQ(book.count(asked), 1u) << asked;
  e.answers = {ids_of(book[asked])};
}

void phonebook_token(const Row& row, Expected& e) {
  const Ids& x = row.tokens;
  ASSERT_EQ(x[0], BOS);
  const int64_t q = std::find(x.begin(), x.end(), QUERY) - x.begin();
  ASSERT_EQ(x[q + 3], ANSWER);
  const Ids asked = {x[q + 1], x[q + 2]};
  e.answer_start = q + 4;
  int64_t t = 1;
  while (x[t] == PAD) ++t;
  EXPECT_LT(t, 12);
  std::map<Ids, Ids> book;
  for (; t < q; t += 11) {
    ASSERT_EQ(x[t], ITEM);
    ASSERT_TRUE(is_key_id(x[t + 1]) && is_key_id(x[t + 2]));
    ASSERT_EQ(x[t + 3], IS);
    const Ids number(x.begin() + t + 4, x.begin() + t + 11);
    for (int32_t d : number) ASSERT_TRUE(d >= 16 && d < 26);
    ASSERT_TRUE(book.emplace(Ids{x[t + 1], x[t + 2]}, number).second) << "name twice";
  }
  ASSERT_EQ(t, q);
  ASSERT_EQ(book.count(asked), 1u);
  e.answers = {book[asked]};
}

TEST(LongOracle, Phonebook) {
  for (const std::string form : {"byte", "token"}) {
    TaskOptions o;
    o.phonebook.form = form;
    run_oracle("phonebook", o, form == "byte" ? Oracle(phonebook_byte) : Oracle(phonebook_token));
  }
}

}  // namespace
