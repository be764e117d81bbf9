// Benchmark of the CUDA PaTH / PaTH-FoX kernels (path.hpp), forward and backward, by default
// at (1,16,16384,64), (1,16,16384,128) and (1,8,65536,64); docs/cuda.md (PaTH section) has the
// command and the measured figures.
//
//   bench_cuda_path [--shapes "B,H,L,D;..."] [--fox] [--no-autotune] [--profile] [--reps N]
//                   [--chunks "Lc,Lc,..."] [--warp-rows 16|32]
//
// Autotunes like Triton does: times every built variant of the tuning knob (path.hpp:
// warp_rows, the backward's carry kernel; the forward has none), then with the
// fastest of those the chunked form (chunked.hpp) at each chunk length of --chunks that
// divides L (default 1024,2048,4096,8192; "0": none), prints each as "  variant ..." and then
// one headline line per shape and scheme with the fastest forward + backward, e.g.
//   lcr-path PaTH B=1 H=16 L=16384 D=64 superchunk=1024 warp_rows=32 chunk=2048
//     fwd_ms=3.10 bwd_ms=9.80 fwd_tflops=177.3 bwd_tflops=140.2 finite=1
// (chunk=0: the whole-sequence kernels.)
// FLOPs are counted as 4 B H L^2 D / 2 forward and 2.5 times that backward (the convention
// of the peer table in DEVICE.md). Times are medians over --reps runs after two warm-ups,
// CUDA events around each call; inputs are fresh random data (q, k, v ~ N(0, 1) in bf16, w
// unit rows, beta = 2 sigmoid(N(0, 1)), FoX gates log sigmoid(2 + N(0, 1)) summed).
// --no-autotune times the automatic choices only (and the automatic chunk length), or with
// --warp-rows / --bwd-warp-rows those variants (for a profiler); --profile prints each kernel's
// time once (forward, then backward) for the fastest variant.
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
#include "kernels/attention/cuda/path/chunked.hpp"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/attention/cuda/path/plan.hpp"

namespace {

using lcr::cuda::path::Args;
using lcr::cuda::path::Grads;

__device__ float hash_normal(uint64_t i, uint64_t seed) {
  auto mix = [](uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
  };
  const uint64_t a = mix(i * 2 + seed * 0x9e3779b97f4a7c15ULL), b = mix(i * 2 + 1 + seed);
  const float u1 = (float(a >> 40) + 0.5f) / 16777216.f, u2 = float(b >> 40) / 16777216.f;
  return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}

__global__ void fill_bf16(__nv_bfloat16* x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16(hash_normal(uint64_t(i), seed));
}

// Unit rows of w and beta = min(2 sigmoid(N(0,1)), 2 - 2^-10), one thread per row.
__global__ void fill_w_beta(float* w, float* beta, int64_t rows, int D, uint64_t seed) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    float ss = 0.f;
    for (int c = 0; c < D; ++c) {
      const float v = hash_normal(uint64_t(r * D + c), seed);
      w[r * D + c] = v;
      ss += v * v;
    }
    const float inv = rsqrtf(ss);
    for (int c = 0; c < D; ++c) w[r * D + c] *= inv;
    beta[r] = fminf(2.f / (1.f + expf(-hash_normal(uint64_t(r), seed + 7))), 2.f - 1.f / 1024.f);
  }
}

// c_t = sum_{s <= t} log sigmoid(2 + N(0,1)), one thread per (b, h): [B, L, H].
__global__ void fill_fox(float* c, int B, int L, int H, uint64_t seed) {
  const int bh = blockIdx.x * blockDim.x + threadIdx.x;
  if (bh >= B * H) return;
  const int b = bh / H, h = bh % H;
  float acc = 0.f;
  for (int t = 0; t < L; ++t) {
    acc -= log1pf(expf(-(2.f + hash_normal(uint64_t(bh) * L + t, seed))));
    c[(int64_t(b) * L + t) * H + h] = acc;
  }
}

template <class T>
T* dalloc(std::size_t n) {
  T* p = nullptr;
  LCR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T) + 256));
  return p;
}

