#pragma once
// The alternating group A5 (the 60 even permutations of {0, 1, 2, 3, 4}), exactly.
//
// Element order: the even permutations in lexicographic order of their one-line notation
// [p(0), p(1), p(2), p(3), p(4)]; index 0 is the identity. Product convention: "a then b",
// (a * b)(i) = b(a(i)), so the running product of a word g_1 g_2 ... g_t is the
// permutation that applies g_1 first and g_t last.
#include <array>
#include <cstdint>

namespace lcr::tasks::a5 {

constexpr int kOrder = 60;
using Perm = std::array<int8_t, 5>;

// Element `index` in [0, 60) as a permutation.
const Perm& element(int index);
// Index of a permutation (which must be even); throws for an odd one.
int index_of(const Perm& p);
// Index of "a then b".
int multiply(int a, int b);

}  // namespace lcr::tasks::a5
