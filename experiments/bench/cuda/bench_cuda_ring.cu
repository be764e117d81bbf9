// bench_cuda_ring: parallel efficiency of the GPU ring (docs/cuda.md, "NCCL ring").
//
//   mpirun -np 2 bench_cuda_ring [--L 131072] [--B 1] [--H 16] [--Hkv H] [--D 64,128]
//                               [--layout zigzag] [--warmup 1] [--iters 3] [--scheme sdpa]
//                               [--split N] [--path-1gpu chunked|whole]
//
// For each head width: the whole causal sequence through the single-GPU kernel on rank 0's
// GPU (sdpa: forward; backward = row delta + sdpa_backward; path: the fastest single-GPU
// PaTH, cuda::path::Chunked with its automatic chunk length, chunked.hpp; --path-whole: the
// whole-sequence PaTH kernels instead), then the ring on all ranks (each holding L / N positions),
// its layout's chunks cut into `split` pieces (layout.hpp; with one rank and path, the chunked
// single-GPU PaTH). Efficiency = t_1gpu / (N t_ring), with the median time
// of `iters` runs after `warmup`, t_ring the slowest rank's. Also the per-step compute
// and wait (compute stream idle on a transfer) of the last ring run, per rank. Rank 0
// prints a table and one "RESULT,..." CSV line per (D, pass) for the benchmark driver.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/attention/cuda/sdpa.hpp"
#include "kernels/base/timer.hpp"
#include "parallel/comm/mpi/mpi_communicator.hpp"
#include "parallel/ring/cuda/ring_cuda.hpp"
#if defined(LCR_HAVE_CUDA_PATH_RING)
#include "kernels/attention/cuda/path/chunked.hpp"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/attention/cuda/path/plan.hpp"
#include "parallel/ring/cuda/path_ring_cuda.hpp"
#endif

namespace {

using lcr::cuda::DeviceBuffer;
using bf16 = __nv_bfloat16;

// Fresh pseudo-random bf16 values of unit variance (uniform on [-sqrt 3, sqrt 3]).
__global__ void fill_kernel(bf16* x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed + uint64_t(i) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = float(z >> 40) * (1.f / 16777216.f);
    x[i] = __float2bfloat16((u - 0.5f) * 3.4641016f);
  }
}

template <class T>
DeviceBuffer<T> buffer(int64_t n) {
  return DeviceBuffer<T>(static_cast<size_t>(n));
}

// PaTH's inputs: unit rows w [rows, D] from the same generator, beta in (0, 1.99).
__global__ void unit_rows_kernel(float* w, int64_t rows, int D, uint64_t seed) {
  const int64_t r = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  float* x = w + r * D;
  float ss = 0.f;
  for (int c = threadIdx.x % 32; c < D; c += 32) {
    uint64_t z = seed + uint64_t(r * D + c) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[c] = float(z >> 40) * (1.f / 16777216.f) - 0.5f;
    ss += x[c] * x[c];
  }
  for (int m = 16; m > 0; m >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, m);
  const float inv = rsqrtf(ss);
  for (int c = threadIdx.x % 32; c < D; c += 32) x[c] *= inv;
}
__global__ void beta_kernel(float* b, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed + uint64_t(i) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 29;
    b[i] = 1.99f * float(z >> 40) * (1.f / 16777216.f);
  }
}

DeviceBuffer<bf16> random_bf16(int64_t n, uint64_t seed) {
  DeviceBuffer<bf16> b(static_cast<size_t>(n));
  fill_kernel<<<1024, 256>>>(b.data(), n, seed);
  LCR_CUDA_CHECK_LAUNCH();
  return b;
}

