// Test main for multi-rank tests, run under mpirun: MPI outlives Kokkos, which outlives
// the tests. Every rank runs every test (collectives need all ranks); only rank 0 prints
// gtest's output, and the exit code is failing if any rank failed, so a failure seen only
// on another rank still fails the ctest entry (that rank's assertion messages are printed
// with a "[rank r]" prefix, tests/rank_output.hpp).
#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>

#include "../rank_output.hpp"  // tests/rank_output.hpp (also built from other folders)
#include "parallel/comm/mpi/mpi_communicator.hpp"

int main(int argc, char** argv) {
  lcr::MpiSession mpi(&argc, &argv);
  int rank = 0, failed = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    lcr::test::rank_output(rank);
    const int local = RUN_ALL_TESTS();
    MPI_Allreduce(&local, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  return failed;
}
