#pragma once
// The MPI backend of Communicator: host buffers, any machine. The only unit that
// includes <mpi.h>; the rest of lcr sees the Communicator interface.
#include <memory>

#include "parallel/comm/communicator.hpp"

namespace lcr {

// Initialises MPI if nobody has (MPI_Init_thread, FUNNELED: only the main thread calls
// MPI) and finalises it at scope exit if it initialised it. Create it before Kokkos and
// destroy it after (Kokkos::ScopeGuard inside its scope).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

// A duplicate of MPI_COMM_WORLD (so lcr's tags never collide with another library's)
// with MPI_ERRORS_RETURN, so MPI failures become lcr::Error instead of an abort with a
// generic message. Requires MPI to be initialised (MpiSession).
std::unique_ptr<Communicator> mpi_world();

// Rank and size of MPI_COMM_WORLD; when MPI is not initialised (a tool run outside
// mpirun), the SLURM_PROCID / SLURM_NTASKS variables, else 0 of 1.
int world_rank_hint();
int world_size_hint();

}  // namespace lcr
