#pragma once
// The MPI world communicator shared by the tests of one binary (mpi_main.cpp initialises
// MPI before any test runs; the communicator is freed, if MPI is still up, at exit).
#include "parallel/comm/mpi/mpi_communicator.hpp"

namespace lcr::test {

inline Communicator& world() {
  static std::unique_ptr<Communicator> w = mpi_world();
  return *w;
}

}  // namespace lcr::test
