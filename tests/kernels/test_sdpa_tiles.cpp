// The SDPA kernels' team helpers that only a GPU build runs, checked here with a stand-in
// team member: every (team rank, team size) visits its share of a tile exactly once.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/attention/kokkos/sdpa_rows.hpp"

namespace lcr::test {
namespace {

struct FakeMember {
  int rank, size;
  int team_rank() const { return rank; }
  int team_size() const { return size; }
};

TEST(SdpaTiles, ForEachElementVisitsEveryElementOnceWithItsRowAndColumn) {
  for (int size : {1, 3, 32, 64, 128, 256})
    for (int rows : {0, 1, 7, 32})
      for (int cols : {1, 2, 17, 33, 64, 65, 129}) {
        std::vector<int> seen(size_t(rows) * cols, 0);
        for (int rank = 0; rank < size; ++rank)
          sdpa_detail::for_each_element(
              FakeMember{rank, size}, rows, cols, [&](int e, int r, int d) {
                ASSERT_EQ(e, r * cols + d)
                    << "size " << size << " rank " << rank << " cols " << cols;
                ASSERT_LT(d, cols);
                ASSERT_EQ(e % size, rank);
                ++seen[e];
              });
        for (size_t e = 0; e < seen.size(); ++e)
          ASSERT_EQ(seen[e], 1) << "element " << e << " of " << rows << " x " << cols << ", team "
                                << size;
      }
}

}  // namespace
}  // namespace lcr::test
