#include "parallel/comm/mpi/mpi_communicator.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "kernels/base/error.hpp"

namespace lcr {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::I32:
      return MPI_INT32_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::U8:
      return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, size_t(len));
}

// Converts an MPI return code into an Error naming the call.
void check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw_error("MPI ", what, " failed: ", mpi_error_string(code));
}

int checked_count(size_t count, const char* what) {
  require(count <= size_t(std::numeric_limits<int>::max()), "MPI ", what, " of ", count,
          " elements exceeds the int count MPI takes; split the message");
  return int(count);
}

struct MpiRequestState final : RequestState {
  MPI_Request req = MPI_REQUEST_NULL;
  bool is_recv = false;
  int peer = -1, tag = -1;
  size_t count = 0;
  DType type = DType::U8;
  int rank = -1;
  int64_t self_seq = -1;  // receive from this rank: its index among same-tag self receives
  bool done = false;
  std::string error;  // set when MPI reported a failure for this request
  MPI_Status status{};

  // Pending at destruction only while unwinding from an error. A receive is cancelled
  // and completed, so MPI never writes into its (about to be freed) buffer. A send cannot
  // be cancelled reliably (Open MPI's ob1 ignores it and the wait would block until a
  // receiver that may never come): it is detached with MPI_Request_free. Its buffer may
  // then be read later only if a peer still receives the message; the error path ends in
  // comm.abort (run_or_abort), which ends the job first.
  ~MpiRequestState() override {
    if (req == MPI_REQUEST_NULL) return;
    if (is_recv) {
      MPI_Cancel(&req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
      MPI_Request_free(&req);
    }
  }
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm c) : comm_(c) {
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "Comm_size");
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  BufferSpace buffer_space() const override { return BufferSpace::Host; }
  std::string backend_name() const override { return "mpi"; }

  Request isend(const void* buf, size_t count, DType t, int dest, int tag) override {
    check_peer(dest, "send to");
    auto s = std::make_unique<MpiRequestState>();
    fill(*s, false, dest, tag, count, t);
    if (dest == rank_) self_sent_[{tag, self_sends_[tag]++}] = count * dtype_size(t);
    check(MPI_Isend(buf, checked_count(count, "send"), mpi_type(t), dest, tag, comm_, &s->req),
          "Isend");
    return Request(std::move(s));
  }

  Request irecv(void* buf, size_t count, DType t, int src, int tag) override {
    check_peer(src, "receive from");
    auto s = std::make_unique<MpiRequestState>();
    fill(*s, true, src, tag, count, t);
    if (src == rank_) s->self_seq = self_recvs_[tag]++;
    check(MPI_Irecv(buf, checked_count(count, "receive"), mpi_type(t), src, tag, comm_, &s->req),
          "Irecv");
    return Request(std::move(s));
  }

  bool test(Request& r) override {
    auto& s = state(r);
    if (s.done) return true;
    int flag = 0;
    const int code = MPI_Test(&s.req, &flag, &s.status);
    if (code != MPI_SUCCESS) fail(s, code);
    s.done = s.done || flag != 0;
    return s.done;
  }

  // The request is completed (and its handle emptied) whatever happens; a failure or a
  // size mismatch is thrown afterwards.
  void wait(Request& r) override {
    auto& s = state(r);
    if (!s.done) {
      const int code = MPI_Wait(&s.req, &s.status);
      if (code != MPI_SUCCESS) fail(s, code);
      s.done = true;
    }
    if (s.error.empty() && s.is_recv) {
      int got = 0;
      check(MPI_Get_count(&s.status, mpi_type(s.type), &got), "Get_count");
      if (size_t(got) != s.count) s.error = mismatch(s, std::to_string(got));
    }
    if (s.self_seq >= 0) check_self_message(s);
    const std::string err = s.error;
    r.reset();
    if (!err.empty()) throw Error(err);
  }

  void allreduce_sum(void* buf, size_t count, DType t) override {
    check(MPI_Allreduce(MPI_IN_PLACE, buf, checked_count(count, "allreduce"), mpi_type(t), MPI_SUM,
                        comm_),
          "Allreduce");
  }

