// Long-context tasks against an independent oracle, niah_*: every generated sequence is
// parsed from scratch by the documented layout (docs/data.md, "Long-context evaluation
// tasks"): the needles found in the context, the key(s) read from the question, the
// expected answers computed from those alone, then the answer region, the labels and the
// spans checked against them (longctx_oracle.hpp). Nothing here calls the generators'
// internals.
#include <map>
#include <set>

#include "longctx_oracle.hpp"

namespace {

using namespace lcr_test;

// ---------------------------------------------------------------------------------------
// niah

struct Needle {
  std::string key, value;
};

std::vector<std::string> split_keys(const std::string& list) {  // "a, b and c"
  std::vector<std::string> keys;
  size_t p = 0;
  for (size_t c; (c = list.find(", ", p)) != std::string::npos; p = c + 2)
    keys.push_back(list.substr(p, c - p));
  const std::string rest = list.substr(p);
  const size_t a = rest.find(" and ");
  if (a == std::string::npos) {
    keys.push_back(rest);
  } else {
    keys.push_back(rest.substr(0, a));
    keys.push_back(rest.substr(a + 5));
  }
  return keys;
}

void check_value_format(const std::string& kind, const std::string& v) {
  if (kind == "number") {
    EXPECT_TRUE(v.size() == 7 && all_chars(v, digit) && v[0] != '0') << v;
  } else if (kind == "uuid") {
    ASSERT_EQ(v.size(), 36u) << v;
    for (size_t i = 0; i < 36; ++i)
      if (i == 8 || i == 13 || i == 18 || i == 23)
        EXPECT_EQ(v[i], '-');
      else
        EXPECT_TRUE(digit(v[i]) || (v[i] >= 'a' && v[i] <= 'f')) << v;
  } else {
    EXPECT_TRUE(all_chars(v, lower)) << v;
  }
}

// n_needles: how many needles the options promise; several: the multi-answer question.
Oracle niah_byte_oracle(const std::string& task, const std::string& kind, int n_needles) {
  return [=](const Row& row, Expected& e) {
    const std::string& s = row.text;
    const bool several = task == "niah_multivalue" || task == "niah_multiquery";
    const std::string qhead = several ? "What are all the special magic " + kind + "s for "
                                      : "What is the special magic " + kind + " for ";
    const size_t q = s.find(qhead);
    ASSERT_NE(q, std::string::npos);
    ASSERT_EQ(s.find(qhead, q + 1), std::string::npos);
    const size_t k0 = q + qhead.size();
    const size_t k1 = s.find(" mentioned in the provided text? ", k0);
    ASSERT_NE(k1, std::string::npos);
    const std::string list = s.substr(k0, k1 - k0);
    const std::string tail = " mentioned in the provided text? The special magic " + kind +
                             (several ? "s" : "") + " for " + list +
                             " mentioned in the provided text " + (several ? "are " : "is ");
    ASSERT_EQ(s.substr(k1, tail.size()), tail);
    e.answer_start = static_cast<int64_t>(k1 + tail.size());
    e.separator = ids_of(", ");

    const std::string context = s.substr(0, q);
    const std::string head = "One of the special magic " + kind + "s for ";
    std::vector<Needle> needles;
    for (size_t p = context.find(head); p != std::string::npos; p = context.find(head, p + 1)) {
      const size_t a = p + head.size(), b = context.find(" is: ", a);
      ASSERT_NE(b, std::string::npos);
      const size_t c = context.find(". ", b + 5);
      ASSERT_NE(c, std::string::npos);
      needles.push_back({context.substr(a, b - a), context.substr(b + 5, c - b - 5)});
      check_value_format(kind, needles.back().value);
      EXPECT_TRUE(all_chars(needles.back().key, [](char ch) { return lower(ch) || ch == '-'; }));
    }
    ASSERT_EQ(static_cast<int>(needles.size()), n_needles);
    const std::vector<std::string> asked = split_keys(list);
    for (const std::string& k : asked) {
      std::vector<std::string> found;
      for (const Needle& n : needles)
        if (n.key == k) found.push_back(n.value);
      if (task == "niah_multivalue") {
        ASSERT_EQ(static_cast<int>(found.size()), n_needles);
      } else {
        ASSERT_EQ(found.size(), 1u) << "key " << k;
      }
      for (const std::string& v : found) e.answers.push_back(ids_of(v));
    }
    if (task == "niah_multiquery") {
      EXPECT_EQ(static_cast<int>(asked.size()), n_needles);
    } else {
      EXPECT_EQ(asked.size(), 1u);
    }
  };
}

Oracle niah_token_oracle(const std::string& task, const std::string& kind, int n_needles) {
  return [=](const Row& row, Expected& e) {
    const Ids& x = row.tokens;
    ASSERT_EQ(x[0], BOS);
    const int64_t q = std::find(x.begin(), x.end(), QUERY) - x.begin();
    ASSERT_LT(q, static_cast<int64_t>(x.size()));
    const int64_t a = std::find(x.begin() + q, x.end(), ANSWER) - x.begin();
    ASSERT_LT(a, static_cast<int64_t>(x.size()));
    const Ids asked(x.begin() + q + 1, x.begin() + a);
    for (int32_t k : asked) ASSERT_TRUE(is_key_id(k));
    e.answer_start = a + 1;
    e.separator = {SEP};
    std::vector<std::pair<int32_t, Ids>> needles;
    for (int64_t t = 1; t < q;) {
      if (x[t] != NEEDLE) {
        ASSERT_TRUE(is_noise_id(x[t])) << "t " << t << ": " << x[t];
        ++t;
        continue;
      }
      ASSERT_TRUE(is_key_id(x[t + 1]));
      ASSERT_EQ(x[t + 2], IS);
      int64_t v = t + 3;
      while (v < q && (is_digit_id(x[v]) || x[v] == DASH || is_value_word_id(x[v]))) ++v;
      const Ids value(x.begin() + t + 3, x.begin() + v);
      if (kind == "number") {
        ASSERT_EQ(value.size(), 7u);
        for (int32_t d : value) ASSERT_TRUE(d >= 16 && d < 26);
        EXPECT_NE(value[0], 16);
      } else if (kind == "uuid") {
        ASSERT_EQ(value.size(), 36u);
        for (size_t i = 0; i < 36; ++i)
          EXPECT_TRUE((i == 8 || i == 13 || i == 18 || i == 23) ? value[i] == DASH
                                                                : is_digit_id(value[i]));
      } else {
        ASSERT_EQ(value.size(), 1u);
        ASSERT_TRUE(is_value_word_id(value[0]));
      }
      needles.push_back({x[t + 1], value});
      t = v;
    }
    ASSERT_EQ(static_cast<int>(needles.size()), n_needles);
    for (int32_t k : asked) {
      int found = 0;
      for (const auto& n : needles)
        if (n.first == k) ++found, e.answers.push_back(n.second);
      ASSERT_EQ(found, task == "niah_multivalue" ? n_needles : 1);
    }
    EXPECT_EQ(static_cast<int>(asked.size()), task == "niah_multiquery" ? n_needles : 1);
  };
}

void run_niah(const std::string& task, int n_needles,
              const std::function<void(NiahOptions&)>& set) {
  for (const std::string form : {"byte", "token"})
    for (const std::string kind : {"number", "uuid", "word"}) {
      TaskOptions o;
      NiahOptions& n = task == "niah_single"       ? o.niah_single
                       : task == "niah_multikey"   ? o.niah_multikey
                       : task == "niah_multivalue" ? o.niah_multivalue
                                                   : o.niah_multiquery;
      n.form = form;
      n.value = kind;
      set(n);
      SCOPED_TRACE(form + " " + kind);
      run_oracle(task, o,
                 form == "byte" ? niah_byte_oracle(task, kind, n_needles)
                                : niah_token_oracle(task, kind, n_needles));
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(LongOracle, NiahSingle) {
  run_niah("niah_single", 1, [](NiahOptions&) {});
}
TEST(LongOracle, NiahSingleEssayHaystack) {
  TaskOptions o;
  o.niah_single.haystack = "essay";
  run_oracle("niah_single", o, niah_byte_oracle("niah_single", "number", 1));
  // Held-out text: numbered sentences, so that the window is visibly cut from it.
  std::string text;
  for (int i = 0; text.size() < 20000; ++i)
    text += "This is held-out sentence " + std::to_string(i) + " of the corpus. ";
  o.niah_single.haystack_text = std::make_shared<const std::string>(text);
  run_oracle("niah_single", o, niah_byte_oracle("niah_single", "number", 1));
}
TEST(LongOracle, NiahMultikey) {
  run_niah("niah_multikey", 4, [](NiahOptions&) {});
  run_niah("niah_multikey", 8, [](NiahOptions& n) { n.distractors = 7; });
}
TEST(LongOracle, NiahMultivalue) {
  run_niah("niah_multivalue", 4, [](NiahOptions&) {});
  run_niah("niah_multivalue", 2, [](NiahOptions& n) { n.values = 2; });
}
TEST(LongOracle, NiahMultiquery) {
  run_niah("niah_multiquery", 4, [](NiahOptions&) {});
  run_niah("niah_multiquery", 3, [](NiahOptions& n) { n.queries = 3; });
}

}  // namespace
