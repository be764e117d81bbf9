#pragma once
// Run-time choice of the communicator backend for the world of an mpirun job:
//   "mpi"   host buffers, every build (comm/mpi/)
//   "nccl"  device buffers, one process per GPU (comm/nccl/; only in a build configured
//           with -DLCR_ENABLE_CUDA=ON -DLCR_ENABLE_NCCL=ON)
// Both need MPI initialised (lcr::MpiSession): NCCL is bootstrapped through it.
#include <memory>
#include <string>

#include "parallel/comm/communicator.hpp"

namespace lcr {

// True when this build has the NCCL backend.
bool nccl_available();

// The world communicator of the named backend. An unknown name, or "nccl" in a build
// without NCCL, is an Error that lists the choices and how to get NCCL.
std::unique_ptr<Communicator> make_world_communicator(const std::string& backend);

// The backend named by the environment variable LCR_COMM_BACKEND, "mpi" when unset.
std::string comm_backend_from_env();

}  // namespace lcr
