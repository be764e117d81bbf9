// The NCCL communicator against the MPI backend: the same exchanges and collectives on
// the same data give bit-identical results; size and order mismatches are clear Errors on
// both ranks (and leave the communicator usable); host buffers are refused; the
// stream-ordered calls order GPU work without host waits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "../../error_text.hpp"  // tests/error_text.hpp
#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/base/error.hpp"
#include "nccl_test_env.hpp"
#include "parallel/comm/backend.hpp"

namespace lcr::test {
namespace {

using cuda::DeviceBuffer;

// Fresh random values each run; integer-valued so that sums are exact in any order.
template <class T>
std::vector<T> random_values(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-1000, 1000);
  std::vector<T> x(n);
  for (auto& v : x) v = T(d(rng));
  return x;
}

std::mt19937_64 rank_rng(Communicator& c) {
  std::random_device rd;
  return std::mt19937_64(rd() + 7919u * unsigned(c.rank()));
}

// Ring exchange (send to next, receive from prev) of n values through either backend:
// MPI on host vectors, NCCL on device copies.
template <class T>
std::vector<T> ring_exchange(Communicator& c, const std::vector<T>& mine, int tag) {
  const int N = c.size(), me = c.rank();
  std::vector<T> got(mine.size());
  if (c.buffer_space() == BufferSpace::Host) {
    Request r = c.irecv(got.data(), got.size(), (me - 1 + N) % N, tag);
    Request s = c.isend(mine.data(), mine.size(), (me + 1) % N, tag);
    c.wait(r);
    c.wait(s);
    return got;
  }
  DeviceBuffer<T> send(mine), recv(mine.size());
  Request s = c.isend(send.data(), mine.size(), (me + 1) % N, tag);  // send first: grouped
  Request r = c.irecv(recv.data(), mine.size(), (me - 1 + N) % N, tag);
  c.wait(s);
  c.wait(r);
  return recv.download();
}

template <class T>
void check_ring_exchange(std::mt19937_64& rng) {
  for (size_t n : {size_t(1), size_t(7), size_t(129), size_t(1000)}) {
    const auto mine = random_values<T>(n, rng);
    const auto by_mpi = ring_exchange(mpi(), mine, 5);
    const auto by_nccl = ring_exchange<T>(*nccl(), mine, 5);
    EXPECT_EQ(by_nccl, by_mpi) << "n=" << n;
  }
}

TEST(NcclComm, IdentityMatchesMpi) {
  LCR_REQUIRE_NCCL();
  EXPECT_EQ(nccl()->backend_name(), "nccl");
  EXPECT_EQ(nccl()->buffer_space(), BufferSpace::Device);
  EXPECT_EQ(nccl()->rank(), mpi().rank());
  EXPECT_EQ(nccl()->size(), mpi().size());
  EXPECT_EQ(nccl()->device(), nccl_local_rank());
}

TEST(NcclComm, RingExchangeOfEveryTypeMatchesMpi) {
  LCR_REQUIRE_NCCL();
  auto rng = rank_rng(mpi());
  check_ring_exchange<float>(rng);
  check_ring_exchange<double>(rng);
  check_ring_exchange<int32_t>(rng);
  check_ring_exchange<int64_t>(rng);
  check_ring_exchange<uint8_t>(rng);
}

// Several messages per channel in one group, receives posted before sends, and a message
// of zero elements: all matched in posting order.
TEST(NcclComm, SeveralMessagesInOneGroup) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& c = *nccl();
  const int N = c.size(), me = c.rank(), next = (me + 1) % N, prev = (me - 1 + N) % N;
  auto rng = rank_rng(c);
  const auto a = random_values<float>(33, rng), b = random_values<float>(1000, rng);
  DeviceBuffer<float> sa(a), sb(b), ra(a.size()), rb(b.size()), empty(1);
  std::vector<Request> reqs;
  reqs.push_back(c.irecv(ra.data(), a.size(), prev, 1));
  reqs.push_back(c.irecv(empty.data(), 0, prev, 2));
  reqs.push_back(c.irecv(rb.data(), b.size(), prev, 3));
  reqs.push_back(c.isend(sa.data(), a.size(), next, 1));
  reqs.push_back(c.isend(empty.data(), 0, next, 2));
  reqs.push_back(c.isend(sb.data(), b.size(), next, 3));
  c.wait_all(reqs);
  for (const auto& r : reqs) EXPECT_FALSE(r.pending());
  EXPECT_EQ(ra.download(), ring_exchange(mpi(), a, 9));
  EXPECT_EQ(rb.download(), ring_exchange(mpi(), b, 9));
}

