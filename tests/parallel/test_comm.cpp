// The communicator interface on its MPI backend, and the DP x CP process grid.
#include <gtest/gtest.h>

#include <numeric>

#include "../error_text.hpp"  // tests/error_text.hpp
#include "kernels/base/error.hpp"
#include "parallel/comm/backend.hpp"
#include "parallel/comm/process_grid.hpp"
#include "test_world.hpp"

namespace lcr::test {
namespace {

TEST(Communicator, RingExchangeOfEveryType) {
  Communicator& c = world();
  const int N = c.size(), me = c.rank(), next = (me + 1) % N, prev = (me - 1 + N) % N;
  std::vector<double> sd(5, me + 0.5), rd(5);
  std::vector<int64_t> si(3, int64_t(1) << (40 + me)), ri(3);
  std::vector<float> sf(2, float(me)), rf(2);
  std::vector<Request> reqs;
  reqs.push_back(c.irecv(rd.data(), rd.size(), prev, 7));
  reqs.push_back(c.irecv(ri.data(), ri.size(), prev, 8));
  reqs.push_back(c.irecv(rf.data(), rf.size(), prev, 9));
  reqs.push_back(c.isend(sd.data(), sd.size(), next, 7));
  reqs.push_back(c.isend(si.data(), si.size(), next, 8));
  reqs.push_back(c.isend(sf.data(), sf.size(), next, 9));
  c.wait_all(reqs);
  for (const auto& r : reqs) EXPECT_FALSE(r.pending());
  for (double x : rd) EXPECT_EQ(x, prev + 0.5);
  for (int64_t x : ri) EXPECT_EQ(x, int64_t(1) << (40 + prev));
  for (float x : rf) EXPECT_EQ(x, float(prev));
  EXPECT_EQ(c.backend_name(), "mpi");
  EXPECT_EQ(c.buffer_space(), BufferSpace::Host);
}

TEST(Communicator, TestDrivesARequestToCompletion) {
  Communicator& c = world();
  const int N = c.size(), me = c.rank();
  int32_t s = me, r = -1;
  Request rr = c.irecv(&r, 1, (me - 1 + N) % N, 3);
  Request sr = c.isend(&s, 1, (me + 1) % N, 3);
  while (!c.test(rr)) {
  }
  c.wait(rr);
  c.wait(sr);
  EXPECT_EQ(r, (me - 1 + N) % N);
}

// The backend is a run-time choice by name; "nccl" in a build without it is a clear error.
TEST(Communicator, BackendChoiceByName) {
  EXPECT_EQ(make_world_communicator("mpi")->backend_name(), "mpi");
  const std::string e = error_of([] { make_world_communicator("gloo"); });
  EXPECT_NE(e.find("unknown communicator backend 'gloo' (valid: mpi, nccl"), std::string::npos)
      << e;
  if (nccl_available()) return;  // the NCCL backend itself: tests/cuda/nccl
  const std::string n = error_of([] { make_world_communicator("nccl"); });
  EXPECT_NE(n.find("-DLCR_ENABLE_CUDA=ON -DLCR_ENABLE_NCCL=ON"), std::string::npos) << n;
}

TEST(Communicator, Collectives) {
  Communicator& c = world();
  const int N = c.size(), me = c.rank();
  std::vector<double> v{1.0, double(me)};
  c.allreduce_sum(v.data(), v.size());
  EXPECT_EQ(v[0], N);
  EXPECT_EQ(v[1], N * (N - 1) / 2.0);
  std::vector<int32_t> mine{me, 10 * me}, all(2 * size_t(N));
  c.allgather(mine.data(), all.data(), 2);
  for (int r = 0; r < N; ++r) {
    EXPECT_EQ(all[2 * size_t(r)], r);
    EXPECT_EQ(all[2 * size_t(r) + 1], 10 * r);
  }
  c.barrier();
}

// A message longer or shorter than the receive expects is a clear Error on the receiver,
// naming both sizes, the peer and the tag; the communicator stays usable afterwards.
TEST(Communicator, DetectsMessageSizeMismatch) {
  Communicator& c = world();
  const int N = c.size(), me = c.rank(), next = (me + 1) % N, prev = (me - 1 + N) % N;
  for (int sent : {5, 3}) {
    std::vector<double> s(size_t(sent), 1.0), r(4);
    Request rr = c.irecv(r.data(), 4, prev, 11);
    Request sr = c.isend(s.data(), s.size(), next, 11);
    const std::string msg = error_of([&] { c.wait(rr); });
    c.wait(sr);
    EXPECT_NE(msg.find("message size mismatch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected 4 f64"), std::string::npos) << msg;
    EXPECT_NE(msg.find("from rank " + std::to_string(prev)), std::string::npos) << msg;
    EXPECT_NE(msg.find("tag 11"), std::string::npos) << msg;
    if (sent == 3) {
      EXPECT_NE(msg.find("but 3 arrived"), std::string::npos) << msg;
    }
    EXPECT_FALSE(rr.pending());
  }
  std::vector<double> v{1.0};
  c.allreduce_sum(v.data(), 1);
  EXPECT_EQ(v[0], N);
}

TEST(Communicator, RejectsBadPeer) {
  Communicator& c = world();
  double x = 0;
  const std::string msg = error_of([&] { c.isend(&x, 1, c.size(), 0); });
  EXPECT_NE(msg.find("communicator has " + std::to_string(c.size()) + " ranks"), std::string::npos)
      << msg;
}

TEST(Communicator, SplitOrdersByKey) {
  Communicator& c = world();
  const int me = c.rank(), N = c.size();
  auto rev = c.split(0, N - 1 - me);  // one group, reversed order
  EXPECT_EQ(rev->size(), N);
  EXPECT_EQ(rev->rank(), N - 1 - me);
  auto parity = c.split(me % 2, me);
  EXPECT_EQ(parity->rank(), me / 2);
  EXPECT_EQ(parity->size(), (N + 1 - me % 2) / 2);
}

TEST(ProcessGrid, EveryFactorisationOfTheWorld) {
  const int W = world().size(), me = world().rank();
  for (int cp = 1; cp <= W; ++cp) {
    if (W % cp != 0) continue;
    ProcessGrid g(mpi_world(), cp);
    EXPECT_EQ(g.cp_size(), cp);
    EXPECT_EQ(g.dp_size(), W / cp);
    EXPECT_EQ(g.cp().size(), cp);
    EXPECT_EQ(g.dp().size(), W / cp);
    // CP ranks of one replica are consecutive world ranks.
    EXPECT_EQ(g.cp_rank(), me % cp);
    EXPECT_EQ(g.dp_rank(), me / cp);
    // A CP all-reduce sums exactly the replica's world ranks.
    int64_t x = me;
    g.cp().allreduce_sum(&x, 1);
    const int64_t first = int64_t(me / cp) * cp;
    EXPECT_EQ(x, cp * first + int64_t(cp) * (cp - 1) / 2);
    int64_t y = 1;
    g.dp().allreduce_sum(&y, 1);
    EXPECT_EQ(y, W / cp);
  }
}

TEST(ProcessGrid, RejectsASizeThatDoesNotDivideTheWorld) {
  const int W = world().size();
  const std::string msg = error_of([&] { ProcessGrid g(mpi_world(), W + 1); });
  EXPECT_NE(msg.find("does not divide the " + std::to_string(W) + " ranks"), std::string::npos)
      << msg;
  EXPECT_NE(error_of([&] { ProcessGrid g(mpi_world(), 0); }).find(">= 1"), std::string::npos);
}

}  // namespace
}  // namespace lcr::test
