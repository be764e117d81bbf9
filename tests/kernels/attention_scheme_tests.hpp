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

#include "kernels/attention_harness.hpp"

namespace lcr::test {

struct NamedCase {
  std::string name;  // gtest-safe: letters, digits, underscores
  Case c;
};

// gtest (and ctest's test names) print a parameter with this instead of its raw bytes.
inline void PrintTo(const NamedCase& c, std::ostream* os) { *os << c.name; }

inline std::string case_name(const ::testing::TestParamInfo<NamedCase>& info) {
  return info.param.name;
}

class AttentionSchemeTest : public ::testing::TestWithParam<NamedCase> {};

// Sizes every scheme is checked at: L = 1, 7, 129, 1000 (not multiples of any tile),
// head widths 16..128, GQA, and position offsets. `base` supplies scheme and options.
std::vector<NamedCase> standard_cases(const std::string& prefix, const AttentionSpec& base);

}  // namespace lcr::test
