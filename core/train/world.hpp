#pragma once
// The trainer's communicators: MPI's world when a launcher started lcr (main.cpp brought
// MPI up), otherwise a one-rank communicator, so a plain `lcr train` needs no mpirun and
// runs the same code path (its all-reduces are no-ops).
#include <memory>

#include "kernels/base/tensor.hpp"
#include "parallel/comm/communicator.hpp"

namespace lcr::train {

// The world communicator when MPI is initialised (MPI, host buffers), else a
// SelfCommunicator. Its traffic is host memory (run-directory agreement, metrics, the CPU
// model's gradients, scaling points), so LCR_COMM_BACKEND=nccl, whose backend moves only
// device buffers, is an Error that says so; GPU training makes its own NCCL communicator
// for its device buffers (core/train/gpu_engine.cpp). Other names: make_world_communicator.
std::unique_ptr<Communicator> world_communicator();

// A communicator of one rank: collectives return their input; point-to-point messages
// have no peer and are an Error (the ring is never used with one rank).
class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  BufferSpace buffer_space() const override { return BufferSpace::Host; }
  std::string backend_name() const override { return "self"; }
  Request isend(const void*, size_t, DType, int dest, int) override;
  Request irecv(void*, size_t, DType, int src, int) override;
  void wait(Request&) override {}
  bool test(Request&) override { return true; }
  void allreduce_sum(void*, size_t, DType) override {}
  void allgather(const void* send, void* recv, size_t count, DType t) override;
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) const override;
  [[noreturn]] void abort(const std::string& message) const override;
};

// In-place sum of a Kokkos view over comm, staged through host memory when the backend
// wants host buffers and the view lives elsewhere.
template <class V>
void allreduce_view(Communicator& comm, const V& v) {
  if (comm.size() == 1) return;
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  comm.allreduce_sum(h.data(), h.size());
  Kokkos::deep_copy(v, h);
}

// Max over the ranks of comm (an allgather: the backend reduces by sum only).
double allreduce_max(Communicator& comm, double x);

}  // namespace lcr::train
