// The NCCL backend (nccl_communicator.hpp states the contract). Bootstrapped and
// size-checked through MPI; the data moves on the GPU through NCCL on one stream.
#include "parallel/comm/nccl/nccl_communicator.hpp"

#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/base/error.hpp"

namespace lcr {
namespace {

void check_nccl(ncclResult_t r, const char* what, const char* file, int line) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  throw_error("NCCL error at ", file, ":", line, ": ", what, " -> ", ncclGetErrorString(r),
              last && *last ? std::string(" (") + last + ")" : std::string());
}
#define LCR_NCCL_CHECK(expr) check_nccl((expr), #expr, __FILE__, __LINE__)

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  throw_error("MPI ", what, " failed (NCCL backend bootstrap/headers): ", std::string(buf, len));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::I32:
      return ncclInt32;
    case DType::I64:
      return ncclInt64;
    case DType::U8:
      return ncclUint8;
  }
  return ncclUint8;
}

using EventPtr = std::shared_ptr<std::remove_pointer_t<cudaEvent_t>>;
EventPtr record_event(cudaStream_t s) {
  cudaEvent_t e = nullptr;
  LCR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  EventPtr ev(e, [](cudaEvent_t x) { cudaEventDestroy(x); });
  LCR_CUDA_CHECK(cudaEventRecord(e, s));
  return ev;
}

// What each side of a point-to-point message tells its peer through MPI: the message's
// index on the (sender -> receiver) channel, its size in bytes and the caller's tag.
struct Header {
  int64_t index = -1, bytes = 0, tag = 0;
};
// MPI tags on the communicator's private duplicate: the sender's header travels on
// kHdrSend, the receiver's on kHdrRecv; MPI keeps each (peer, tag) channel in order, so
// the k-th send from A to B meets the k-th receive of B from A, as in NCCL.
constexpr int kHdrSend = 1, kHdrRecv = 2;

struct Op {
  bool is_recv = false;
  void* buf = nullptr;
  size_t count = 0;
  DType type = DType::U8;
  int peer = -1, rank = -1;
  Header mine, theirs;
  MPI_Request hdr_out = MPI_REQUEST_NULL, hdr_in = MPI_REQUEST_NULL;
  bool issued = false;
  EventPtr done;      // recorded on the stream after the group that carried the op
  std::string error;  // header mismatch: the op was left out of the group on both ranks
};

std::string mismatch(const Op& op) {
  const int64_t es = int64_t(dtype_size(op.type));
  const auto count_of = [&](int64_t bytes) {
    return bytes % es == 0 ? std::to_string(bytes / es)
                           : std::to_string(bytes) + " bytes (not a whole number of values)";
  };
  const std::string me = "rank " + std::to_string(op.rank), peer = std::to_string(op.peer);
  if (op.theirs.tag != op.mine.tag)
    return "message order mismatch: " + me + "'s " + (op.is_recv ? "receive" : "send") + " #" +
           std::to_string(op.mine.index) + (op.is_recv ? " from" : " to") + " rank " + peer +
           " has tag " + std::to_string(op.mine.tag) +
           " but the peer's matching operation has tag " + std::to_string(op.theirs.tag) +
           "; NCCL matches messages between two ranks in posting order, so post them in the same "
           "order on both ranks";
  if (op.is_recv)
    return "message size mismatch: " + me + " expected " + std::to_string(op.count) + " " +
           dtype_name(op.type) + " values from rank " + peer + " (tag " +
           std::to_string(op.mine.tag) + ") but " + count_of(op.theirs.bytes) +
           " arrived; the ranks disagree on the ring schedule or the sequence layout";
  return "message size mismatch: " + me + " sent " + std::to_string(op.count) + " " +
         dtype_name(op.type) + " values to rank " + peer + " (tag " + std::to_string(op.mine.tag) +
         ") but it expects " + count_of(op.theirs.bytes) +
         "; the ranks disagree on the ring schedule or the sequence layout";
}

class NcclCommImpl;

struct NcclRequestState final : RequestState {
  std::shared_ptr<Op> op;
  NcclCommImpl* owner = nullptr;
  ~NcclRequestState() override;
};

