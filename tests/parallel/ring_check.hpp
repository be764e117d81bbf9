#pragma once
// Runs one ring problem end to end on a communicator and the same problem on one rank,
// returning both as flat float64 arrays keyed by name (o, lse, q, k, v, fox_c, log_f,
// parameter names) so a test compares everything with one loop.
#include <map>
#include <string>
#include <vector>

#include "parallel/comm/communicator.hpp"
#include "parallel/ring/layout.hpp"
#include "parallel/ring/stats.hpp"
#include "ring_problem.hpp"

namespace lcr::test {

struct Flat {
  std::map<std::string, std::vector<double>> values;  // "o", "lse", "grad.q", ...
  RingStats forward, backward;                        // ring runs only
};

// attention_forward / attention_backward on the full tensors, precision T.
template <class T>
Flat single_rank(const RingCase& c, const FullProblem& p);

// Shards p in `layout`, runs the ring on comm, gathers everything back (every rank ends
// with the full arrays).
template <class T>
Flat ring(Communicator& comm, const RingCase& c, const FullProblem& p, const SeqLayout& layout);

}  // namespace lcr::test