struct Options {
  int64_t L = 131072;
  int B = 1, H = 16, Hkv = 0, warmup = 1, iters = 3;  // Hkv 0: = H (no GQA)
  int split = -1;                                     // -1: path 0 (path_ring_split per D), sdpa 1
  std::vector<int> D{64, 128};
  std::string layout = "zigzag";
  std::string scheme = "sdpa";  // sdpa | path
  bool path_whole = false;      // --path-1gpu whole: the 1-GPU PaTH without chunks
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    lcr::require(i + 1 < argc, "bench_cuda_ring: ", a, " needs a value");
    const std::string v = argv[++i];
    if (a == "--L")
      o.L = std::stoll(v);
    else if (a == "--B")
      o.B = std::stoi(v);
    else if (a == "--H")
      o.H = std::stoi(v);
    else if (a == "--Hkv")
      o.Hkv = std::stoi(v);
    else if (a == "--warmup")
      o.warmup = std::stoi(v);
    else if (a == "--iters")
      o.iters = std::stoi(v);
    else if (a == "--layout")
      o.layout = v;
    else if (a == "--scheme")
      o.scheme = v;
    else if (a == "--split")
      o.split = std::stoi(v);
    else if (a == "--path-1gpu") {
      lcr::require(v == "chunked" || v == "whole",
                   "bench_cuda_ring: --path-1gpu takes chunked or whole, got ", v);
      o.path_whole = v == "whole";
    } else if (a == "--D") {
      o.D.clear();
      std::stringstream ss(v);
      for (std::string t; std::getline(ss, t, ',');) o.D.push_back(std::stoi(t));
    } else
      lcr::throw_error("bench_cuda_ring: unknown option ", a,
                       " (valid: --L --B --H --Hkv --D --layout --warmup --iters --scheme --split "
                       "--path-1gpu)");
  }
  lcr::require(o.iters >= 1 && o.warmup >= 0, "bench_cuda_ring: --iters >= 1, --warmup >= 0");
  if (o.Hkv == 0) o.Hkv = o.H;  // --H 8 alone means 8 KV heads too, not GQA against 16
  if (o.split < 0) o.split = o.scheme == "path" ? 0 : 1;
  lcr::require(o.split >= 1 || (o.split == 0 && o.scheme == "path"),
               "bench_cuda_ring: --split is >= 1 (or 0 for path: cuda::path_ring_split)");
#if defined(LCR_HAVE_CUDA_PATH_RING)
  lcr::require(o.scheme == "sdpa" || o.scheme == "path",
               "bench_cuda_ring: --scheme is sdpa or path, got ", o.scheme);
#else
  lcr::require(o.scheme == "sdpa", "bench_cuda_ring: --scheme ", o.scheme,
               " needs the CUDA PaTH kernels in the build; this one has sdpa only");
#endif
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of fn over warmup + iters runs (fn synchronises); pre runs untimed first.
template <class P, class F>
double time_runs(const Options& o, P&& pre, F&& fn) {
  std::vector<double> t;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    pre();
    const auto t0 = lcr::Clock::now();
    fn();
    const double s = lcr::seconds_since(t0);
    if (i >= o.warmup) t.push_back(s);
  }
  return median(t);
}

struct Times {
  double fwd = 0, bwd = 0;
};

// The whole sequence on one GPU.
Times single_gpu(const Options& o, int D, cudaStream_t s) {
  const int64_t L = o.L, nq = o.B * L * o.H, nk = o.B * L * o.Hkv;
  auto q = random_bf16(nq * D, 1), k = random_bf16(nk * D, 2), v = random_bf16(nk * D, 3);
  auto dout = random_bf16(nq * D, 4);
  auto out = buffer<bf16>(nq * D);
  auto lse = buffer<float>(nq), delta = buffer<float>(nq), dq = buffer<float>(nq * D);
  auto dk = buffer<float>(nk * D), dv = buffer<float>(nk * D);
  lcr::cuda::SdpaArgs a;
  a.B = o.B, a.Lq = a.Lk = int(L), a.H = o.H, a.Hkv = o.Hkv, a.D = a.Dv = D;
  a.q = q.data(), a.k = k.data(), a.v = v.data(), a.scale = 1.f / std::sqrt(float(D));
  LCR_CUDA_CHECK(cudaDeviceSynchronize());
  Times t;
  const auto nothing = [] {};
  t.fwd = time_runs(o, nothing, [&] {
    lcr::cuda::sdpa_forward(a, out.data(), nullptr, lse.data(), s);
    LCR_CUDA_CHECK(cudaStreamSynchronize(s));
  });
  t.bwd = time_runs(o, nothing, [&] {
    lcr::cuda::sdpa_row_delta(o.B, int(L), o.H, D, out.data(), dout.data(), delta.data(), s);
    lcr::cuda::sdpa_backward(a, lse.data(), delta.data(), dout.data(), dq.data(), dk.data(),
                             dv.data(), nullptr, nullptr, false, s);
    LCR_CUDA_CHECK(cudaStreamSynchronize(s));
  });
  return t;
}

