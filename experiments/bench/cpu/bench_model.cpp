// One training step (forward + backward + AdamW) of a small float32 model, per scheme, and
// the model's GEMM at a projection-sized shape. Tokens/s is the number to compare.
#include <benchmark/benchmark.h>

#include <random>

#include "core/model/gemm.hpp"
#include "core/model/model.hpp"
#include "core/model/optimizer.hpp"

namespace {

using namespace lcr;

ModelConfig bench_config(Scheme s) {
  ModelConfig c;
  c.vocab_size = 256;
  c.d_model = 128;
  c.n_layers = 2;
  c.attention.scheme = s;
  c.attention.heads = 4;
  c.attention.kv_heads = 4;
  c.attention.head_dim = 32;
  c.attention.goat.train_len = 256;
  return c;
}

void BM_TrainStep(benchmark::State& state) {
  const Scheme scheme = Scheme(state.range(0));
  const int64_t B = 2, L = state.range(1);
  Model<float> m(bench_config(scheme), 1);
  AdamWConfig oc;
  AdamW<float> opt(oc, model_param_ranges(m.layout(), oc), m.layout().total());
  View2<int32_t> tok("tok", B, L), lab("lab", B, L);
  auto ht = Kokkos::create_mirror_view(tok);
  auto hl = Kokkos::create_mirror_view(lab);
  std::mt19937 gen(1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t) ht(b, t) = int32_t(gen() % 256);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t) hl(b, t) = t + 1 < L ? ht(b, t + 1) : -1;
  Kokkos::deep_copy(tok, ht);
  Kokkos::deep_copy(lab, hl);
  LocalAttention<float> attn;
  for (auto _ : state) {
    m.zero_grad();
    benchmark::DoNotOptimize(m.forward(tok, lab, attn));
    m.backward(attn);
    opt.step(m.params(), View1<const float>(m.grads()));
    Kokkos::fence();
  }
  state.SetLabel(scheme_name(scheme));
  state.counters["tokens/s"] =
      benchmark::Counter(double(B * L), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainStep)
    ->ArgsProduct({{int(Scheme::NoPE), int(Scheme::RoPE), int(Scheme::GOAT), int(Scheme::FoX),
                    int(Scheme::PaTH), int(Scheme::PaTHFoX)},
                   {256}})
    ->Unit(benchmark::kMillisecond);

void BM_Gemm(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  View1<float> A("A", M * K), B("B", K * N), C("C", M * N);
  Kokkos::deep_copy(A, 0.5f);
  Kokkos::deep_copy(B, 0.25f);
  for (auto _ : state) {
    gemm<float>(Trans::No, Trans::No, M, N, K, 1.0f, A.data(), B.data(), 0.0f, C.data());
    Kokkos::fence();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(M * N * K) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Gemm)->Args({512, 128, 128})->Args({512, 512, 128})->Unit(benchmark::kMicrosecond);

}  // namespace
