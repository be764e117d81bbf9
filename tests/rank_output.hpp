#pragma once
// Output of a multi-rank gtest binary run under mpirun (tests/parallel/mpi_main.cpp,
// tests/cuda/nccl/nccl_main.cpp): rank 0 prints gtest's usual output; every other rank prints
// only its failed assertions, prefixed with its rank, so a failure seen on one rank alone is
// still in the log (the mains also fail the exit code when any rank failed).
#include <gtest/gtest.h>

#include <cstdio>

namespace lcr::test {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  int rank_;
};

// Call after InitGoogleTest: on ranks other than 0 the default printer gives way to
// RankFailurePrinter.
inline void rank_output(int rank) {
  if (rank == 0) return;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new RankFailurePrinter(rank));
}

}  // namespace lcr::test
