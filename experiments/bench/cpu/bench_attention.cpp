// CPU benchmarks of attention forward and backward for every dot-product scheme, through
// the attention API, so a new scheme in scheme_names() is benchmarked without edits here
// (PaTH has its own, bench_path.cpp). Shapes: B = 1, H = Hkv = 1, head_dim 64, float32,
// L = 1K..16K (self-attention, causal). GFLOP/s counts the two causal matrix products
// QK^T and PV, 4 B H L^2 D / 2 FLOPs forward, 2.5x that backward (five products: the
// forward's QK^T recomputed, dV, dP, dQ, dK); scheme lanes and exp are not counted.
// Names: fwd/<variant>/<L> and bwd/<variant>/<L>, e.g. --benchmark_filter='fwd/rope/.*';
// fwd_d128/<variant>/<L>, bwd_d128/<variant>/<L>: head_dim 128, L = 4K and 16K.
// Thread scaling: fwdbwd_h16/<variant>/<L> runs forward then backward at B = 1, H = Hkv = 16,
// L = 2K, 8K, 16K (heads and query tiles are the parallel work, as in training), one
// iteration (one thread takes about a minute at 8K); compare OMP_NUM_THREADS=1 and 16 on a
// Kokkos OpenMP build (docs/kokkos.md; experiments/bench/gpu.sh cpu).
#include <benchmark/benchmark.h>

#include <Kokkos_Random.hpp>
#include <memory>

#include "experiments/bench/cpu/bench_common.hpp"
#include "kernels/attention/attention.hpp"

namespace lcr {
namespace {

struct Variant {
  std::string name;
  AttentionSpec spec;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  AttentionSpec base;
  base.head_dim = 64;
  for (const auto& name : scheme_names()) {
    AttentionSpec s = base;
    s.scheme = parse_scheme(name);
    if (is_path(s.scheme)) continue;                          // bench_path.cpp
    if (s.scheme == Scheme::GOAT2D) s.goat.grid_width = 128;  // 128 x 128 grid at 16K
    out.push_back({name, s});
  }
  AttentionSpec all = base;  // the numerics options together, on the plain kernel
  all.numerics.sink = all.numerics.qk_norm = true;
  all.numerics.softcap = 30.0;
  out.push_back({"nope_sink_softcap_qknorm", all});
  return out;
}

// One benchmark problem, allocated once per (variant, L); random inputs in [-1, 1].
struct Problem {
  AttentionSpec spec;
  AttentionInputs<float> in;
  ParamSet<float> params;
  AttentionOutputs<float> out;
  View4<float> dout;
  AttentionGrads<float> grads;
};

std::unique_ptr<Problem> make_problem(const AttentionSpec& s, int L) {
  validate(s);
  Kokkos::Random_XorShift64_Pool<ExecSpace> pool(1234);
  auto random4 = [&](const char* label, int heads, int width) {
    View4<float> v(std::string(label), 1, L, heads, width);
    Kokkos::fill_random(v, pool, -1.0f, 1.0f);
    return v;
  };
  auto p = std::make_unique<Problem>();
  p->spec = s;
  const int dq = input_qk_dim(s);
  p->in.q = random4("q", s.heads, dq);
  p->in.k = random4("k", s.kv_heads, dq);
  p->in.v = random4("v", s.kv_heads, s.v_dim());
  p->dout = random4("dout", s.heads, s.v_dim());
  if (uses_fox(s.scheme)) {  // cumulative log forget gates of a constant gate 0.99
    View3<float> c("fox_c", 1, L, s.heads);
    Kokkos::parallel_for(
        "fox_c", Kokkos::RangePolicy<ExecSpace>(0, L), KOKKOS_LAMBDA(int t) {
          for (int h = 0; h < int(c.extent(2)); ++h) c(0, t, h) = -0.01f * float(t + 1);
        });
    p->in.fox_cq = p->in.fox_ck = c;
  }
  // Small parameters keep every logit moderate; the timing does not depend on them.
  p->params = ParamSet<float>(attention_param_layout(s));
  Kokkos::fill_random(p->params.data, pool, -0.1f, 0.1f);
  p->out = make_outputs<float>(s, p->in);
  p->grads = make_grads<float>(s, p->in);
  check_inputs(s, p->in, p->params);
  return p;
}

void timed(benchmark::State& st, const AttentionSpec& spec, bench::Pass pass) {
  bench::run_timed(st, spec, pass, make_problem);
}

// Registered at static initialisation, like BENCHMARK(); main.cpp runs them.
const bool registered = [] {
  for (auto v : variants()) {
    v.spec.heads = v.spec.kv_heads = 16;
    benchmark::RegisterBenchmark(("fwdbwd_h16/" + v.name).c_str(), timed, v.spec, bench::Pass::Both)
        ->Apply(bench::thread_scaling_shapes);
  }
  // fwd_h16/*, bwd_h16/*: B = 1, H = 16, L = 16K, d = 64, the GPU benchmarks' shape, for a
  // build whose Kokkos runs on a GPU (on a CPU one iteration takes minutes).
  for (auto v : variants()) {
    v.spec.heads = v.spec.kv_heads = 16;
    for (const bool bwd : {false, true})
      benchmark::RegisterBenchmark((std::string(bwd ? "bwd_h16/" : "fwd_h16/") + v.name).c_str(),
                                   timed, v.spec,
                                   bwd ? bench::Pass::Backward : bench::Pass::Forward)
          ->Arg(1 << 14)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5)
          ->UseRealTime();
  }
  // fwd_d128/*, bwd_d128/*: head width 128 at L = 4K and 16K (torch's CPU kernel is measured
  // at both widths beside these: experiments/bench/gpu.sh cpuattn).
  for (auto v : variants()) {
    v.spec.head_dim = 128;
    for (const bool bwd : {false, true})
      benchmark::RegisterBenchmark((std::string(bwd ? "bwd_d128/" : "fwd_d128/") + v.name).c_str(),
                                   timed, v.spec,
                                   bwd ? bench::Pass::Backward : bench::Pass::Forward)
          ->Arg(1 << 12)
          ->Arg(1 << 14)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.2)
          ->UseRealTime();
  }
  for (const auto& v : variants())
    for (const bool bwd : {false, true})
      benchmark::RegisterBenchmark((std::string(bwd ? "bwd/" : "fwd/") + v.name).c_str(), timed,
                                   v.spec, bwd ? bench::Pass::Backward : bench::Pass::Forward)
          ->RangeMultiplier(2)
          ->Range(1 << 10, 1 << 14)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.2)  // one iteration at 16K; several at 1K
          ->UseRealTime();
  return true;
}();

}  // namespace
}  // namespace lcr