#if defined(LCR_HAVE_CUDA_PATH_RING)
struct PathInputs {
  DeviceBuffer<bf16> q, k, v, dout;
  DeviceBuffer<float> w, beta;
};
PathInputs path_inputs(const Options& o, int64_t L, int D, uint64_t seed) {
  const int64_t nq = o.B * L * o.H, nk = o.B * L * o.Hkv;
  PathInputs in{random_bf16(nq * D, seed),     random_bf16(nk * D, seed + 1),
                random_bf16(nk * D, seed + 2), random_bf16(nq * D, seed + 3),
                buffer<float>(nk * D),         buffer<float>(nk)};
  unit_rows_kernel<<<int((nk + 7) / 8), 256>>>(in.w.data(), nk, D, seed + 4);
  beta_kernel<<<1024, 256>>>(in.beta.data(), nk, seed + 5);
  LCR_CUDA_CHECK_LAUNCH();
  return in;
}

Times single_gpu_path(const Options& o, int D, cudaStream_t s) {
  namespace P = lcr::cuda::path;
  const int64_t L = o.L, nq = o.B * L * o.H, nk = o.B * L * o.Hkv;
  PathInputs in = path_inputs(o, L, D, 1);
  P::Args a;
  a.B = o.B, a.L = int(L), a.H = o.H, a.Hkv = o.Hkv, a.D = D;
  a.q = in.q.data(), a.k = in.k.data(), a.v = in.v.data(), a.w = in.w.data(),
  a.beta = in.beta.data();
  auto out = buffer<bf16>(nq * D);
  auto lse = buffer<float>(nq), dq = buffer<float>(nq * D), dk = buffer<float>(nk * D);
  auto dv = buffer<float>(nk * D), dw = buffer<float>(nk * D), db = buffer<float>(nk);
  P::Chunked attn(o.path_whole ? -1 : 0);
  P::Grads g;
  g.dq = dq.data(), g.dk = dk.data(), g.dv = dv.data(), g.dw = dw.data(), g.dbeta = db.data();
  LCR_CUDA_CHECK(cudaDeviceSynchronize());
  Times t;
  const auto nothing = [] {};
  t.fwd = time_runs(o, nothing, [&] {
    attn.forward(a, out.data(), lse.data(), s);
    LCR_CUDA_CHECK(cudaStreamSynchronize(s));
  });
  t.bwd = time_runs(o, nothing, [&] {
    attn.backward(a, out.data(), lse.data(), in.dout.data(), g, s);
    LCR_CUDA_CHECK(cudaStreamSynchronize(s));
  });
  std::printf("1-GPU PaTH at D = %d: %s\n", D,
              attn.chunk_length(a) < a.L
                  ? ("chunked, " + std::to_string(attn.chunk_length(a)) + " positions").c_str()
                  : "whole-sequence kernels");
  return t;
}
#endif

