// bench_cuda_attention: forward and backward time of the CUDA attention API
// (cuda::attention_forward / attention_backward, causal, bf16 storage) per scheme and
// shape, with a float64 spot check of the output at sampled rows. Usage:
//   bench_cuda_attention [--schemes nope,goat,pope,fox] [--shapes 1x16x16384x64,...]
//                        [--iters 5] [--warmup 2] [--no-check]
// Output (docs/cuda.md): '#' comment lines, then a whitespace-separated table, one row per
// (scheme, shape): scheme B H L D fwd_ms bwd_ms fwd_tflops bwd_tflops vs_nope check_o check_lse
//   lanes_fwd lanes_bwd
//   FLOPs: forward 4 B H L^2 D / 2 (causal), backward 2.5x that, D = head_dim for every
//   scheme (so TFLOP/s compare times directly; PoPE's QK width 2D is not counted twice);
//   vs_nope: (fwd + bwd time) / NoPE's at the same shape (- when NoPE was not run);
//   check_o: max |o - o_ref| / max |o_ref| over the sampled rows, check_lse: max |lse -
//   lse_ref|, o_ref/lse_ref the float64 reference (kernels/attention/reference) on the
//   same bf16 inputs; outputs are poisoned (NaN) first and every element checked written;
//   lanes_fwd / lanes_bwd: ms of prepare_attention / prepared_backward alone (the scheme's
//   share of fwd_ms / bwd_ms; 0 where the lanes are the inputs).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/attention/cuda/api/attention_cuda.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/attention/params.hpp"
#include "kernels/attention/reference/reference.hpp"

namespace {

using namespace lcr;
using lcr::cuda::bf16;
using lcr::cuda::DeviceBuffer;

struct Shape {
  int B, H, L, D;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

Shape parse_shape(const std::string& s) {
  const auto p = split(s, 'x');
  require(p.size() == 4, "bad shape '", s, "': expected BxHxLxD, e.g. 1x16x16384x64");
  return {std::stoi(p[0]), std::stoi(p[1]), std::stoi(p[2]), std::stoi(p[3])};
}

// Unit-variance uniform values (fast: the bench draws ~1e8 of them).
std::vector<float> random_vec(size_t n, uint64_t seed, float sd = 1.f) {
  std::vector<float> x(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& v : x) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    v = sd * 1.7320508f * (float(s >> 40) / float(1 << 24) * 2.f - 1.f);
  }
  return x;
}

std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16(x[i]);
  return y;
}

// Parameter draws keeping logits O(1) (as the kernel tests do).
std::vector<float> draw_params(const ParamLayout& l, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n01;
  std::uniform_real_distribution<float> u01;
  std::vector<float> p(l.total());
  for (const auto& e : l.entries())
    for (int64_t i = 0; i < e.size(); ++i) {
      float v = 0.5f * n01(rng);
      if (e.name == "pope.delta") v = -6.2831853f * u01(rng);
      if (e.name == "goat.lambda") v = 1e-4f * n01(rng);
      p[e.offset + i] = v;
    }
  return p;
}

