#pragma once
// Ring message buffers. Kernels read and write a buffer in the default memory space; a
// backend that moves host buffers (MPI) gets a host mirror when that space is not
// host-accessible (a CUDA build), a backend that moves device buffers (NCCL) gets the
// device buffer itself. On a host build the mirror is the buffer: no copies.
#include <utility>

#include "kernels/base/tensor.hpp"
#include "parallel/comm/communicator.hpp"

namespace lcr {

template <class T>
class CommBuffer {
 public:
  CommBuffer() = default;
  CommBuffer(int64_t capacity, BufferSpace space) : dev_("lcr::ring_buffer", size_t(capacity)) {
    staged_ = space == BufferSpace::Host &&
              !Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;
    if (staged_) host_ = View1<T, HostSpace>("lcr::ring_buffer_host", size_t(capacity));
  }

  T* data() const { return dev_.data(); }                                // for kernels
  T* comm_data() const { return staged_ ? host_.data() : dev_.data(); }  // for the backend
  int64_t capacity() const { return int64_t(dev_.extent(0)); }

  // Before a send of the first n elements: kernels done, data where the backend reads it.
  void to_comm(int64_t n) const {
    Kokkos::fence();
    if (staged_) Kokkos::deep_copy(head(host_, n), head(dev_, n));
  }
  // After a receive of n elements completed.
  void from_comm(int64_t n) const {
    if (staged_) Kokkos::deep_copy(head(dev_, n), head(host_, n));
  }
  void zero(int64_t n) const { Kokkos::deep_copy(head(dev_, n), T(0)); }

  void swap(CommBuffer& o) {
    std::swap(dev_, o.dev_);
    std::swap(host_, o.host_);
    std::swap(staged_, o.staged_);
  }

 private:
  template <class V>
  static auto head(const V& v, int64_t n) {
    return Kokkos::subview(v, std::make_pair(size_t(0), size_t(n)));
  }
  View1<T> dev_;
  View1<T, HostSpace> host_;
  bool staged_ = false;
};

// In-place sum of a device vector over comm, staged through the host when needed.
template <class T>
void allreduce_view(Communicator& comm, const View1<T>& v) {
  if (v.extent(0) == 0) return;
  Kokkos::fence();
  const bool staged =
      comm.buffer_space() == BufferSpace::Host &&
      !Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, MemSpace>::accessible;
  if (!staged) {
    comm.allreduce_sum(v.data(), v.extent(0));
    return;
  }
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  comm.allreduce_sum(h.data(), h.extent(0));
  Kokkos::deep_copy(v, h);
}

}  // namespace lcr
