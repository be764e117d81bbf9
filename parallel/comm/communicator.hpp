#pragma once
// The communicator interface every parallel component talks to. It is free of MPI (and
// NCCL) types so that a backend is chosen at run time: the MPI backend (comm/mpi/) moves
// host buffers; the NCCL backend (with the CUDA build) will move device buffers on its
// own stream. Callers ask buffer_space() where their buffers must live and stage through
// a host mirror when the backend wants host memory (the ring does, see ring/buffers.hpp).
//
// Point-to-point messages are non-blocking and matched by (peer, tag) in posting order.
// A receive names the exact element count it expects: wait() throws an lcr::Error when
// the message that arrived has a different size, so a schedule bug is a clear error
// instead of silent corruption or a hang further on.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lcr {

enum class DType { F32, F64, I32, I64, U8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::F64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::I32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::I64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::U8;
}

// Where a backend wants the buffers it is handed.
enum class BufferSpace { Host, Device };

// Backend-owned state of one pending operation (an MPI_Request, an NCCL event, ...).
struct RequestState {
  virtual ~RequestState() = default;
};

// Handle of one non-blocking send or receive. Move-only; complete it with
// Communicator::wait. A request destroyed while pending (stack unwinding after an error)
// never blocks: the backend's RequestState destructor cancels a pending receive (its
// buffer is then no longer touched) and detaches a pending send (which then ends with the
// job: errors end in Communicator::abort, see run_or_abort).
class Request {
 public:
  Request() = default;
  explicit Request(std::unique_ptr<RequestState> s) : state_(std::move(s)) {}
  bool pending() const { return state_ != nullptr; }
  RequestState* state() const { return state_.get(); }
  void reset() { state_.reset(); }

 private:
  std::unique_ptr<RequestState> state_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual BufferSpace buffer_space() const = 0;
  virtual std::string backend_name() const = 0;

  // count elements of type t. The buffer must stay valid (and, for sends, unmodified)
  // until wait() returns.
  virtual Request isend(const void* buf, size_t count, DType t, int dest, int tag) = 0;
  virtual Request irecv(void* buf, size_t count, DType t, int src, int tag) = 0;
  // Completes the request. Throws an Error naming peer, tag and both sizes when a
  // received message does not have the expected count.
  virtual void wait(Request& r) = 0;
  // Drives progress without blocking; true once the request has completed (it is then
  // still to be passed to wait, which returns at once and does the size check).
  virtual bool test(Request& r) = 0;

  // In-place sum over all ranks.
  virtual void allreduce_sum(void* buf, size_t count, DType t) = 0;
  // recv holds size() * count elements: rank p's send block at offset p * count.
  virtual void allgather(const void* send, void* recv, size_t count, DType t) = 0;
  virtual void barrier() = 0;

  // A new communicator over the ranks passing the same color, ordered by key.
  virtual std::unique_ptr<Communicator> split(int color, int key) const = 0;

  // Prints "lcr rank R: fatal: message" on this rank and ends the whole job (every rank),
  // so that no peer is left waiting for a message that will never come.
  [[noreturn]] virtual void abort(const std::string& message) const = 0;

  // Typed conveniences.
  template <class T>
  Request isend(const T* buf, size_t count, int dest, int tag) {
    return isend(static_cast<const void*>(buf), count, dtype_of<T>(), dest, tag);
  }
  template <class T>
  Request irecv(T* buf, size_t count, int src, int tag) {
    return irecv(static_cast<void*>(buf), count, dtype_of<T>(), src, tag);
  }
  template <class T>
  void allreduce_sum(T* buf, size_t count) {
    allreduce_sum(static_cast<void*>(buf), count, dtype_of<T>());
  }
  template <class T>
  void allgather(const T* send, T* recv, size_t count) {
    allgather(static_cast<const void*>(send), static_cast<void*>(recv), count, dtype_of<T>());
  }
  void wait_all(std::vector<Request>& rs) {
    for (auto& r : rs)
      if (r.pending()) wait(r);
  }
};

// Runs fn; an exception escaping it (an lcr::Error from a mismatched message, a shape
// check, anything) ends the job through comm.abort with the exception's message, so a
// failing rank never leaves its peers blocked in a receive.
template <class F>
void run_or_abort(const Communicator& comm, F&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    comm.abort(e.what());
  } catch (...) {
    comm.abort("unknown exception");
  }
}

}  // namespace lcr