struct Timing {
  double fwd_ms = 0, bwd_ms = 0, check_o = NAN, check_lse = NAN;
  double lanes_fwd_ms = 0, lanes_bwd_ms = 0;  // the lane stages alone (inside fwd/bwd)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// float64 reference of sampled rows (b = 0) on the exact bf16 inputs the GPU saw.
void spot_check(const AttentionSpec& spec, const Shape& sh, const std::vector<bf16>& q,
                const std::vector<bf16>& k, const std::vector<bf16>& v,
                const std::vector<float>& cq, const std::vector<float>& ck,
                const std::vector<float>& params, const std::vector<bf16>& o,
                const std::vector<float>& lse, Timing& t) {
  const int H = sh.H, L = sh.L, d = input_qk_dim(spec), dv = spec.v_dim();
  ref::RefInputs<double> in;
  in.q = View4<double, HostSpace>("q", 1, L, H, d);
  in.k = View4<double, HostSpace>("k", 1, L, H, d);
  in.v = View4<double, HostSpace>("v", 1, L, H, dv);
  for (size_t i = 0; i < in.q.span(); ++i) in.q.data()[i] = __bfloat162float(q[i]);
  for (size_t i = 0; i < in.k.span(); ++i) in.k.data()[i] = __bfloat162float(k[i]);
  for (size_t i = 0; i < in.v.span(); ++i) in.v.data()[i] = __bfloat162float(v[i]);
  if (uses_fox(spec.scheme)) {
    in.fox_cq = View3<double, HostSpace>("cq", 1, L, H);
    in.fox_ck = View3<double, HostSpace>("ck", 1, L, H);
    for (size_t i = 0; i < cq.size(); ++i) in.fox_cq.data()[i] = cq[i], in.fox_ck.data()[i] = ck[i];
  }
  in.params = ParamSet<double, HostSpace>(attention_param_layout(spec), "params");
  for (size_t i = 0; i < params.size(); ++i) in.params.data(i) = params[i];
  double err_o = 0, max_o = 0, err_lse = 0;
  for (int i : {L - 1, L / 2 + 3, std::min(L - 1, 1000), std::min(L - 1, 7)})
    for (int h = 0; h < H; ++h) {
      std::vector<double> s(i + 1);
      double mx = -INFINITY;
      for (int j = 0; j <= i; ++j) {
        s[j] = ref::reference_logit(spec, in, &in.q(0, i, h, 0), &in.k(0, j, h, 0), 0, h, i, j);
        mx = std::max(mx, s[j]);
      }
      double z = 0;
      for (double x : s) z += std::exp(x - mx);
      const double l = mx + std::log(z);
      err_lse = std::max(err_lse, std::abs(l - double(lse[size_t(h) * L + i])));
      for (int c = 0; c < dv; ++c) {
        double acc = 0;
        for (int j = 0; j <= i; ++j) acc += std::exp(s[j] - l) * in.v(0, j, h, c);
        const double got = __bfloat162float(o[(size_t(i) * H + h) * dv + c]);
        err_o = std::max(err_o, std::abs(got - acc));
        max_o = std::max(max_o, std::abs(acc));
      }
    }
  t.check_o = err_o / std::max(max_o, 1e-30);
  t.check_lse = err_lse;
}

Timing run(const std::string& name, const Shape& sh, int iters, int warmup, bool check,
           cuda::SdpaImpl impl) {
  AttentionSpec spec;
  spec.scheme = parse_scheme(name);
  spec.heads = spec.kv_heads = sh.H;
  spec.head_dim = sh.D;
  if (spec.scheme == Scheme::GOAT) spec.goat.train_len = sh.L;
  const int B = sh.B, L = sh.L, H = sh.H, d = input_qk_dim(spec), dv = spec.v_dim();
  const size_t nq = size_t(B) * L * H * d, nv = size_t(B) * L * H * dv;
  const auto hq = to_bf16(random_vec(nq, 1)), hk = to_bf16(random_vec(nq, 2));
  const auto hv = to_bf16(random_vec(nv, 3)), hdo = to_bf16(random_vec(nv, 4));
  DeviceBuffer<bf16> q(hq), k(hk), v(hv), dout(hdo), o(nv);
  DeviceBuffer<float> lse(size_t(B) * H * L), dq(nq), dk(nq), dv_(nv);
  const ParamLayout layout = attention_param_layout(spec);
  const auto hp = draw_params(layout, 5);
  DeviceBuffer<float> params(hp), dparams(std::max<int64_t>(layout.total(), 1));
  cuda::Workspace ws;
  ws.set_sdpa_impl(impl);
  DeviceBuffer<float> gates, cq, ck, dcq, dck;
  cuda::AttentionInputs in;
  in.B = B, in.Lq = in.Lk = L, in.q = q.data(), in.k = k.data(), in.v = v.data();
  if (uses_fox(spec.scheme)) {
    // Forget gates f = sigmoid(x), x ~ 3 + U: c falls ~0.05 per token (a long memory).
    auto x = random_vec(size_t(B) * L * H, 6);
    for (auto& e : x) e += 3.f;
    gates = DeviceBuffer<float>(x);
    cq = DeviceBuffer<float>(x.size()), dcq = DeviceBuffer<float>(x.size());
    dck = DeviceBuffer<float>(x.size());
    cuda::fox_cumulative_log_gates(B, L, H, gates.data(), nullptr, cq.data(), ws, nullptr);
    in.fox_cq = in.fox_ck = cq.data();
  }
  const cuda::DeviceParams prm{params.data(), layout.total()};
  const cuda::AttentionOutputs out{o.data(), lse.data()};
  cuda::AttentionGrads g{dq.data(), dk.data(), dv_.data(), dparams.data(), dcq.data(), dck.data()};

  Timing t;
  o.fill_bytes(0xFF), lse.fill_bytes(0xFF), dq.fill_bytes(0xFF), dk.fill_bytes(0xFF);
  cudaEvent_t e0, e1, e2;
  LCR_CUDA_CHECK(cudaEventCreate(&e0));
  LCR_CUDA_CHECK(cudaEventCreate(&e1));
  LCR_CUDA_CHECK(cudaEventCreate(&e2));
  std::vector<double> fwd, bwd;
  for (int it = 0; it < warmup + iters; ++it) {
    LCR_CUDA_CHECK(cudaEventRecord(e0));
    cuda::attention_forward(spec, prm, in, out, ws);
    LCR_CUDA_CHECK(cudaEventRecord(e1));
    cuda::attention_backward(spec, prm, in, out, dout.data(), g, ws);
    LCR_CUDA_CHECK(cudaEventRecord(e2));
    LCR_CUDA_CHECK(cudaEventSynchronize(e2));
    float f = 0, b = 0;
    LCR_CUDA_CHECK(cudaEventElapsedTime(&f, e0, e1));
    LCR_CUDA_CHECK(cudaEventElapsedTime(&b, e1, e2));
    if (it >= warmup) fwd.push_back(f), bwd.push_back(b);
  }
  t.fwd_ms = median(fwd);
  t.bwd_ms = median(bwd);
  if (check) {
    const auto ho = o.download();
    const auto hl = lse.download();
    size_t bad = 0;
    for (const auto& x : ho) bad += !std::isfinite(__bfloat162float(x));
    for (const auto& x : hl) bad += !std::isfinite(x);
    for (const auto& x : dq.download()) bad += !std::isfinite(x);
    for (const auto& x : dk.download()) bad += !std::isfinite(x);
    require(bad == 0, name, ": ", bad, " outputs not finite (unwritten or overflowed)");
    const std::vector<float> hcq = cq.size() ? cq.download() : std::vector<float>{};
    spot_check(spec, sh, hq, hk, hv, hcq, hcq, hp, ho, hl, t);
  }
  // Where the scheme's own time goes: prepare_attention (QK-norm + lanes) and
  // prepared_backward (lane gradients + parameter reductions) alone, on random lane grads.
  const cuda::PreparedAttention P = cuda::prepare_attention(spec, prm, in, ws, nullptr);
  if (!P.lanes_are_inputs) {
    DeviceBuffer<float> dq2(random_vec(size_t(B) * L * H * P.sdpa.D, 7));
    DeviceBuffer<float> dk2(random_vec(size_t(B) * L * H * P.sdpa.D, 8));
    std::vector<double> lf, lb;
    for (int it = 0; it < warmup + iters; ++it) {
      LCR_CUDA_CHECK(cudaEventRecord(e0));
      cuda::prepare_attention(spec, prm, in, ws, nullptr);
      LCR_CUDA_CHECK(cudaEventRecord(e1));
      cuda::prepared_backward(spec, prm, in, dq2.data(), dk2.data(), dq.data(), dk.data(),
                              dparams.data(), ws, nullptr);
      LCR_CUDA_CHECK(cudaEventRecord(e2));
      LCR_CUDA_CHECK(cudaEventSynchronize(e2));
      float f = 0, b = 0;
      LCR_CUDA_CHECK(cudaEventElapsedTime(&f, e0, e1));
      LCR_CUDA_CHECK(cudaEventElapsedTime(&b, e1, e2));
      if (it >= warmup) lf.push_back(f), lb.push_back(b);
    }
    t.lanes_fwd_ms = median(lf);
    t.lanes_bwd_ms = median(lb);
  }
  for (auto e : {e0, e1, e2}) LCR_CUDA_CHECK(cudaEventDestroy(e));
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)  // before Kokkos, which answers --help with its own text
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf(
          "usage: %s [--schemes nope,goat,pope,fox] [--shapes BxHxLxD,...] [--iters N] "
          "[--warmup N] [--no-check] [--impl lcr|cudnn|auto]\n",
          argv[0]);
      return 0;
    }
  Kokkos::ScopeGuard kokkos(argc, argv);  // host views of the reference check
  std::vector<std::string> schemes{"nope", "goat", "pope", "fox"};
  std::vector<std::string> shapes{"1x16x16384x64", "1x16x16384x128", "1x8x65536x64"};
  int iters = 5, warmup = 2;
  bool check = true;
  cuda::SdpaImpl impl = cuda::SdpaImpl::Lcr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      lcr::require(i + 1 < argc, a, " needs a value");
      return argv[++i];
    };
    if (a == "--schemes") {
      schemes = split(next(), ',');
    } else if (a == "--shapes") {
      shapes = split(next(), ',');
    } else if (a == "--iters") {
      iters = std::stoi(next());
    } else if (a == "--warmup") {
      warmup = std::stoi(next());
    } else if (a == "--no-check") {
      check = false;
    } else if (a == "--impl") {
      impl = cuda::parse_sdpa_impl(next());
    } else {
      std::fprintf(stderr,
                   "usage: %s [--schemes nope,goat,pope,fox] [--shapes BxHxLxD,...] [--iters N] "
                   "[--warmup N] [--no-check] [--impl lcr|cudnn|auto]\n",
                   argv[0]);
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  cudaDeviceProp p{};
  LCR_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf(
      "# bench_cuda_attention on %s: median of %d (after %d warm-up), causal, bf16, impl %s\n",
      p.name, iters, warmup, cuda::sdpa_impl_name(impl));
  std::printf("# %-6s %2s %3s %6s %4s %9s %9s %10s %10s %7s %9s %9s %9s %9s\n", "scheme", "B", "H",
              "L", "D", "fwd_ms", "bwd_ms", "fwd_tflops", "bwd_tflops", "vs_nope", "check_o",
              "check_lse", "lanes_fwd", "lanes_bwd");
  for (const auto& shs : shapes) {
    const Shape sh = parse_shape(shs);
    const double flop = 4.0 * sh.B * sh.H * double(sh.L) * sh.L * sh.D / 2;
    double nope_total = 0;
    for (const auto& name : schemes) {
      Timing t;
      try {
        t = run(name, sh, iters, warmup, check, impl);
      } catch (const lcr::Error& e) {  // e.g. impl cudnn on a shape cuDNN has no engine for
        std::printf("# %s %s: not run: %s\n", name.c_str(), shs.c_str(), e.what());
        std::fflush(stdout);
        continue;
      }
      const double total = t.fwd_ms + t.bwd_ms;
      if (name == "nope") nope_total = total;
      char ratio[32] = "-";
      if (nope_total > 0) std::snprintf(ratio, sizeof ratio, "%.3f", total / nope_total);
      std::printf("%-8s %2d %3d %6d %4d %9.3f %9.3f %10.1f %10.1f %7s %9.2e %9.2e %9.3f %9.3f\n",
                  name.c_str(), sh.B, sh.H, sh.L, sh.D, t.fwd_ms, t.bwd_ms, flop / (t.fwd_ms * 1e9),
                  2.5 * flop / (t.bwd_ms * 1e9), ratio, t.check_o, t.check_lse, t.lanes_fwd_ms,
                  t.lanes_bwd_ms);
      std::fflush(stdout);
    }
  }
  return 0;
}
