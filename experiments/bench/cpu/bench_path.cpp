// CPU benchmarks of PaTH and PaTH-FoX attention, forward and backward, through the
// attention API: B = 1, H = Hkv = 1, head_dim 64, float32, L = 1K..16K, block size as a
// parameter. GFLOP/s uses the same FLOP count as the dot-product benchmarks
// (bench_attention.cpp: 4 L^2 D / 2 forward, 2.5x that backward), so PaTH's rate reads
// directly against fwd/nope and fwd/fox there (same shapes): the transition work PaTH adds
// (O(L^2 D^2 / B)) shows up as a lower rate, not as extra FLOPs.
// Names: fwd/path/b<block>/<L>, bwd/path/b<block>/<L>, fwd/path_fox/b64/<L>, ...; and
// fwdbwd_h16/path/b64/<L> (forward then backward at H = Hkv = 16, L = 2K, 8K, 16K, one
// iteration), the thread-scaling shapes of bench_attention.cpp.
//   lcr_bench --benchmark_filter='(fwd|bwd)/(path|nope|fox)'
#include <benchmark/benchmark.h>

#include <Kokkos_Random.hpp>
#include <memory>

#include "experiments/bench/cpu/bench_common.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/attention/kokkos/math.hpp"

namespace lcr {
namespace {

// One problem per (variant, L): q, k, v, dout uniform in [-1, 1]; w unit random vectors;
// beta uniform in (0, 2); FoX: cumulative log gates of a constant gate 0.99.
struct PathProblem {
  AttentionSpec spec;
  AttentionInputs<float> in;
  ParamSet<float> params;
  AttentionOutputs<float> out;
  View4<float> dout;
  AttentionGrads<float> grads;
};

std::unique_ptr<PathProblem> make_path_problem(const AttentionSpec& s, int L) {
  Kokkos::Random_XorShift64_Pool<ExecSpace> pool(4321);
  auto random4 = [&](const char* label, int heads, int width, float lo) {
    View4<float> v(std::string(label), 1, L, heads, width);
    Kokkos::fill_random(v, pool, lo, 1.0f);
    return v;
  };
  auto p = std::make_unique<PathProblem>();
  p->spec = s;
  p->in.q = random4("q", s.heads, s.head_dim, -1.0f);
  p->in.k = random4("k", s.kv_heads, s.head_dim, -1.0f);
  p->in.v = random4("v", s.kv_heads, s.v_dim(), -1.0f);
  p->dout = random4("dout", s.heads, s.v_dim(), -1.0f);
  View4<float> w = random4("path_w", s.kv_heads, s.head_dim, -1.0f);
  const int d = s.head_dim;
  Kokkos::parallel_for(
      "normalise_w", Kokkos::RangePolicy<ExecSpace>(0, int64_t(L) * s.kv_heads),
      KOKKOS_LAMBDA(int64_t r) {
        float ss = 0;
        for (int c = 0; c < d; ++c) ss += w.data()[r * d + c] * w.data()[r * d + c];
        for (int c = 0; c < d; ++c) w.data()[r * d + c] /= kmath::sqrt(ss);
      });
  p->in.path_w = w;
  View3<float> beta("path_beta", 1, L, s.kv_heads);
  Kokkos::fill_random(beta, pool, 0.0f, 1.99f);
  p->in.path_beta = beta;
  if (uses_fox(s.scheme)) {
    View3<float> c("fox_c", 1, L, s.heads);
    const int H = s.heads;
    Kokkos::parallel_for(
        "fox_c", Kokkos::RangePolicy<ExecSpace>(0, L), KOKKOS_LAMBDA(int t) {
          for (int h = 0; h < H; ++h) c(0, t, h) = -0.01f * float(t + 1);
        });
    p->in.fox_cq = p->in.fox_ck = c;
  }
  p->params = ParamSet<float>(attention_param_layout(s));
  p->out = make_outputs<float>(s, p->in);
  p->grads = make_grads<float>(s, p->in);
  check_inputs(s, p->in, p->params);
  return p;
}

void timed(benchmark::State& st, const AttentionSpec& spec, bench::Pass pass) {
  bench::run_timed(st, spec, pass, make_path_problem);
}

// Block 64 over the whole range; the other block sizes up to 4K (the trade-off between
// in-block and transition work shows there already).
const bool registered = [] {
  struct Variant {
    const char* name;
    Scheme scheme;
    int block, max_len;
  };
  const Variant variants[] = {{"path", Scheme::PaTH, 64, 1 << 14},
                              {"path", Scheme::PaTH, 32, 1 << 12},
                              {"path", Scheme::PaTH, 128, 1 << 12},
                              {"path_fox", Scheme::PaTHFoX, 64, 1 << 14}};
  for (const auto& v : variants)
    for (const bool bwd : {false, true}) {
      AttentionSpec s;
      s.scheme = v.scheme;
      s.head_dim = 64;
      s.path.block_size = v.block;
      const std::string name =
          std::string(bwd ? "bwd/" : "fwd/") + v.name + "/b" + std::to_string(v.block);
      benchmark::RegisterBenchmark(name.c_str(), timed, s,
                                   bwd ? bench::Pass::Backward : bench::Pass::Forward)
          ->RangeMultiplier(2)
          ->Range(1 << 10, v.max_len)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.2)
          ->UseRealTime();
    }
  for (const Scheme scheme : {Scheme::PaTH, Scheme::PaTHFoX}) {
    AttentionSpec s;
    s.scheme = scheme;
    s.head_dim = 64;
    s.heads = s.kv_heads = 16;
    s.path.block_size = 64;
    const std::string name = std::string("fwdbwd_h16/") + scheme_name(scheme) + "/b64";
    benchmark::RegisterBenchmark(name.c_str(), timed, s, bench::Pass::Both)
        ->Apply(bench::thread_scaling_shapes);
  }
  return true;
}();

}  // namespace
}  // namespace lcr
