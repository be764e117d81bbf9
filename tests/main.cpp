// Test main: Kokkos lives for the whole test binary.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing runs no test, so it needs no Kokkos: the build lists each binary's tests
  // (gtest_discover_tests), and a Kokkos GPU build may be built where there is no GPU.
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  Kokkos::ScopeGuard kokkos(argc, argv);
  return RUN_ALL_TESTS();
}
