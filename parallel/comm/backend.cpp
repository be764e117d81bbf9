#include "parallel/comm/backend.hpp"

#include <cstdlib>

#include "kernels/base/error.hpp"
#include "parallel/comm/mpi/mpi_communicator.hpp"
#ifdef LCR_HAVE_NCCL
#include "parallel/comm/nccl/nccl_communicator.hpp"
#endif

namespace lcr {

bool nccl_available() {
#ifdef LCR_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_world_communicator(const std::string& backend) {
  if (backend == "mpi") return mpi_world();
  if (backend == "nccl") {
#ifdef LCR_HAVE_NCCL
    return nccl_world();
#else
    throw_error(
        "communicator backend 'nccl' is not in this build of lcr; reconfigure with "
        "-DLCR_ENABLE_CUDA=ON -DLCR_ENABLE_NCCL=ON (docs/cuda.md) or use the 'mpi' backend");
#endif
  }
  throw_error("unknown communicator backend '", backend, "' (valid: mpi, nccl",
              nccl_available() ? "" : " [not built]", ")");
}

std::string comm_backend_from_env() {
  const char* v = std::getenv("LCR_COMM_BACKEND");
  return v && *v ? std::string(v) : std::string("mpi");
}

}  // namespace lcr
