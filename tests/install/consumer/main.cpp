// One causal NoPE attention call through lcr's installed API. The first query sees only
// the first key, so its output row must equal v's first row exactly: a check that needs no
// reference implementation.
#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdio>

#include "kernels/attention/attention.hpp"

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  lcr::AttentionSpec spec;
  spec.scheme = lcr::Scheme::NoPE;
  spec.heads = 2;
  spec.kv_heads = 2;
  spec.head_dim = 8;
  const int B = 1, L = 16;
  lcr::View4<double> q("q", B, L, 2, 8), k("k", B, L, 2, 8), v("v", B, L, 2, 8);
  auto hq = Kokkos::create_mirror_view(q), hk = Kokkos::create_mirror_view(k);
  auto hv = Kokkos::create_mirror_view(v);
  for (int i = 0; i < L; ++i)
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < 8; ++c) {
        hq(0, i, h, c) = std::sin(1.0 + i + 3 * h + 7 * c);
        hk(0, i, h, c) = std::cos(2.0 + i + 5 * h + 3 * c);
        hv(0, i, h, c) = 0.1 * (i - c) + h;
      }
  Kokkos::deep_copy(q, hq);
  Kokkos::deep_copy(k, hk);
  Kokkos::deep_copy(v, hv);

  lcr::AttentionInputs<double> in;
  in.q = q;
  in.k = k;
  in.v = v;
  lcr::ParamSet<double> params(lcr::attention_param_layout(spec));
  auto out = lcr::make_outputs(spec, in);
  lcr::attention_forward(spec, in, params, out);

  auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out.o);
  auto hl = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out.lse);
  double err = 0;
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 8; ++c) err = std::fmax(err, std::fabs(ho(0, 0, h, c) - hv(0, 0, h, c)));
  const bool ok = err < 1e-12 && std::isfinite(hl(0, 1, L - 1));
  std::printf("lcr consumer: NoPE forward B=%d L=%d H=2 d=8 on %s: |o[0]-v[0]| = %.1e, %s\n", B, L,
              Kokkos::DefaultExecutionSpace::name(), err, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
