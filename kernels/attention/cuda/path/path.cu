// The PaTH kernels built for the GPU (nvcc, sm_90a): path::forward / backward.
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/path/device/all.cuh"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/attention/cuda/path/plan.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda::path {
namespace {

namespace K = ::lcr::cuda::pathk;

struct Grid3 {
  int x, y, z;
};

struct ProfiledLaunch {
  const char* name;
  cudaEvent_t start, stop;
};
bool g_profiling = false;
std::vector<ProfiledLaunch> g_launches, g_open;  // g_open: begun, not ended phases

template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), Grid3 grid, int threads, std::size_t smem,
            cudaStream_t s, const A&... args) {
  if (smem > 48 * 1024) ::lcr::cuda::detail::check_smem_fits(name, smem);
  LCR_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // A kernel whose shared memory lets two CTAs share an SM (prep's 112 KiB at D = 128, dkv)
  // asks for the largest carveout (228 KiB with 1 KiB reserved per CTA), which the driver's
  // own choice need not give it.
  if (smem > 64 * 1024 && 2 * (smem + 1024) <= 228 * 1024)
    LCR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        int(cudaSharedmemCarveoutMaxShared)));
  ProfiledLaunch pl{name, nullptr, nullptr};
  if (g_profiling) {
    LCR_CUDA_CHECK(cudaEventCreate(&pl.start));
    LCR_CUDA_CHECK(cudaEventCreate(&pl.stop));
    LCR_CUDA_CHECK(cudaEventRecord(pl.start, s));
  }
  kernel<<<dim3(grid.x, grid.y, grid.z), threads, smem, s>>>(args...);
  LCR_CUDA_CHECK_LAUNCH();
  if (g_profiling) {
    LCR_CUDA_CHECK(cudaEventRecord(pl.stop, s));
    g_launches.push_back(pl);
  }
}

void zero(void* p, std::size_t bytes, cudaStream_t s) {
  LCR_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s));
}

#include "kernels/attention/cuda/path/launch.inl"

}  // namespace

namespace detail {
void set_profiling(bool on) { g_profiling = on; }
void profile_begin(const char* name, cudaStream_t s) {
  if (!g_profiling) return;
  ProfiledLaunch pl{name, nullptr, nullptr};
  LCR_CUDA_CHECK(cudaEventCreate(&pl.start));
  LCR_CUDA_CHECK(cudaEventCreate(&pl.stop));
  LCR_CUDA_CHECK(cudaEventRecord(pl.start, s));
  g_open.push_back(pl);
}
void profile_end(cudaStream_t s) {
  if (!g_profiling || g_open.empty()) return;
  LCR_CUDA_CHECK(cudaEventRecord(g_open.back().stop, s));
  g_launches.push_back(g_open.back());
  g_open.pop_back();
}
std::string profile_report() {
  std::map<std::string, double> ms;
  for (const auto& l : g_launches) {
    LCR_CUDA_CHECK(cudaEventSynchronize(l.stop));
    float t = 0.f;
    LCR_CUDA_CHECK(cudaEventElapsedTime(&t, l.start, l.stop));
    ms[l.name] += t;
    cudaEventDestroy(l.start);
    cudaEventDestroy(l.stop);
  }
  g_launches.clear();
  std::ostringstream os;
  for (const auto& [name, t] : ms) os << "  kernel " << name << " " << t << " ms\n";
  return os.str();
}
void wgmma_probe(const __nv_bfloat16* A, const __nv_bfloat16* B, const __nv_bfloat16* P, float* c1,
                 float* c2, float* c3) {
  wgmma_probe_impl(A, B, P, c1, c2, c3, true);
  LCR_CUDA_CHECK(cudaDeviceSynchronize());
}
}  // namespace detail