class NcclCommImpl final : public NcclCommunicator {
 public:
  // Collective over c (takes ownership of c).
  NcclCommImpl(MPI_Comm c, int device) : mpi_(c), device_(device) {
    check_mpi(MPI_Comm_set_errhandler(mpi_, MPI_ERRORS_RETURN), "Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(mpi_, &rank_), "Comm_rank");
    check_mpi(MPI_Comm_size(mpi_, &size_), "Comm_size");
    // A rank that cannot bring its GPU up must not leave the others inside
    // ncclCommInitRank: agree on success first, then every rank throws or none does.
    std::string err;
    try {
      LCR_CUDA_CHECK(cudaSetDevice(device_));
      // Highest priority: NCCL's few transfer blocks get the next free SM ahead of the
      // thousands of queued attention blocks they overlap with, so a ring hop is not
      // delayed until the compute kernel drains.
      int least = 0, greatest = 0;
      LCR_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      LCR_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
    } catch (const std::exception& e) {
      err = e.what();
    }
    int ok = err.empty() ? 1 : 0, all_ok = 0;
    check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, mpi_), "Allreduce");
    if (!all_ok)
      throw_error("NCCL communicator: rank ", rank_, " (GPU ", device_, ") ",
                  err.empty() ? "is fine, but another rank could not set up its GPU" : err);
    ncclUniqueId id{};
    if (rank_ == 0) LCR_NCCL_CHECK(ncclGetUniqueId(&id));
    check_mpi(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, mpi_), "Bcast");
    LCR_NCCL_CHECK(ncclCommInitRank(&nccl_, size_, id, rank_));
  }

  ~NcclCommImpl() override {
    for (auto& op : pending_) cancel_headers(*op);
    pending_.clear();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (nccl_) {
      cudaSetDevice(device_);
      if (cudaStreamSynchronize(stream_) == cudaSuccess)
        ncclCommDestroy(nccl_);
      else
        ncclCommAbort(nccl_);
    }
    if (stream_) cudaStreamDestroy(stream_);
    if (!finalized && mpi_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  BufferSpace buffer_space() const override { return BufferSpace::Device; }
  std::string backend_name() const override { return "nccl"; }
  int device() const override { return device_; }
  cudaStream_t stream() const override { return stream_; }

  Request isend(const void* buf, size_t count, DType t, int dest, int tag) override {
    return post(false, const_cast<void*>(buf), count, t, dest, tag);
  }
  Request irecv(void* buf, size_t count, DType t, int src, int tag) override {
    return post(true, buf, count, t, src, tag);
  }

  void flush() override {
    if (pending_.empty()) return;
    std::vector<std::shared_ptr<Op>> ops;
    ops.swap(pending_);
    for (auto& op : ops) {
      check_mpi(MPI_Wait(&op->hdr_in, MPI_STATUS_IGNORE), "Wait (message header)");
      check_mpi(MPI_Wait(&op->hdr_out, MPI_STATUS_IGNORE), "Wait (message header)");
      if (op->theirs.bytes != op->mine.bytes || op->theirs.tag != op->mine.tag)
        op->error = mismatch(*op);
    }
    LCR_CUDA_CHECK(cudaSetDevice(device_));
    LCR_NCCL_CHECK(ncclGroupStart());
    for (auto& op : ops) {
      if (!op->error.empty() || op->mine.bytes == 0) continue;
      const size_t n = size_t(op->mine.bytes);
      if (op->is_recv)
        LCR_NCCL_CHECK(ncclRecv(op->buf, n, ncclUint8, op->peer, nccl_, stream_));
      else
        LCR_NCCL_CHECK(ncclSend(op->buf, n, ncclUint8, op->peer, nccl_, stream_));
    }
    LCR_NCCL_CHECK(ncclGroupEnd());
    const EventPtr ev = record_event(stream_);
    for (auto& op : ops) {
      op->done = ev;
      op->issued = true;
    }
  }

  void wait(Request& r) override {
    const std::shared_ptr<Op> op = take(r);
    if (!op->issued) flush();
    if (!op->error.empty()) throw Error(op->error);
    LCR_CUDA_CHECK(cudaEventSynchronize(op->done.get()));
    check_async_error();
  }

  bool test(Request& r) override {
    Op& op = *state(r).op;
    if (!op.issued) {
      if (!headers_arrived()) return false;
      flush();
    }
    if (!op.error.empty()) return true;
    const cudaError_t q = cudaEventQuery(op.done.get());
    if (q == cudaErrorNotReady) return false;
    LCR_CUDA_CHECK(q);
    return true;
  }

  void wait_on(Request& r, cudaStream_t s) override {
    const std::shared_ptr<Op> op = take(r);
    if (!op->issued) flush();
    if (!op->error.empty()) throw Error(op->error);
    LCR_CUDA_CHECK(cudaStreamWaitEvent(s, op->done.get(), 0));
  }

  void after(cudaStream_t s) override {
    const EventPtr ev = record_event(s);
    LCR_CUDA_CHECK(cudaStreamWaitEvent(stream_, ev.get(), 0));
  }

  void join(cudaStream_t s) override {
    const EventPtr ev = record_event(stream_);
    LCR_CUDA_CHECK(cudaStreamWaitEvent(s, ev.get(), 0));
  }

  void allreduce_sum_async(void* buf, size_t count, DType t) override {
    flush();  // queued point-to-point traffic first: the stream runs in posting order
    if (count == 0) return;
    check_device_pointer(buf, "allreduce");
    LCR_NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(t), ncclSum, nccl_, stream_));
  }

  void allreduce_sum(void* buf, size_t count, DType t) override {
    allreduce_sum_async(buf, count, t);
    synchronize();
  }

  void allgather(const void* send, void* recv, size_t count, DType t) override {
    flush();
    if (count == 0) return;
    check_device_pointer(send, "allgather (send)");
    check_device_pointer(recv, "allgather (receive)");
    LCR_NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(t), nccl_, stream_));
    synchronize();
  }

  void barrier() override {
    flush();
    synchronize();
    check_mpi(MPI_Barrier(mpi_), "Barrier");
  }

  std::unique_ptr<Communicator> split(int color, int key) const override {
    MPI_Comm out = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(mpi_, color, key, &out), "Comm_split");
    return std::make_unique<NcclCommImpl>(out, device_);
  }

  [[noreturn]] void abort(const std::string& message) const override {
    int world_rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    std::fprintf(stderr, "lcr rank %d: fatal: %s\n", world_rank, message.c_str());
    std::fflush(stderr);
    if (nccl_) ncclCommAbort(nccl_);  // frees peers blocked in NCCL kernels on this comm
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
  }

  // A request destroyed before its group was issued (error unwinding): out of the queue,
  // its headers cancelled. Issued ones finish on the GPU by themselves.
  void drop(const std::shared_ptr<Op>& op) {
    const auto it = std::find(pending_.begin(), pending_.end(), op);
    if (it == pending_.end()) return;
    cancel_headers(**it);
    pending_.erase(it);
  }

 private:
  Request post(bool recv, void* buf, size_t count, DType t, int peer, int tag) {
    require(peer >= 0 && peer < size_, "cannot ", recv ? "receive from" : "send to", " rank ", peer,
            ": the communicator has ", size_, " ranks");
    if (count > 0) check_device_pointer(buf, recv ? "receive" : "send");
    auto op = std::make_shared<Op>();
    op->is_recv = recv;
    op->buf = buf;
    op->count = count;
    op->type = t;
    op->peer = peer;
    op->rank = rank_;
    int64_t& index = recv ? recvs_from_[peer] : sends_to_[peer];
    op->mine = Header{index++, int64_t(count * dtype_size(t)), tag};
    check_mpi(
        MPI_Isend(&op->mine, 3, MPI_INT64_T, peer, recv ? kHdrRecv : kHdrSend, mpi_, &op->hdr_out),
        "Isend (message header)");
    check_mpi(
        MPI_Irecv(&op->theirs, 3, MPI_INT64_T, peer, recv ? kHdrSend : kHdrRecv, mpi_, &op->hdr_in),
        "Irecv (message header)");
    pending_.push_back(op);
    auto s = std::make_unique<NcclRequestState>();
    s->op = op;
    s->owner = this;
    return Request(std::move(s));
  }

  static NcclRequestState& state(Request& r) {
    require(r.pending(), "wait/test on a request that is not pending");
    auto* s = dynamic_cast<NcclRequestState*>(r.state());
    require(s != nullptr, "request was not made by the NCCL communicator");
    return *s;
  }
  // The request's op; the handle is emptied whatever happens next.
  static std::shared_ptr<Op> take(Request& r) {
    std::shared_ptr<Op> op = state(r).op;
    if (!op->issued) {  // keep the op queued: the handle's destructor must not drop it
      state(r).owner = nullptr;
    }
    r.reset();
    return op;
  }

  bool headers_arrived() {
    for (auto& op : pending_) {
      int flag = 0;
      check_mpi(MPI_Test(&op->hdr_in, &flag, MPI_STATUS_IGNORE), "Test (message header)");
      if (!flag) return false;
    }
    return true;
  }

  static void cancel_headers(Op& op) {
    if (op.hdr_in != MPI_REQUEST_NULL) {
      MPI_Cancel(&op.hdr_in);
      MPI_Wait(&op.hdr_in, MPI_STATUS_IGNORE);
    }
    if (op.hdr_out != MPI_REQUEST_NULL) MPI_Request_free(&op.hdr_out);
  }

  void check_device_pointer(const void* p, const char* what) const {
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) cudaGetLastError();  // clear: a plain host pointer on old runtimes
    require(e == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged),
            "NCCL communicator: the ", what,
            " buffer is not GPU memory; the NCCL backend moves "
            "device buffers (cudaMalloc), use the MPI backend for host buffers");
  }

  void synchronize() {
    LCR_CUDA_CHECK(cudaStreamSynchronize(stream_));
    check_async_error();
  }

  void check_async_error() {
    ncclResult_t r = ncclSuccess;
    LCR_NCCL_CHECK(ncclCommGetAsyncError(nccl_, &r));
    LCR_NCCL_CHECK(r);
  }

  MPI_Comm mpi_ = MPI_COMM_NULL;
  int device_ = 0, rank_ = 0, size_ = 1;
  cudaStream_t stream_ = nullptr;
  ncclComm_t nccl_ = nullptr;
  std::vector<std::shared_ptr<Op>> pending_;      // posted, not yet issued, posting order
  std::map<int, int64_t> sends_to_, recvs_from_;  // per peer: operations posted so far
};