double max_over_ranks(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

// Per step "compute/wait" in ms of one rank's stats, gathered to rank 0 as text.
std::string step_text(const lcr::RingStats& st) {
  std::string s;
  char buf[64];
  for (const auto& x : st.steps) {
    std::snprintf(buf, sizeof buf, "%s%.1f/%.2f", s.empty() ? "" : " ", 1e3 * x.compute_s,
                  1e3 * x.wait_s);
    s += buf;
  }
  return s;
}

std::vector<std::string> gather_text(const std::string& mine, int N) {
  char buf[512] = {};
  std::snprintf(buf, sizeof buf, "%s", mine.c_str());
  std::vector<char> all(512 * size_t(N));
  MPI_Gather(buf, 512, MPI_CHAR, all.data(), 512, MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < N; ++r) out.emplace_back(all.data() + 512 * size_t(r));
  return out;
}

// The ring's median times (the slowest rank's) for one head width; fst / bst: the last
// forward's / backward's step stats. Each allocates its own local inputs.
Times ring_sdpa(const Options& o, lcr::NcclCommunicator& comm, const lcr::SeqLayout& layout, int D,
                cudaStream_t s, lcr::RingStats& fst, lcr::RingStats& bst) {
  const int me = comm.rank();
  const int64_t Lr = layout.local_length(me), nq = o.B * Lr * o.H, nk = o.B * Lr * o.Hkv;
  auto q = random_bf16(nq * D, 11 + me), k = random_bf16(nk * D, 21 + me);
  auto v = random_bf16(nk * D, 31 + me), dout = random_bf16(nq * D, 41 + me);
  auto out = buffer<bf16>(nq * D);
  auto lse = buffer<float>(nq), dq = buffer<float>(nq * D);
  auto dk = buffer<float>(nk * D), dv = buffer<float>(nk * D);
  lcr::cuda::RingSdpa ring(comm, layout, o.B, o.H, o.Hkv, D, D, false, false);
  lcr::cuda::RingSdpaArgs a;
  a.B = o.B, a.H = o.H, a.Hkv = o.Hkv, a.D = a.Dv = D;
  a.q = q.data(), a.k = k.data(), a.v = v.data(), a.scale = 1.f / std::sqrt(float(D));
  lcr::cuda::RingSdpaGrads g;
  g.dq = dq.data(), g.dk = dk.data(), g.dv = dv.data();
  LCR_CUDA_CHECK(cudaDeviceSynchronize());
  const auto align = [&] { comm.barrier(); };  // start every rank together, untimed
  Times tr;
  tr.fwd = max_over_ranks(
      time_runs(o, align, [&] { fst = ring.forward(a, out.data(), lse.data(), s); }));
  tr.bwd = max_over_ranks(time_runs(
      o, align, [&] { bst = ring.backward(a, out.data(), lse.data(), dout.data(), g, s); }));
  return tr;
}

#if defined(LCR_HAVE_CUDA_PATH_RING)
Times ring_path(const Options& o, lcr::NcclCommunicator& comm, const lcr::SeqLayout& layout, int D,
                cudaStream_t s, lcr::RingStats& fst, lcr::RingStats& bst) {
  const int me = comm.rank();
  const int64_t Lr = layout.local_length(me), nq = o.B * Lr * o.H, nk = o.B * Lr * o.Hkv;
  PathInputs in = path_inputs(o, Lr, D, 101 + 10 * uint64_t(me));
  auto out = buffer<bf16>(nq * D);
  auto lse = buffer<float>(nq), dq = buffer<float>(nq * D);
  auto dk = buffer<float>(nk * D), dv = buffer<float>(nk * D);
  auto dw = buffer<float>(nk * D), db = buffer<float>(nk);
  lcr::cuda::PathRing ring(comm, layout, o.B, o.H, o.Hkv, D, false);
  lcr::cuda::PathRingArgs a;
  a.B = o.B, a.H = o.H, a.Hkv = o.Hkv, a.D = D;
  a.q = in.q.data(), a.k = in.k.data(), a.v = in.v.data(), a.w = in.w.data();
  a.beta = in.beta.data();
  lcr::cuda::PathRingGrads g;
  g.dq = dq.data(), g.dk = dk.data(), g.dv = dv.data(), g.dw = dw.data(), g.dbeta = db.data();
  LCR_CUDA_CHECK(cudaDeviceSynchronize());
  const auto align = [&] { comm.barrier(); };
  Times tr;
  tr.fwd = max_over_ranks(
      time_runs(o, align, [&] { fst = ring.forward(a, out.data(), lse.data(), s); }));
  tr.bwd = max_over_ranks(time_runs(
      o, align, [&] { bst = ring.backward(a, out.data(), lse.data(), in.dout.data(), g, s); }));
  if (std::getenv("LCR_PATH_PROFILE") && me == 0) {  // the PaTH library's kernels, summed
    namespace PD = lcr::cuda::path::detail;
    PD::set_profiling(true);
    ring.forward(a, out.data(), lse.data(), s);
    std::printf("profile D=%d forward (PaTH library kernels, ms):\n%s", D,
                PD::profile_report().c_str());
    ring.backward(a, out.data(), lse.data(), in.dout.data(), g, s);
    std::printf("profile D=%d backward:\n%s", D, PD::profile_report().c_str());
    PD::set_profiling(false);
  }
  return tr;
}
#endif

void run(const Options& o) {
  auto comm = lcr::nccl_world();
  const int N = comm->size(), me = comm->rank();
  const lcr::SeqLayout base(lcr::parse_layout(o.layout), o.L, N, std::max(o.split, 1));
  const int64_t Lr = base.local_length(me);
  cudaStream_t s;
  LCR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (me == 0)
    std::printf(
        "bench_cuda_ring: scheme=%s L=%lld B=%d H=%d Hkv=%d layout=%s split=%d ranks=%d "
        "warmup=%d iters=%d\n",
        o.scheme.c_str(), (long long)o.L, o.B, o.H, o.Hkv, o.layout.c_str(), o.split, N, o.warmup,
        o.iters);
  std::printf("rank %d: GPU %d, %lld local positions\n", me, comm->device(), (long long)Lr);
  std::fflush(stdout);
  std::vector<std::string> rows;
  [[maybe_unused]] const bool path = o.scheme == "path";
  for (int D : o.D) {
    int split = std::max(o.split, 1);  // --split 0 (the default for path): path_ring_split
#if defined(LCR_HAVE_CUDA_PATH_RING)
    if (path && o.split == 0) split = lcr::cuda::path_ring_split(base, D);
#endif
    const lcr::SeqLayout layout(base.kind(), o.L, N, split);
    if (me == 0 && split != std::max(o.split, 1)) std::printf("D = %d: split %d\n", D, split);
    Times one;
#if defined(LCR_HAVE_CUDA_PATH_RING)
    if (me == 0) one = path ? single_gpu_path(o, D, s) : single_gpu(o, D, s);
#else
    if (me == 0) one = single_gpu(o, D, s);
#endif
    comm->barrier();
    lcr::RingStats fst, bst;
#if defined(LCR_HAVE_CUDA_PATH_RING)
    const Times tr = path ? ring_path(o, *comm, layout, D, s, fst, bst)
                          : ring_sdpa(o, *comm, layout, D, s, fst, bst);
#else
    const Times tr = ring_sdpa(o, *comm, layout, D, s, fst, bst);
#endif
    const auto fsteps = gather_text(step_text(fst), N), bsteps = gather_text(step_text(bst), N);
    if (me != 0) continue;
    const double flop = 4.0 * o.B * o.H * double(o.L) * double(o.L) * D / 2;
    for (int p = 0; p < 2; ++p) {
      const double t1 = p ? one.bwd : one.fwd, t = p ? tr.bwd : tr.fwd;
      const double f = p ? 2.5 * flop : flop, eff = t1 / (N * t);
      char line[1024];
      std::string steps;
      for (int r = 0; r < N; ++r)
        steps += " r" + std::to_string(r) + ": " + (p ? bsteps : fsteps)[r];
      std::snprintf(line, sizeof line, "| %3d | %s | %9.2f | %9.2f | %6.1f%% | %7.1f | %7.1f |%s |",
                    D, p ? "bwd" : "fwd", 1e3 * t1, 1e3 * t, 100 * eff, f / t1 * 1e-12,
                    f / N / t * 1e-12, steps.c_str());
      rows.push_back(line);
      std::printf(
          "RESULT,ring,scheme=%s,L=%lld,B=%d,H=%d,D=%d,%s,ranks=%d,layout=%s,split=%d,t1_ms=%.3f,"
          "ring_ms=%.3f,efficiency=%.4f\n",
          o.scheme.c_str(), (long long)o.L, o.B, o.H, D, p ? "bwd" : "fwd", N, o.layout.c_str(),
          split, 1e3 * t1, 1e3 * t, eff);
    }
    std::fflush(stdout);
  }
  if (me == 0) {
    std::printf(
        "\n|   D | pass |  1-GPU ms |   ring ms | effic. | 1-GPU TFLOP/s | ring TFLOP/s/GPU | "
        "per-step compute/wait ms |\n");
    for (const auto& r : rows) std::printf("%s\n", r.c_str());
  }
  LCR_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace

int main(int argc, char** argv) {
  lcr::MpiSession mpi(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lcr rank %d: fatal: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
