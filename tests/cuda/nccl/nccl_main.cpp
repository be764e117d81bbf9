// Test main of the NCCL tests, run under mpirun: MPI outlives Kokkos and the
// communicators, which outlive the tests. Every rank runs every test (collectives need all ranks);
// only rank 0 prints gtest's output, other ranks print their failed assertions with a "[rank r]"
// prefix, and the exit code fails if any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <memory>

#include "../../rank_output.hpp"
#include "cuda_compare.hpp"
#include "nccl_test_env.hpp"
#include "parallel/comm/mpi/mpi_communicator.hpp"

namespace lcr::test {
namespace {
std::unique_ptr<NcclCommunicator> g_nccl;
std::unique_ptr<Communicator> g_mpi;
std::string g_reason;

// Empty when this rank has a GPU of its own (local rank < visible devices).
std::string local_reason() {
  const int devices = cuda_device_count(), local = nccl_local_rank();
  if (devices == 0) return "no CUDA device visible on this node";
  if (local >= devices)
    return "local rank " + std::to_string(local) + " but only " + std::to_string(devices) +
           " GPU(s): the NCCL tests need one GPU per rank";
  return {};
}
}  // namespace

NcclCommunicator* nccl() { return g_nccl.get(); }
const std::string& nccl_skip_reason() { return g_reason; }
Communicator& mpi() { return *g_mpi; }

}  // namespace lcr::test

int main(int argc, char** argv) {
  using namespace lcr::test;
  lcr::MpiSession session(&argc, &argv);
  // The CUDA attention API reuses the CPU scheme units (host-side tables), which are
  // Kokkos code: Kokkos is up for the whole run, inside MPI.
  Kokkos::ScopeGuard kokkos(argc, argv);
  int rank = 0, failed = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  compare_quiet() = rank != 0;
  ::testing::InitGoogleTest(&argc, argv);
  g_mpi = lcr::mpi_world();
  // One decision for all ranks: any rank without a GPU makes every rank skip.
  g_reason = local_reason();
  int ok = g_reason.empty() ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all)
    g_nccl = lcr::nccl_world();
  else if (g_reason.empty())
    g_reason = "another rank has no GPU of its own";
  if (rank == 0 && !all) std::printf("NCCL tests skip: %s\n", g_reason.c_str());
  rank_output(rank);
  const int local = RUN_ALL_TESTS();
  MPI_Allreduce(&local, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  g_nccl.reset();
  g_mpi.reset();
  return failed;
}