TEST(NcclComm, TestDrivesARequestToCompletion) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& c = *nccl();
  const int N = c.size(), me = c.rank();
  DeviceBuffer<int32_t> s(std::vector<int32_t>{me}), r(1);
  Request sr = c.isend(s.data(), 1, (me + 1) % N, 3);
  Request rr = c.irecv(r.data(), 1, (me - 1 + N) % N, 3);
  while (!c.test(rr)) {
  }
  c.wait(rr);
  c.wait(sr);
  EXPECT_EQ(r.download()[0], (me - 1 + N) % N);
}

TEST(NcclComm, CollectivesMatchMpi) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& c = *nccl();
  auto rng = rank_rng(c);
  for (size_t n : {size_t(1), size_t(7), size_t(129), size_t(1000)}) {
    auto f = random_values<float>(n, rng);
    auto d = random_values<double>(n, rng);
    auto i = random_values<int64_t>(n, rng);
    DeviceBuffer<float> df(f);
    DeviceBuffer<double> dd(d);
    DeviceBuffer<int64_t> di(i);
    c.allreduce_sum(df.data(), n);
    c.allreduce_sum(dd.data(), n);
    c.allreduce_sum(di.data(), n);
    mpi().allreduce_sum(f.data(), n);
    mpi().allreduce_sum(d.data(), n);
    mpi().allreduce_sum(i.data(), n);
    EXPECT_EQ(df.download(), f) << "n=" << n;
    EXPECT_EQ(dd.download(), d) << "n=" << n;
    EXPECT_EQ(di.download(), i) << "n=" << n;

    const auto mine = random_values<int32_t>(n, rng);
    std::vector<int32_t> all(n * size_t(c.size()));
    mpi().allgather(mine.data(), all.data(), n);
    DeviceBuffer<int32_t> dm(mine), da(all.size());
    c.allgather(dm.data(), da.data(), n);
    EXPECT_EQ(da.download(), all) << "n=" << n;
  }
  c.barrier();
}

// Both sides of a mismatched message get an Error naming peer, tag and both sizes; no
// rank hangs, and the communicator works afterwards.
TEST(NcclComm, DetectsMessageSizeMismatchOnBothRanks) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& c = *nccl();
  const int N = c.size(), me = c.rank(), next = (me + 1) % N, prev = (me - 1 + N) % N;
  DeviceBuffer<double> s(5), r(5);
  Request sr = c.isend(s.data(), 5, next, 11);
  Request rr = c.irecv(r.data(), 4, prev, 11);
  const std::string es = error_of([&] { c.wait(sr); });
  const std::string er = error_of([&] { c.wait(rr); });
  EXPECT_NE(
      es.find("message size mismatch: rank " + std::to_string(me) + " sent 5 f64 values to rank " +
              std::to_string(next) + " (tag 11) but it expects 4"),
      std::string::npos)
      << es;
  EXPECT_NE(er.find("message size mismatch: rank " + std::to_string(me) +
                    " expected 4 f64 values from rank " + std::to_string(prev) +
                    " (tag 11) but 5 arrived"),
            std::string::npos)
      << er;
  EXPECT_FALSE(sr.pending());
  EXPECT_FALSE(rr.pending());
  const std::vector<float> x{1.f, 2.f, float(me)};
  EXPECT_EQ(ring_exchange<float>(c, x, 12), ring_exchange(mpi(), x, 12));
}