NcclRequestState::~NcclRequestState() {
  if (owner && op && !op->issued) owner->drop(op);
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

int nccl_local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const int r = env_int(name, -1);
    if (r >= 0) return r;
  }
  int init = 0;
  MPI_Initialized(&init);
  if (!init) return 0;
  // No launcher variable: rank among the MPI ranks that share this node.
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "Comm_split_type");
  int r = 0;
  MPI_Comm_rank(node, &r);
  MPI_Comm_free(&node);
  return r;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: clear the error for later calls
    return 0;
  }
  return n;
}

std::unique_ptr<NcclCommunicator> nccl_world() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  require(init && !fin,
          "the NCCL communicator is bootstrapped through MPI, which is not initialised: "
          "create an lcr::MpiSession first and start the ranks with mpirun");
  // NVLink SHARP (multicast) buffers, which NCCL sets up by default on NVSwitch hosts,
  // can put a host's shared GPUs out of service for a long time when a job dies holding
  // them (the lending machines forbid them). Point-to-point ring traffic and all-reduce
  // need no multicast, so it is off unless the user chose otherwise. Must be set before
  // ncclCommInitRank reads the environment.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  const int local = nccl_local_rank(), devices = cuda_device_count();
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // The GPU of the local rank; a task its launcher bound to one GPU (SLURM's lcr-task sets
  // LCR_GPU_PER_TASK=1) sees only that one, as device 0. Checked on every rank, agreed on
  // inside the constructor's collective check.
  const bool bound = env_int("LCR_GPU_PER_TASK", 0) == 1 && devices == 1;
  const int device = bound ? 0 : local < devices ? local : -1;
  MPI_Comm c = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &c), "Comm_dup");
  if (device < 0) {
    // Keep the collective shape: the others wait in the constructor's agreement step.
    int ok = 0, all = 0;
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c);
    MPI_Comm_free(&c);
    throw_error("NCCL communicator: rank ", world_rank, " is local rank ", local,
                " on its node but only ", devices,
                " CUDA device(s) are visible; start at most one rank per GPU (mpirun -np) "
                "or make more GPUs visible (CUDA_VISIBLE_DEVICES)");
  }
  return std::make_unique<NcclCommImpl>(c, device);
}

}  // namespace lcr
