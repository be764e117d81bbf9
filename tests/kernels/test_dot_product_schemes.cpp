// NoPE, ALiBi and FoX (the schemes with no lanes) and the numerics options, through the
// shared attention suite.
#include "kernels/attention_scheme_tests.hpp"

namespace lcr::test {
namespace {

std::vector<NamedCase> cases() {
  std::vector<NamedCase> all;
  auto add = [&](const std::string& prefix, AttentionSpec s) {
    for (auto& c : standard_cases(prefix, s)) all.push_back(c);
  };
  AttentionSpec s;
  s.scheme = Scheme::NoPE;
  add("nope", s);
  s.scheme = Scheme::ALiBi;
  add("alibi", s);
  s.scheme = Scheme::FoX;
  add("fox", s);
  s.scheme = Scheme::NoPE;
  s.numerics.sink = true;
  add("nope_sink", s);
  s.numerics = {};
  s.numerics.softcap = 5.0;
  add("nope_softcap", s);
  s.numerics = {};
  s.numerics.qk_norm = true;
  add("nope_qknorm", s);
  s.scheme = Scheme::ALiBi;
  s.numerics = {};
  s.numerics.qk_norm = s.numerics.sink = true;
  s.numerics.softcap = 4.0;
  add("alibi_all_numerics", s);
  // The GPU form: every option through its transposed backward (FoX: the bias lanes).
  for (const auto& c : in_gpu_form(standard_cases("alibi_all_numerics", s))) all.push_back(c);
  // The CPU form's two-pass backward (BackwardQ: dQ and dbias_q by query tile).
  for (const auto& c : in_two_pass(standard_cases("alibi_all_numerics", s))) all.push_back(c);
  s.scheme = Scheme::FoX;
  s.numerics = {};
  for (const auto& c : in_gpu_form(standard_cases("fox", s))) all.push_back(c);
  for (const auto& c : in_two_pass(standard_cases("fox", s))) all.push_back(c);
  return all;
}

INSTANTIATE_TEST_SUITE_P(DotProduct, AttentionSchemeTest, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace lcr::test
