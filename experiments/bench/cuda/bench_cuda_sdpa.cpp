// Timing of the CUDA SDPA (kernels/attention/cuda) with CUDA events: median of --reps
// launches after --warmup, inputs rotated over --sets copies so that repeated launches do
// not run out of L2. Prints one CSV row per (direction, tile variant):
//   impl,dir,B,H,Hkv,L,D,Dv,variant,ms,tflops      (impl: lcr, or lcr-cudnn with --impl cudnn)
// FLOPs (causal, the convention of torch/FlashAttention benchmarks): forward
// 2*B*H*L^2*(D+Dv)/2 (= 4*B*H*L^2*D/2 for D = Dv), backward 2.5x that.
//   bench_cuda_sdpa --B 1 --H 16 --L 16384 --D 64 [--Dv 64] [--Hkv 16] [--variants all]
//                   [--bias] [--alibi] [--impl lcr|cudnn]
// --impl cudnn times cuDNN's fused attention through the same public calls (sdpa.hpp,
// SdpaImpl::Cudnn; the backward includes widening cuDNN's bf16 dK, dV and [B,H,L,D] dQ into
// lcr's fp32 gradients); the impl column then reads "lcr-cudnn".
// --bias times the option path with FoX-like bias lanes (c_i - c_j, c = -0.01 position)
// and, in the backward, the key lane's gradient (FoX takes the query lane's in closed
// form, attention_cuda.cpp); the variant name gets "+bias". --alibi adds ALiBi slopes
// 2^(-8 (h+1) / H) ("+alibi"). --dq-8b puts dq 8 bytes off a 16-byte boundary, which takes
// the wgmma backward's per-thread atomics instead of its bulk reductions ("+dq8b").
// --variants all times every tiling of the width class in the tuning library (sdpa_tuning.hpp,
// linked only here and by the tests); the default times variant 0, the one sdpa_forward /
// sdpa_backward use (sdpa_heuristics.hpp).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/attention/cuda/sdpa.hpp"
#include "kernels/attention/cuda/sdpa_internal.hpp"
#include "kernels/attention/cuda/sdpa_tuning.hpp"
#include "kernels/base/error.hpp"

using lcr::cuda::DeviceBuffer;
using lcr::cuda::SdpaArgs;
using bf16 = __nv_bfloat16;

namespace {

struct Opts {
  int B = 1, H = 16, Hkv = 0, L = 16384, D = 64, Dv = 0, reps = 20, warmup = 3, sets = 3;
  bool all_variants = false, fwd = true, bwd = true, bias = false, alibi = false;
  bool dq_8b = false;  // dq 8 bytes off a 16-byte boundary: the wgmma backward's atomics
  lcr::cuda::SdpaImpl impl = lcr::cuda::SdpaImpl::Lcr;
};

Opts parse(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> int {
      lcr::require(i + 1 < argc, "bench_cuda_sdpa: ", k, " needs a value");
      return std::atoi(argv[++i]);
    };
    if (k == "--B")
      o.B = val();
    else if (k == "--H")
      o.H = val();
    else if (k == "--Hkv")
      o.Hkv = val();
    else if (k == "--L")
      o.L = val();
    else if (k == "--D")
      o.D = val();
    else if (k == "--Dv")
      o.Dv = val();
    else if (k == "--reps")
      o.reps = val();
    else if (k == "--warmup")
      o.warmup = val();
    else if (k == "--sets")
      o.sets = val();
    else if (k == "--variants") {
      lcr::require(i + 1 < argc, "bench_cuda_sdpa: --variants needs all or default");
      o.all_variants = std::strcmp(argv[++i], "all") == 0;
    } else if (k == "--impl") {
      lcr::require(i + 1 < argc, "bench_cuda_sdpa: --impl needs lcr or cudnn");
      o.impl = lcr::cuda::parse_sdpa_impl(argv[++i]);
    } else if (k == "--bias")
      o.bias = true;
    else if (k == "--alibi")
      o.alibi = true;
    else if (k == "--fwd-only")
      o.bwd = false;
    else if (k == "--bwd-only")
      o.fwd = false;
    else if (k == "--dq-8b")
      o.dq_8b = true;
    else
      lcr::throw_error("bench_cuda_sdpa: unknown option ", k,
                       " (use --B --H --Hkv --L --D --Dv --reps --warmup --sets --variants all "
                       "--bias --alibi --impl --fwd-only --bwd-only --dq-8b)");
  }
  if (o.Hkv == 0) o.Hkv = o.H;
  if (o.Dv == 0) o.Dv = o.D;
  lcr::require(o.reps >= 1 && o.sets >= 1, "bench_cuda_sdpa: --reps and --sets must be >= 1");
  return o;
}

