#pragma once
// The per-scheme attention test suite. A scheme's test file only lists its Cases:
//   INSTANTIATE_TEST_SUITE_P(RoPE, AttentionSchemeTest, ::testing::ValuesIn(my_cases()),
//                            lcr::test::case_name);
// and gets, for every case: float64 and float32 forward against the float64 reference,
// every gradient against the reference's exact directional derivative, and (for small
// cases) every gradient element against central finite differences.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "kernels/attention/kokkos/sdpa.hpp"
#include "kernels/attention_harness.hpp"

namespace lcr::test {

struct NamedCase {
  std::string name;  // gtest-safe: letters, digits, underscores
  Case c;
  SdpaForm form = SdpaForm::Automatic;  // the SDPA kernels' form this case pins (sdpa_use_form)
};

// gtest (and ctest's test names) print a parameter with this instead of its raw bytes.
inline void PrintTo(const NamedCase& c, std::ostream* os) { *os << c.name; }

inline std::string case_name(const ::testing::TestParamInfo<NamedCase>& info) {
  return info.param.name;
}

class AttentionSchemeTest : public ::testing::TestWithParam<NamedCase> {
 protected:
  void SetUp() override {
    if (GetParam().form != SdpaForm::Automatic) sdpa_use_form(GetParam().form);
  }
  void TearDown() override { sdpa_use_form(saved_); }
  SdpaForm saved_ = sdpa_form();
};

// Sizes every scheme is checked at: L = 1, 7, 129, 1000 (not multiples of any tile),
// head widths 16..128, GQA, and position offsets. `base` supplies scheme and options.
std::vector<NamedCase> standard_cases(const std::string& prefix, const AttentionSpec& base);

// The same cases, named <name>_gpu_form, run through the kernels' GPU form: a CPU build
// checks the form a GPU runs (its tiles, its transposed backward) on every CI run.
std::vector<NamedCase> in_gpu_form(std::vector<NamedCase> cases);

// The same cases, named <name>_two_pass, with the CPU form's two-pass backward, which a
// rank with more threads than KV heads runs (CI's Serial build would otherwise run only the
// one-pass backward).
std::vector<NamedCase> in_two_pass(std::vector<NamedCase> cases);

}  // namespace lcr::test
