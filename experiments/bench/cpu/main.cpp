// The benchmark binary's main: Kokkos lives around the whole benchmark run (Google
// Benchmark's own benchmark_main would not initialise it). bench_*.cpp files only
// register benchmarks.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