// Unit-variance values (uniform on [-sqrt 3, sqrt 3]) from a xorshift generator: the
// large shapes draw ~1e9 of them, too many for std::normal_distribution in a short run.
std::vector<bf16> random_bf16(size_t n, uint64_t& state) {
  std::vector<bf16> x(n);
  for (auto& e : x) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    e = __float2bfloat16(1.7320508f * (float(state >> 40) * (2.f / 16777216.f) - 1.f));
  }
  return x;
}

struct Set {  // one rotating copy of the inputs and the buffers the kernels write
  DeviceBuffer<bf16> q, k, v, o, dout;
  DeviceBuffer<float> lse, delta, dq, dk, dv;
  DeviceBuffer<float> cq, ck, dck;  // --bias: bias lanes [B, L, H], key lane gradient
  DeviceBuffer<float> slopes;       // --alibi: [H]
};

// Median milliseconds of `fn(set index)` over o.reps launches.
template <class F>
float time_ms(const Opts& o, F fn) {
  for (int w = 0; w < o.warmup; ++w) fn(w % o.sets);
  LCR_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  LCR_CUDA_CHECK(cudaEventCreate(&e0));
  LCR_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < o.reps; ++r) {
    LCR_CUDA_CHECK(cudaEventRecord(e0));
    fn(r % o.sets);
    LCR_CUDA_CHECK(cudaEventRecord(e1));
    LCR_CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0.f;
    LCR_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  LCR_CUDA_CHECK(cudaEventDestroy(e0));
  LCR_CUDA_CHECK(cudaEventDestroy(e1));
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

int run(const Opts& o) {
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  const size_t nq = size_t(o.B) * o.L * o.H, nk = size_t(o.B) * o.L * o.Hkv;
  std::vector<Set> sets(o.sets);
  for (auto& s : sets) {
    s.q = DeviceBuffer<bf16>(random_bf16(nq * o.D, rng));
    s.k = DeviceBuffer<bf16>(random_bf16(nk * o.D, rng));
    s.v = DeviceBuffer<bf16>(random_bf16(nk * o.Dv, rng));
    s.dout = DeviceBuffer<bf16>(random_bf16(nq * o.Dv, rng));
    s.o = DeviceBuffer<bf16>(nq * o.Dv);
    s.lse = DeviceBuffer<float>(nq);
    s.delta = DeviceBuffer<float>(nq);
    s.dq = DeviceBuffer<float>(nq * o.D + 2);
    s.dk = DeviceBuffer<float>(nk * o.D);
    s.dv = DeviceBuffer<float>(nk * o.Dv);
    if (o.bias) {
      std::vector<float> c(nq);  // FoX-like: c = -0.01 * position, same for every head
      for (size_t e = 0; e < nq; ++e) c[e] = -0.01f * float((e / o.H) % o.L);
      s.cq = DeviceBuffer<float>(c);
      s.ck = DeviceBuffer<float>(c);
      s.dck = DeviceBuffer<float>(nq);
    }
    if (o.alibi) {
      std::vector<float> sl(o.H);
      for (int h = 0; h < o.H; ++h) sl[h] = float(std::exp2(-8.0 * (h + 1) / o.H));
      s.slopes = DeviceBuffer<float>(sl);
    }
  }
  auto args = [&](Set& s) {
    SdpaArgs a;
    a.B = o.B, a.Lq = o.L, a.Lk = o.L, a.H = o.H, a.Hkv = o.Hkv, a.D = o.D, a.Dv = o.Dv;
    a.q = s.q.data(), a.k = s.k.data(), a.v = s.v.data();
    a.scale = 1.f / std::sqrt(float(o.D));
    if (o.bias) a.bias_q = s.cq.data(), a.bias_k = s.ck.data();
    if (o.alibi) a.alibi_slopes = s.slopes.data();
    return a;
  };
  // Every set gets a real forward first: the backward needs its O and lse.
  for (auto& s : sets) lcr::cuda::sdpa_forward(args(s), s.o.data(), nullptr, s.lse.data(), 0);
  LCR_CUDA_CHECK(cudaDeviceSynchronize());

  const double flop_fwd = 2.0 * o.B * o.H * double(o.L) * o.L * (o.D + o.Dv) / 2;
  auto report = [&](const char* dir, const char* variant, float ms, double flop) {
    std::printf("%s,%s,%d,%d,%d,%d,%d,%d,%s%s%s%s,%.4f,%.1f\n",
                o.impl == lcr::cuda::SdpaImpl::Lcr ? "lcr" : "lcr-cudnn", dir, o.B, o.H, o.Hkv, o.L,
                o.D, o.Dv, variant, o.bias ? "+bias" : "", o.alibi ? "+alibi" : "",
                o.dq_8b && std::strcmp(dir, "bwd") == 0 ? "+dq8b" : "", ms,
                flop / (ms * 1e-3) / 1e12);
    std::fflush(stdout);
  };
  if (o.impl != lcr::cuda::SdpaImpl::Lcr) {  // the public calls on the vendor implementation
    auto vargs = [&](Set& s) {
      SdpaArgs a = args(s);
      a.impl = o.impl;
      return a;
    };
    if (o.fwd)
      report("fwd", "cudnn",
             time_ms(o,
                     [&](int i) {
                       lcr::cuda::sdpa_forward(vargs(sets[i]), sets[i].o.data(), nullptr,
                                               sets[i].lse.data(), 0);
                     }),
             flop_fwd);
    for (auto& s : sets) lcr::cuda::sdpa_forward(vargs(s), s.o.data(), nullptr, s.lse.data(), 0);
    if (o.bwd)
      report("bwd", "cudnn",
             time_ms(o,
                     [&](int i) {
                       Set& s = sets[i];
                       lcr::cuda::sdpa_backward(vargs(s), s.lse.data(), s.delta.data(),
                                                s.dout.data(), s.dq.data(), s.dk.data(),
                                                s.dv.data(), nullptr, nullptr, false, 0, nullptr,
                                                s.o.data());
                     }),
             2.5 * flop_fwd);
    LCR_CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
  }
  using namespace lcr::cuda::detail;
  for (int var = 0; o.fwd; ++var) {
    const SdpaVariant* v = forward_variant(o.D, o.Dv, var);
    if (!v || (!o.all_variants && var > 0)) break;
    auto fwd = [&](int i) {
      KernelParams p;
      p.a = args(sets[i]);
      p.o = sets[i].o.data();
      p.lse = sets[i].lse.data();
      return launch_forward(p, v->kernels, 0);
    };
    if (!fwd(0)) continue;  // a tiling without the path these arguments take (--bias)
    report("fwd", v->name.c_str(), time_ms(o, fwd), flop_fwd);
  }
  for (auto& s : sets) lcr::cuda::sdpa_forward(args(s), s.o.data(), nullptr, s.lse.data(), 0);
  for (int var = 0; o.bwd; ++var) {
    const SdpaVariant* v = backward_variant(o.D, o.Dv, var);
    if (!v || (!o.all_variants && var > 0)) break;
    // Timed like torch's backward: row delta, dq zeroing and the gradient kernel.
    auto bwd = [&](int i) {
      Set& s = sets[i];
      lcr::cuda::sdpa_row_delta(o.B, o.L, o.H, o.Dv, s.o.data(), s.dout.data(), s.delta.data(), 0);
      KernelParams p;
      p.a = args(s);
      p.lse_in = s.lse.data(), p.delta = s.delta.data(), p.dout = s.dout.data();
      p.dq = s.dq.data() + (o.dq_8b ? 2 : 0), p.dk = s.dk.data(), p.dv = s.dv.data();
      if (o.bias) p.dbias_k = s.dck.data();
      return launch_backward(p, v->kernels, 0);
    };
    if (!bwd(0)) continue;
    report("bwd", v->name.c_str(), time_ms(o, bwd), 2.5 * flop_fwd);
  }
  LCR_CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_sdpa: %s\n", e.what());
    return 1;
  }
}
