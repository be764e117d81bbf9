// Failure handling under mpirun: a rank that fails must end the whole job with a clear
// message, never leave its peers waiting. ctest runs this with two modes and passes when
// the output shows the message (ctest's TIMEOUT catches a hang):
//   mismatch  the last rank receives a message of the wrong size (rank 0 sends 5 values,
//             the receiver expects 4) -> "lcr rank R: fatal: message size mismatch ..."
//   throw     the last rank throws before it sends what rank 0 is waiting for
//             -> "lcr rank R: fatal: deliberate failure ..."
//   pending   the last rank throws with a large send (rendezvous protocol) and a receive
//             still pending, neither ever matched: unwinding cancels both (Request
//             destructors) before the abort, without blocking
// In both, every other rank is blocked (in a receive or a barrier) when the failing rank
// calls abort, so finishing at all shows the job was ended for them too.
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/base/error.hpp"
#include "parallel/comm/mpi/mpi_communicator.hpp"

int main(int argc, char** argv) {
  lcr::MpiSession mpi(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "mismatch";
  auto world = lcr::mpi_world();
  const int N = world->size(), me = world->rank(), last = N - 1;
  lcr::run_or_abort(*world, [&] {
    lcr::require(N >= 2, "abort_demo needs at least 2 ranks");
    if (mode == "mismatch") {
      if (me == 0) {
        std::vector<double> s(5, 1.0);
        auto r = world->isend(s.data(), s.size(), last, 42);
        world->wait(r);
      }
      if (me == last) {
        std::vector<double> r(4);
        auto q = world->irecv(r.data(), r.size(), 0, 42);
        world->wait(q);  // throws: 5 values arrived, 4 expected
      }
      world->barrier();  // the others wait here; only an abort gets them out
    } else if (mode == "pending") {
      if (me == last) {
        std::vector<double> big(1 << 20, 1.0), r(4);
        auto sr = world->isend(big.data(), big.size(), 0, 44);
        auto rr = world->irecv(r.data(), r.size(), 0, 45);
        lcr::throw_error("deliberate failure on rank ", me, " with requests pending");
      }
      world->barrier();
    } else {
      if (me == last) lcr::throw_error("deliberate failure on rank ", me, " before its send");
      if (me == 0) {
        double x = 0;
        auto q = world->irecv(&x, 1, last, 43);
        world->wait(q);  // never satisfied
      }
      world->barrier();
    }
  });
  std::printf("rank %d: unexpectedly finished\n", me);
  return 0;
}
