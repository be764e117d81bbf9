#include "core/train/world.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/base/error.hpp"
#include "parallel/comm/backend.hpp"
#include "parallel/comm/mpi/mpi_communicator.hpp"

namespace lcr::train {

std::unique_ptr<Communicator> world_communicator() {
  const std::string backend = comm_backend_from_env();
  require(backend != "nccl",
          "LCR_COMM_BACKEND=nccl: lcr's world communicator carries host buffers (run-directory "
          "agreement, metrics, gradients of the CPU model), which the NCCL backend cannot move; "
          "unset LCR_COMM_BACKEND (or set it to mpi). GPU training (train.device = \"cuda\") "
          "makes its own NCCL communicator for its device buffers");
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) return make_world_communicator(backend);
  return std::make_unique<SelfCommunicator>();
}

Request SelfCommunicator::isend(const void*, size_t, DType, int dest, int) {
  throw_error("one-rank communicator: no rank ", dest, " to send to");
}

Request SelfCommunicator::irecv(void*, size_t, DType, int src, int) {
  throw_error("one-rank communicator: no rank ", src, " to receive from");
}

void SelfCommunicator::allgather(const void* send, void* recv, size_t count, DType t) {
  if (send != recv) std::memmove(recv, send, count * dtype_size(t));
}

std::unique_ptr<Communicator> SelfCommunicator::split(int, int) const {
  return std::make_unique<SelfCommunicator>();
}

void SelfCommunicator::abort(const std::string& message) const {
  std::fprintf(stderr, "lcr rank 0: fatal: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

double allreduce_max(Communicator& comm, double x) {
  if (comm.size() == 1) return x;
  std::vector<double> all(size_t(comm.size()));
  comm.allgather(&x, all.data(), 1);
  double m = all[0];
  for (double a : all) m = a > m ? a : m;
  return m;
}

}  // namespace lcr::train