void check_values(const Args& a, cudaStream_t s) {
  check(a);
  auto fetch = [&](const auto* p, std::size_t n) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(p)>>;
    std::vector<T> h(n);
    LCR_CUDA_CHECK(cudaMemcpyAsync(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost, s));
    LCR_CUDA_CHECK(cudaStreamSynchronize(s));
    return h;
  };
  // "[b, t, h]" of a flat index into a [B, L, heads, inner] tensor.
  auto where = [&](std::size_t i, int heads, int inner) {
    std::ostringstream os;
    const std::size_t row = i / inner;
    os << "[" << row / (std::size_t(a.L) * heads) << ", " << row / heads % a.L << ", "
       << row % heads << (inner > 1 ? ", " + std::to_string(i % inner) : std::string()) << "]";
    return os.str();
  };
  const std::size_t nq = std::size_t(a.B) * a.L * a.H, nk = std::size_t(a.B) * a.L * a.Hkv;
  auto finite_bf16 = [&](const char* name, const __nv_bfloat16* p, std::size_t rows, int heads) {
    const auto h = fetch(p, rows * a.D);
    for (std::size_t i = 0; i < h.size(); ++i)
      require(std::isfinite(__bfloat162float(h[i])), "cuda path: ", name, where(i, heads, a.D),
              " is not finite (NaN or inf); PaTH needs finite inputs");
  };
  finite_bf16("q", a.q, nq, a.H);
  finite_bf16("k", a.k, nk, a.Hkv);
  finite_bf16("v", a.v, nk, a.Hkv);
  const auto w = fetch(a.w, nk * a.D);
  for (std::size_t r = 0; r < nk; ++r) {
    double ss = 0;
    for (int c = 0; c < a.D; ++c) {
      const float x = w[r * a.D + c];
      require(std::isfinite(x), "cuda path: w", where(r * a.D + c, a.Hkv, a.D), " is not finite");
      ss += double(x) * x;
    }
    require(std::abs(ss - 1.0) <= 1e-3, "cuda path: w", where(r, a.Hkv, 1), " has norm ",
            std::sqrt(ss), "; PaTH needs unit rows (normalise w, e.g. as path::w_forward does)");
  }
  const auto beta = fetch(a.beta, nk);
  for (std::size_t i = 0; i < nk; ++i)
    require(beta[i] >= 0.f && beta[i] < 2.f, "cuda path: beta", where(i, a.Hkv, 1), " = ", beta[i],
            " is outside [0, 2); build it as path::beta_forward does (at most 2 - 2^-10)");
  if (a.fox_q) {
    for (const auto& [name, p] : {std::pair{"fox_q", a.fox_q}, std::pair{"fox_k", a.fox_k}}) {
      const auto f = fetch(p, nq);
      for (std::size_t i = 0; i < nq; ++i)
        require(std::isfinite(f[i]), "cuda path: ", name, where(i, a.H, 1), " is not finite");
    }
  }
}

void forward(const Args& a, __nv_bfloat16* o, float* lse, void* ws, std::size_t ws_bytes,
             cudaStream_t s, const Folds* folds) {
  forward_impl(a, o, lse, ws, ws_bytes, s, folds);
}

void backward(const Args& a, const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* dout,
              const Grads& g, void* ws, std::size_t ws_bytes, cudaStream_t s,
              const FoldGrads* fold_grads) {
  backward_impl(a, o, lse, dout, g, ws, ws_bytes, s, fold_grads);
}

void carry(int B, int L, int H, int Hkv, int D, const float* M, const float* q, __nv_bfloat16* y,
           cudaStream_t s) {
  carry_impl(B, L, H, Hkv, D, M, q, y, s);
}
void carry_backward(int B, int L, int H, int Hkv, int D, const float* M, const float* q,
                    const float* dy, float* dq, float* dM, cudaStream_t s) {
  carry_backward_impl(B, L, H, Hkv, D, M, q, dy, dq, dM, s);
}
void mat_products(int batch, int D, const float* A, bool ta, const float* B, bool tb, float* C,
                  bool accumulate, cudaStream_t s) {
  mat_products_impl(batch, D, A, ta, B, tb, C, accumulate, s);
}
}  // namespace lcr::cuda::path
