#pragma once
// Shared helpers of the model tests: tiny configurations, deterministic batches, host
// access to the parameter buffer.
#include <cstdint>
#include <random>
#include <string>

#include "core/model/model.hpp"
#include "core/model/optimizer.hpp"
#include "kernels/base/error.hpp"

namespace lcr::test {

// The gradient-check model of the brief: V = 11, D = 16, 2 layers, small heads.
inline ModelConfig tiny_config(Scheme scheme) {
  ModelConfig c;
  c.vocab_size = 11;
  c.d_model = 16;
  c.n_layers = 2;
  c.ffn_hidden = 24;
  c.init_std = 0.3;  // large enough that attention is far from uniform in a 7-token window
  c.attention.scheme = scheme;
  c.attention.heads = 2;
  c.attention.kv_heads = 1;  // GQA: both query heads read one KV head
  c.attention.head_dim = 8;
  if (is_goat(scheme)) {
    c.attention.head_dim = 10;  // d_c = 10 - (2 R + 2) = 4 with R = 2
    c.attention.goat.modes = 2;
    c.attention.goat.mlp_hidden = 3;
    c.attention.goat.feature_freqs = 2;
    c.attention.goat.train_len = 7;
    c.attention.goat.grid_width = 3;
  }
  // PaTH: blocks of 3 so a 7-token window has a partial block and a right-to-left scan.
  c.attention.path.block_size = 3;
  return c;
}

// Random tokens in [0, V) and next-token labels (the last position and every fifth row
// ignored with -1, so the ignore path is exercised).
struct Batch {
  View2<int32_t> tokens, labels;
};
inline Batch random_batch(int64_t B, int64_t L, int V, uint64_t seed) {
  Batch b{View2<int32_t>("tokens", B, L), View2<int32_t>("labels", B, L)};
  auto t = Kokkos::create_mirror_view(b.tokens);
  auto y = Kokkos::create_mirror_view(b.labels);
  std::mt19937_64 gen(seed);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < L; ++j) t(i, j) = int32_t(gen() % uint64_t(V));
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < L; ++j)
      y(i, j) = (j + 1 < L && (i * L + j) % 5 != 4) ? t(i, j + 1) : -1;
  Kokkos::deep_copy(b.tokens, t);
  Kokkos::deep_copy(b.labels, y);
  return b;
}

// Adds U(-a, a) to every parameter, so no parameter sits at a special point of its init
// (GOAT's zero w2, unit gains, zero sink) where a wrong gradient could still read zero;
// frozen ones (off-by-one's sink, fixed at 0) stay.
template <class T>
void jitter_params(Model<T>& m, double a, uint64_t seed) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), m.params());
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-a, a);
  for (size_t i = 0; i < h.extent(0); ++i) h(i) += T(u(gen));
  for (const auto& r : model_param_ranges(m.layout(), AdamWConfig{}))
    for (int64_t i = 0; r.frozen && i < r.size; ++i) h(r.offset + i) = T(0);
  Kokkos::deep_copy(m.params(), h);
}

template <class T>
T get_param(const Model<T>& m, int64_t i) {
  T v;
  Kokkos::deep_copy(Kokkos::View<T, HostSpace>(&v), Kokkos::subview(m.params(), i));
  return v;
}
template <class T>
void set_param(const Model<T>& m, int64_t i, T v) {
  Kokkos::deep_copy(Kokkos::subview(m.params(), i), v);
}

// True when the error is a scheme lane another engineer has not landed yet.
inline bool not_implemented(const Error& e) {
  return std::string(e.what()).find("not implemented") != std::string::npos;
}

}  // namespace lcr::test
