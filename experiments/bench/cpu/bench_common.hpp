#pragma once
// What the CPU attention benchmarks (bench_attention.cpp, bench_path.cpp) share: the FLOP
// count, the timed loop over a problem, and the thread-scaling shapes.
#include <benchmark/benchmark.h>

#include "kernels/attention/attention.hpp"

namespace lcr::bench {

// The two causal matrix products of a forward, QK^T and PV: 4 H L^2 D / 2 (B = 1).
inline double flops(int64_t L, int64_t D, int64_t H = 1) { return 4.0 * H * L * L * D / 2; }

enum class Pass { Forward, Backward, Both };

// Times the forward, the backward (after one untimed forward) or both in turn on the problem
// make(spec, L) builds (fields spec, in, params, out, dout, grads); GFLOP/s counts 1, 2.5 or
// 3.5 forwards' worth of the matrix products. An Error from make skips the benchmark.
template <class Make>
void run_timed(benchmark::State& st, const AttentionSpec& spec, Pass pass, Make make) {
  const int L = int(st.range(0));
  decltype(make(spec, L)) p;
  try {
    p = make(spec, L);
  } catch (const Error& e) {  // a scheme the API does not support (yet) with these options
    st.SkipWithError(e.what());
    return;
  }
  if (pass == Pass::Backward) attention_forward<float>(p->spec, p->in, p->params, p->out);
  for (auto _ : st) {
    if (pass != Pass::Backward) attention_forward<float>(p->spec, p->in, p->params, p->out);
    if (pass != Pass::Forward)
      attention_backward<float>(p->spec, p->in, p->params, p->out, p->dout, p->grads);
    Kokkos::fence();
  }
  const double passes = pass == Pass::Forward ? 1.0 : pass == Pass::Backward ? 2.5 : 3.5;
  st.counters["GFLOP/s"] = benchmark::Counter(passes * 1e-9 * flops(L, spec.head_dim, spec.heads),
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// fwdbwd_h16/*: L = 2K, 8K, 16K, one iteration each (one thread takes minutes at 16K).
inline void thread_scaling_shapes(benchmark::internal::Benchmark* b) {
  b->Arg(1 << 11)
      ->Arg(1 << 13)
      ->Arg(1 << 14)
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace lcr::bench
