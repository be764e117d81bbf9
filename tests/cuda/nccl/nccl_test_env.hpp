#pragma once
// The communicators shared by the NCCL tests of one binary (nccl_main.cpp sets them up
// after MPI and tears them down before MPI ends). Where the node has fewer GPUs than
// ranks (or none: CI, the development machine), nccl() is null and every test that needs
// it SKIPS with the reason, decided alike on every rank so no rank waits for another.
#include <gtest/gtest.h>

#include <string>

#include "parallel/comm/communicator.hpp"
#include "parallel/comm/nccl/nccl_communicator.hpp"

namespace lcr::test {

NcclCommunicator* nccl();
const std::string& nccl_skip_reason();
Communicator& mpi();

}  // namespace lcr::test

// First line of every test that needs the NCCL communicator (returns from the test).
#define LCR_REQUIRE_NCCL()                                                   \
  do {                                                                       \
    if (!::lcr::test::nccl())                                                \
      GTEST_SKIP() << "no CUDA device: " << ::lcr::test::nccl_skip_reason(); \
  } while (0)