template <class F>
double median_ms(int reps, F&& f) {
  cudaEvent_t a, b;
  LCR_CUDA_CHECK(cudaEventCreate(&a));
  LCR_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    LCR_CUDA_CHECK(cudaEventRecord(a));
    f();
    LCR_CUDA_CHECK(cudaEventRecord(b));
    LCR_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0.f;
    LCR_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  LCR_CUDA_CHECK(cudaEventDestroy(a));
  LCR_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Shape {
  int B, H, L, D;
};

void run(const Shape& s, bool fox, bool autotune, bool profile, int reps,
         const std::vector<int>& chunks, int warp_rows) {
  const std::size_t nq = std::size_t(s.B) * s.L * s.H * s.D, nr = std::size_t(s.B) * s.L * s.H;
  Args a;
  a.B = s.B, a.H = s.H, a.Hkv = s.H, a.L = s.L, a.D = s.D;
  auto* q = dalloc<__nv_bfloat16>(nq);
  auto* k = dalloc<__nv_bfloat16>(nq);
  auto* v = dalloc<__nv_bfloat16>(nq);
  auto* dout = dalloc<__nv_bfloat16>(nq);
  auto* o = dalloc<__nv_bfloat16>(nq);
  auto* w = dalloc<float>(nq);
  auto* beta = dalloc<float>(nr);
  auto* lse = dalloc<float>(nr);
  fill_bf16<<<1024, 256>>>(q, int64_t(nq), 1);
  fill_bf16<<<1024, 256>>>(k, int64_t(nq), 2);
  fill_bf16<<<1024, 256>>>(v, int64_t(nq), 3);
  fill_bf16<<<1024, 256>>>(dout, int64_t(nq), 4);
  fill_w_beta<<<1024, 128>>>(w, beta, int64_t(nr), s.D, 5);
  LCR_CUDA_CHECK_LAUNCH();
  a.q = q, a.k = k, a.v = v, a.w = w, a.beta = beta;
  float* fq = nullptr;
  if (fox) {
    fq = dalloc<float>(nr);
    fill_fox<<<(s.B * s.H + 63) / 64, 64>>>(fq, s.B, s.L, s.H, 6);
    LCR_CUDA_CHECK_LAUNCH();
    a.fox_q = a.fox_k = fq;
  }
  Grads g;
  g.dq = dalloc<float>(nq);
  g.dk = dalloc<float>(nq);
  g.dv = dalloc<float>(nq);
  g.dw = dalloc<float>(nq);
  g.dbeta = dalloc<float>(nr);
  if (fox) g.dfox_q = dalloc<float>(nr), g.dfox_k = dalloc<float>(nr);
  const double flops = 4.0 * s.B * s.H * double(s.L) * s.L * s.D / 2;
  const std::size_t fws = lcr::cuda::path::forward_workspace_bytes(a);
  const std::size_t bws = lcr::cuda::path::backward_workspace_bytes(a);
  void* ws = dalloc<unsigned char>(std::max(fws, bws));
  auto fwd = [&] { lcr::cuda::path::forward(a, o, lse, ws, fws, nullptr); };
  auto bwd = [&] { lcr::cuda::path::backward(a, o, lse, dout, g, ws, bws, nullptr); };
  const char* scheme = fox ? "PaTH-FoX" : "PaTH";
  const auto plan = lcr::cuda::path::detail::make_plan(a, true);
  // The forward, then the backward's variants (warp_rows of the carry kernel); every variant
  // is printed, the fastest is the headline.
  a.warp_rows = warp_rows;
  double best_f = median_ms(reps, fwd);
  fwd();
  std::vector<int> wrs{warp_rows};
  if (autotune) wrs = {16, 32};
  double best_b = 1e30;
  int bw = wrs[0];
  for (int wr : wrs) {
    a.warp_rows = wr;
    const double ms = median_ms(reps, bwd);
    if (autotune)
      std::printf("  variant %s D=%d L=%d backward warp_rows=%d fwd_ms=%.3f bwd_ms=%.3f\n", scheme,
                  s.D, s.L, wr, best_f, ms);
    if (ms < best_b) best_b = ms, bw = wr;
  }
  a.warp_rows = bw;
  // The chunked form with the fastest variant's settings, per chunk length dividing L.
  const double whole_f = best_f, whole_b = best_b;
  int best_chunk = 0, fastest_chunked = 0;
  double chunked_total = 1e30;
  const std::vector<int> tries =
      autotune ? chunks : std::vector<int>{lcr::cuda::path::Chunked().chunk_length(a)};
  for (int Lc : tries) {
    if (Lc <= 0 || Lc >= s.L || s.L % Lc) continue;
    lcr::cuda::path::Chunked ch(Lc);
    const double f_ms = median_ms(reps, [&] { ch.forward(a, o, lse, nullptr); });
    ch.forward(a, o, lse, nullptr);
    const double b_ms = median_ms(reps, [&] { ch.backward(a, o, lse, dout, g, nullptr); });
    std::printf("  variant %s D=%d L=%d chunked chunk=%d fwd_ms=%.3f bwd_ms=%.3f (%.1f MB)\n",
                scheme, s.D, s.L, Lc, f_ms, b_ms, ch.bytes() / 1e6);
    if (f_ms + b_ms < chunked_total) chunked_total = f_ms + b_ms, fastest_chunked = Lc;
    if (f_ms + b_ms < best_f + best_b) best_f = f_ms, best_b = b_ms, best_chunk = Lc;
  }
  lcr::cuda::path::Chunked best(best_chunk > 0 ? best_chunk : s.L);
  best.forward(a, o, lse, nullptr);
  best.backward(a, o, lse, dout, g, nullptr);
  // Sanity: the output and a gradient are finite.
  std::vector<__nv_bfloat16> oh(std::min<std::size_t>(nq, 4096));
  std::vector<float> gh(std::min<std::size_t>(nq, 4096));
  LCR_CUDA_CHECK(cudaMemcpy(oh.data(), o + nq - oh.size(), oh.size() * 2, cudaMemcpyDeviceToHost));
  LCR_CUDA_CHECK(cudaMemcpy(gh.data(), g.dw, gh.size() * 4, cudaMemcpyDeviceToHost));
  bool finite = true;
  for (auto x : oh) finite = finite && std::isfinite(__bfloat162float(x));
  for (auto x : gh) finite = finite && std::isfinite(x);
  std::printf(
      "lcr-path %s B=%d H=%d L=%d D=%d superchunk=%d warp_rows=%d chunk=%d fwd_ms=%.3f "
      "bwd_ms=%.3f fwd_tflops=%.1f bwd_tflops=%.1f finite=%d\n",
      scheme, s.B, s.H, s.L, s.D, plan.R * 64, bw, best_chunk, best_f, best_b,
      flops / best_f * 1e-9, 2.5 * flops / best_b * 1e-9, int(finite));
  std::fflush(stdout);
  if (profile) {  // the whole-sequence kernels, then the fastest chunked form
    std::printf("  profile whole-sequence (fwd %.3f ms, bwd %.3f ms)\n", whole_f, whole_b);
    lcr::cuda::path::detail::set_profiling(true);
    fwd();
    std::printf("%s", lcr::cuda::path::detail::profile_report().c_str());
    bwd();
    std::printf("%s", lcr::cuda::path::detail::profile_report().c_str());
    if (fastest_chunked > 0) {
      std::printf("  profile chunk=%d\n", fastest_chunked);
      lcr::cuda::path::Chunked ch(fastest_chunked);
      ch.forward(a, o, lse, nullptr);  // allocations outside the profile
      ch.forward(a, o, lse, nullptr);
      std::printf("%s", lcr::cuda::path::detail::profile_report().c_str());
      ch.backward(a, o, lse, dout, g, nullptr);
      std::printf("%s", lcr::cuda::path::detail::profile_report().c_str());
    }
    lcr::cuda::path::detail::set_profiling(false);
    std::fflush(stdout);
  }
  LCR_CUDA_CHECK(cudaFree(ws));
  for (void* p : std::vector<void*>{q, k, v, dout, o, w, beta, lse, fq, g.dq, g.dk, g.dv, g.dw,
                                    g.dbeta, g.dfox_q, g.dfox_k})
    if (p) LCR_CUDA_CHECK(cudaFree(p));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes{{1, 16, 16384, 64}, {1, 16, 16384, 128}, {1, 8, 65536, 64}};
  bool fox = false, autotune = true, profile = false;
  int reps = 10, warp_rows = 0;
  std::vector<int> chunks{1024, 2048, 4096, 8192};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--fox") {
      fox = true;
    } else if (arg == "--no-autotune") {
      autotune = false;
    } else if (arg == "--profile") {
      profile = true;
    } else if (arg == "--warp-rows" && i + 1 < argc) {
      warp_rows = std::atoi(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--chunks" && i + 1 < argc) {
      chunks.clear();
      for (const char* p = argv[++i]; *p;) {  // "1024,2048": stops at anything else
        char* end = nullptr;
        const long v = std::strtol(p, &end, 10);
        if (end == p) break;
        chunks.push_back(int(v));
        p = *end == ',' ? end + 1 : end;
      }
    } else if (arg == "--shapes" && i + 1 < argc) {
      shapes.clear();
      std::string list = argv[++i];
      for (std::size_t at = 0; at < list.size();) {
        const std::size_t end = list.find(';', at);
        const std::string one = list.substr(at, end == std::string::npos ? end : end - at);
        Shape s{};
        if (std::sscanf(one.c_str(), "%d,%d,%d,%d", &s.B, &s.H, &s.L, &s.D) == 4)
          shapes.push_back(s);
        at = end == std::string::npos ? list.size() : end + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: %s [--shapes \"B,H,L,D;...\"] [--fox] [--no-autotune] [--profile] "
                   "[--reps N] [--chunks \"Lc,...\"] [--warp-rows 16|32]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    for (const Shape& s : shapes) run(s, fox, autotune, profile, reps, chunks, warp_rows);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_path: %s\n", e.what());
    return 1;
  }
  return 0;
}