// NCCL matches by posting order, not by tag: receives posted in another tag order than
// the peer's sends are an Error on both ranks (instead of silently swapped messages).
TEST(NcclComm, DetectsMessageOrderMismatch) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& c = *nccl();
  const int N = c.size(), me = c.rank(), next = (me + 1) % N, prev = (me - 1 + N) % N;
  DeviceBuffer<float> s1(3), s2(3), r1(3), r2(3);
  std::vector<Request> reqs;
  reqs.push_back(c.isend(s1.data(), 3, next, 1));
  reqs.push_back(c.isend(s2.data(), 3, next, 2));
  reqs.push_back(c.irecv(r2.data(), 3, prev, 2));
  reqs.push_back(c.irecv(r1.data(), 3, prev, 1));
  int errors = 0;
  for (auto& q : reqs) {
    const std::string e = error_of([&] { c.wait(q); });
    if (!e.empty()) {
      ++errors;
      EXPECT_NE(e.find("message order mismatch"), std::string::npos) << e;
      EXPECT_NE(e.find("posting order"), std::string::npos) << e;
    }
  }
  EXPECT_EQ(errors, 4);
  c.barrier();
}

TEST(NcclComm, RejectsHostBuffers) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& c = *nccl();
  std::vector<float> host(4);
  const std::string e = error_of([&] { c.allreduce_sum(host.data(), host.size()); });
  EXPECT_NE(e.find("not GPU memory"), std::string::npos) << e;
  EXPECT_NE(e.find("MPI backend"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { c.isend(host.data(), 4, 0, 1); }), "");
}

// after / wait_on / join: a memset queued on a user stream is what gets sent, the received
// data is read on that stream, and the host waits only at the end.
TEST(NcclComm, StreamOrderedExchange) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& c = *nccl();
  const int N = c.size(), me = c.rank();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const size_t n = 1 << 20;
  DeviceBuffer<uint8_t> send(n), recv(n);
  std::vector<uint8_t> host(n, 0);
  ASSERT_EQ(cudaMemsetAsync(send.data(), 17 + me, n, s), cudaSuccess);
  c.after(s);
  Request sr = c.isend(send.data(), n, (me + 1) % N, 4);
  Request rr = c.irecv(recv.data(), n, (me - 1 + N) % N, 4);
  c.flush();
  c.wait_on(rr, s);
  c.wait_on(sr, s);
  EXPECT_FALSE(rr.pending());
  ASSERT_EQ(cudaMemcpyAsync(host.data(), recv.data(), n, cudaMemcpyDeviceToHost, s), cudaSuccess);
  // The all-reduce runs on the communicator's stream; join hands its result to s.
  DeviceBuffer<float> one(std::vector<float>{1.f});
  c.allreduce_sum_async(one.data(), 1, DType::F32);
  c.join(s);
  float total = 0;
  ASSERT_EQ(cudaMemcpyAsync(&total, one.data(), sizeof total, cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const uint8_t want = uint8_t(17 + (me - 1 + N) % N);
  EXPECT_EQ(std::count(host.begin(), host.end(), want), std::ptrdiff_t(n));
  EXPECT_EQ(total, float(N));
  cudaStreamDestroy(s);
}

TEST(NcclComm, SplitGivesWorkingSubCommunicators) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& c = *nccl();
  auto sub = c.split(c.rank() % 2, c.rank());
  EXPECT_EQ(sub->backend_name(), "nccl");
  EXPECT_EQ(sub->size(), (c.size() + 1 - c.rank() % 2) / 2);
  DeviceBuffer<int64_t> x(std::vector<int64_t>{int64_t(c.rank())});
  sub->allreduce_sum(x.data(), 1);
  int64_t want = 0;
  for (int r = c.rank() % 2; r < c.size(); r += 2) want += r;
  EXPECT_EQ(x.download()[0], want);
}

TEST(CommBackend, ChoiceByName) {
  EXPECT_EQ(make_world_communicator("mpi")->backend_name(), "mpi");
  const std::string e = error_of([] { make_world_communicator("gloo"); });
  EXPECT_NE(e.find("unknown communicator backend 'gloo' (valid: mpi, nccl"), std::string::npos)
      << e;
  EXPECT_TRUE(nccl_available());
  if (!nccl()) return;  // "nccl" needs a GPU per rank (checked on every rank alike)
  EXPECT_EQ(make_world_communicator("nccl")->backend_name(), "nccl");
}

}  // namespace
}  // namespace lcr::test