  void allgather(const void* send, void* recv, size_t count, DType t) override {
    const int n = checked_count(count, "allgather");
    check(MPI_Allgather(send, n, mpi_type(t), recv, n, mpi_type(t), comm_), "Allgather");
  }

  void barrier() override { check(MPI_Barrier(comm_), "Barrier"); }

  std::unique_ptr<Communicator> split(int color, int key) const override {
    MPI_Comm out = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &out), "Comm_split");
    return std::make_unique<MpiCommunicator>(out);
  }

  [[noreturn]] void abort(const std::string& message) const override {
    int world_rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    std::fprintf(stderr, "lcr rank %d: fatal: %s\n", world_rank, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

 private:
  void check_peer(int p, const char* what) const {
    require(p >= 0 && p < size_, "cannot ", what, " rank ", p, ": the communicator has ", size_,
            " ranks");
  }

  void fill(MpiRequestState& s, bool recv, int peer, int tag, size_t count, DType t) const {
    s.is_recv = recv;
    s.peer = peer;
    s.tag = tag;
    s.count = count;
    s.type = t;
    s.rank = rank_;
  }

  // Open MPI 4.1's loopback transport truncates a too-long message to oneself without
  // reporting it (MPI_ERR_TRUNCATE only comes between different ranks), so sizes of
  // messages to self are checked here: the k-th receive of a tag matches the k-th send.
  void check_self_message(MpiRequestState& s) {
    const auto it = self_sent_.find({s.tag, s.self_seq});
    if (it == self_sent_.end()) return;
    const size_t want = s.count * dtype_size(s.type);
    if (it->second != want && s.error.empty())
      s.error = mismatch(s, std::to_string(it->second / dtype_size(s.type)) + " (" +
                                std::to_string(it->second) + " bytes)");
    self_sent_.erase(it);
  }

  static MpiRequestState& state(Request& r) {
    require(r.pending(), "wait/test on a request that is not pending");
    auto* s = dynamic_cast<MpiRequestState*>(r.state());
    require(s != nullptr, "request was not made by the MPI communicator");
    return *s;
  }

  static std::string mismatch(const MpiRequestState& s, const std::string& got) {
    return "message size mismatch: rank " + std::to_string(s.rank) + " expected " +
           std::to_string(s.count) + " " + dtype_name(s.type) + " values from rank " +
           std::to_string(s.peer) + " (tag " + std::to_string(s.tag) + ") but " + got +
           " arrived; the ranks disagree on the ring schedule or the sequence layout";
  }

  // A failed wait/test: MPI has completed the request; remember why (MPI_ERR_TRUNCATE
  // means the message was longer than the receive expected).
  static void fail(MpiRequestState& s, int code) {
    int cls = 0;
    MPI_Error_class(code, &cls);
    s.req = MPI_REQUEST_NULL;
    s.done = true;
    if (cls == MPI_ERR_TRUNCATE)
      s.error = mismatch(s, "more");
    else
      s.error = std::string("MPI ") + (s.is_recv ? "receive from" : "send to") + " rank " +
                std::to_string(s.peer) + " (tag " + std::to_string(s.tag) +
                ") failed: " + mpi_error_string(code);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::map<int, int64_t> self_sends_, self_recvs_;       // per tag: messages to self posted
  std::map<std::pair<int, int64_t>, size_t> self_sent_;  // (tag, index) -> bytes sent
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

bool mpi_ready() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int init = 0;
  MPI_Initialized(&init);
  if (init) return;
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "Init_thread");
  owns_ = true;
}

MpiSession::~MpiSession() {
  if (owns_) MPI_Finalize();
}

std::unique_ptr<Communicator> mpi_world() {
  require(mpi_ready(), "MPI is not initialised: create an lcr::MpiSession first");
  MPI_Comm c = MPI_COMM_NULL;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &c), "Comm_dup");
  return std::make_unique<MpiCommunicator>(c);
}

int world_rank_hint() {
  if (mpi_ready()) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  return env_int("SLURM_PROCID", 0);
}

int world_size_hint() {
  if (mpi_ready()) {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
  }
  return env_int("SLURM_NTASKS", 1);
}

}  // namespace lcr
