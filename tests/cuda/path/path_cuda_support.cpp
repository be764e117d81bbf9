// Problems, kernel runs and error measures of the CUDA PaTH tests (path_cuda_support.hpp).
#include "path_cuda_support.hpp"

#include <cmath>
#include <limits>

#include "cuda_test_util.hpp"
#include "kernels/base/error.hpp"

namespace lcr::test::cudapath {
namespace {

using pathtest::PathProblem;

template <class V>
V clone(const V& x) {
  V y(x.label(), x.layout());
  for (size_t i = 0; i < x.span(); ++i) y.data()[i] = x.data()[i];
  return y;
}

PathProblem clone_problem(const PathProblem& p) {
  PathProblem c = p;
  c.q = clone(p.q);
  c.k = clone(p.k);
  c.v = clone(p.v);
  c.w = clone(p.w);
  c.dout = clone(p.dout);
  c.beta = clone(p.beta);
  if (p.fox()) {
    c.fox_cq = clone(p.fox_cq);
    c.fox_ck = clone(p.fox_ck);
  }
  return c;
}

template <class V>
void round_bf16(const V& x) {
  for (size_t i = 0; i < x.span(); ++i) x.data()[i] = cuda::test::round_bf16(float(x.data()[i]));
}
template <class V>
void round_f32(const V& x) {
  for (size_t i = 0; i < x.span(); ++i) x.data()[i] = double(float(x.data()[i]));
}

template <class V>
std::vector<float> to_float(const V& x) {
  std::vector<float> y(x.span());
  for (size_t i = 0; i < x.span(); ++i) y[i] = float(x.data()[i]);
  return y;
}

cuda::path::Args args_of(const GpuCase& c) {
  cuda::path::Args a;
  a.B = c.B, a.L = c.L, a.H = c.H, a.Hkv = c.Hkv, a.D = c.D;
  a.q_pos0 = a.k_pos0 = c.pos0;
  a.softcap = c.softcap;
  a.superchunk = c.superchunk;
  a.warp_rows = c.warp_rows;
  return a;
}

bool any_nan(const std::vector<float>& x) {
  for (float v : x)
    if (std::isnan(v)) return true;
  return false;
}

// Host buffers (emulator) or device buffers (GPU) behind one interface.
struct HostMem {
  std::vector<std::vector<unsigned char>> keep;
  template <class T>
  T* put(const std::vector<T>& x) {
    keep.emplace_back(reinterpret_cast<const unsigned char*>(x.data()),
                      reinterpret_cast<const unsigned char*>(x.data() + x.size()));
    return reinterpret_cast<T*>(keep.back().data());
  }
  template <class T>
  T* poisoned(size_t n) {
    keep.emplace_back(n * sizeof(T) + 16, 0xFF);
    return reinterpret_cast<T*>(keep.back().data());
  }
  template <class T>
  std::vector<T> get(const T* p, size_t n) {
    return std::vector<T>(p, p + n);
  }
};

struct GpuMem {
  std::vector<cuda::DeviceBuffer<unsigned char>> keep;
  template <class T>
  T* put(const std::vector<T>& x) {
    keep.emplace_back(x.size() * sizeof(T));
    LCR_CUDA_CHECK(
        cudaMemcpy(keep.back().data(), x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
    return reinterpret_cast<T*>(keep.back().data());
  }
  template <class T>
  T* poisoned(size_t n) {
    keep.emplace_back(n * sizeof(T) + 16);
    keep.back().fill_bytes(0xFF);
    return reinterpret_cast<T*>(keep.back().data());
  }
  template <class T>
  std::vector<T> get(const T* p, size_t n) {
    std::vector<T> h(n);
    LCR_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

template <class Mem>
KernelResult run_on(Mem& mem, const GpuCase& c, const PathProblem& p, bool backward, Device dev,
                    const FoldSeeds* seeds) {
  namespace P = cuda::path;
  P::Args a = args_of(c);
  a.q = mem.put(cuda::test::to_bf16(to_float(p.q)));
  a.k = mem.put(cuda::test::to_bf16(to_float(p.k)));
  a.v = mem.put(cuda::test::to_bf16(to_float(p.v)));
  a.w = mem.put(to_float(p.w));
  a.beta = mem.put(to_float(p.beta));
  if (c.fox) {
    a.fox_q = mem.put(to_float(p.fox_cq));
    a.fox_k = mem.put(to_float(p.fox_ck));
  }
  const size_t no = size_t(c.B) * c.L * c.H * c.D, nl = size_t(c.B) * c.H * c.L;
  auto* o = mem.template poisoned<__nv_bfloat16>(no);
  auto* lse = mem.template poisoned<float>(nl);
  const size_t fws = P::forward_workspace_bytes(a, seeds != nullptr);
  auto* ws = mem.template poisoned<unsigned char>(fws);
  const size_t nk = size_t(c.B) * c.L * c.Hkv * c.D, np = size_t(c.B) * c.Hkv * c.D * c.D;
  P::Folds folds;
  if (seeds) {
    folds.q = mem.template poisoned<float>(no);
    folds.k = mem.template poisoned<__nv_bfloat16>(nk);
    folds.p = mem.template poisoned<float>(np);
  }
  const P::Folds* fp = seeds ? &folds : nullptr;
  if (dev == Device::Emulator)
    P::emu::forward(a, o, lse, ws, fws, fp);
  else if (dev == Device::EmulatorMmaSync)
    P::emu_mma::forward(a, o, lse, ws, fws, fp);
  else
    P::forward(a, o, lse, ws, fws, nullptr, fp);
  KernelResult r;
  if (seeds) {
    r.fold["q"] = mem.get(folds.q, no);
    r.fold["k"] = cuda::test::from_bf16(mem.get(folds.k, nk));
    r.fold["p"] = mem.get(folds.p, np);
    for (const auto& [name, x] : r.fold) r.all_written = r.all_written && !any_nan(x);
  }
  r.o = cuda::test::from_bf16(mem.get(o, no));
  r.lse = mem.get(lse, nl);
  r.all_written = r.all_written && !any_nan(r.o) && !any_nan(r.lse);
  if (!backward) return r;
  // The backward gets the kernel's own (bf16) o, as it would in training.
  const size_t nbeta = size_t(c.B) * c.L * c.Hkv;
  auto* dout = mem.put(cuda::test::to_bf16(to_float(p.dout)));
  P::Grads g;
  g.dq = mem.template poisoned<float>(no);
  g.dk = mem.template poisoned<float>(nk);
  g.dv = mem.template poisoned<float>(nk);
  g.dw = mem.template poisoned<float>(nk);
  g.dbeta = mem.template poisoned<float>(nbeta);
  if (c.fox) {
    g.dfox_q = mem.template poisoned<float>(nl);
    g.dfox_k = mem.template poisoned<float>(nl);
  }
  const size_t bws = P::backward_workspace_bytes(a, seeds != nullptr);
  auto* bwsp = mem.template poisoned<unsigned char>(bws);
  P::FoldGrads fg;
  if (seeds) {
    fg.dq = mem.put(seeds->dq);
    fg.dk = mem.put(seeds->dk);
    fg.dp = mem.put(seeds->dp);
  }
  const P::FoldGrads* fgp = seeds ? &fg : nullptr;
  if (dev == Device::Emulator)
    P::emu::backward(a, o, lse, dout, g, bwsp, bws, fgp);
  else if (dev == Device::EmulatorMmaSync)
    P::emu_mma::backward(a, o, lse, dout, g, bwsp, bws, fgp);
  else
    P::backward(a, o, lse, dout, g, bwsp, bws, nullptr, fgp);
  r.grad["q"] = mem.get(g.dq, no);
  r.grad["k"] = mem.get(g.dk, nk);
  r.grad["v"] = mem.get(g.dv, nk);
  r.grad["path_w"] = mem.get(g.dw, nk);
  r.grad["path_beta"] = mem.get(g.dbeta, nbeta);
  if (c.fox) {
    r.grad["fox_cq"] = mem.get(g.dfox_q, nl);
    r.grad["fox_ck"] = mem.get(g.dfox_k, nl);
  }
  for (const auto& [name, x] : r.grad) r.all_written = r.all_written && !any_nan(x);
  return r;
}

}  // namespace

Problems make_problems(const GpuCase& c) {
  pathtest::PathCase pc;
  pc.name = c.name;
  pc.spec.scheme = c.fox ? Scheme::PaTHFoX : Scheme::PaTH;
  pc.spec.heads = c.H;
  pc.spec.kv_heads = c.Hkv;
  pc.spec.head_dim = c.D;
  pc.spec.path.block_size = 64;
  pc.spec.numerics.softcap = c.softcap;
  pc.B = c.B;
  pc.L = c.L;
  pc.pos0 = c.pos0;
  pc.beta = c.beta;
  pc.seed = c.seed;
  Problems ps;
  ps.exact = pathtest::make_path_problem(pc);
  ps.in = clone_problem(ps.exact);
  ps.naive = clone_problem(ps.exact);
  for (PathProblem* p : {&ps.in, &ps.naive}) {
    round_bf16(p->q);
    round_bf16(p->k);
    round_bf16(p->v);
    round_bf16(p->dout);
    round_f32(p->w);
    round_f32(p->beta);
    if (p->fox()) {
      round_f32(p->fox_cq);
      round_f32(p->fox_ck);
    }
  }
  // The naive problem stores w in bf16 too; renormalised in float64 afterwards, since the
  // float64 Kokkos path (the gradient reference) accepts only unit rows (|<w,w> - 1| <= 1e-3,
  // which bf16 rounding alone can exceed at d = 128). The direction keeps its bf16 error.
  round_bf16(ps.naive.w);
  const int d = c.D;
  for (size_t r = 0; r < ps.naive.w.span() / d; ++r) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += ps.naive.w.data()[r * d + i] * ps.naive.w.data()[r * d + i];
    for (int i = 0; i < d; ++i) ps.naive.w.data()[r * d + i] /= std::sqrt(ss);
  }
  return ps;
}

KernelResult run_kernels(const GpuCase& c, const PathProblem& p, bool backward, Device dev,
                         const FoldSeeds* folds) {
  if (on_emulator(dev)) {
    HostMem mem;
    return run_on(mem, c, p, backward, dev, folds);
  }
  GpuMem mem;
  KernelResult r = run_on(mem, c, p, backward, dev, folds);
  LCR_CUDA_CHECK(cudaDeviceSynchronize());
  return r;
}

Result run_float64(const PathProblem& p, bool round_o) {
  const auto& s = p.c.spec;
  const AttentionInputs<double> in = pathtest::device_inputs<double>(p);
  ParamSet<double> params(p.params.layout);
  params.data = pathtest::to_device<double>(p.params.data, "params");
  auto out = make_outputs<double>(s, in);
  attention_forward<double>(s, in, params, out);
  Result r;
  r.o = pathtest::flat(out.o);
  r.lse = pathtest::flat(out.lse);
  if (round_o) {
    auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), out.o);
    for (size_t i = 0; i < h.span(); ++i) h.data()[i] = cuda::test::round_bf16(float(h.data()[i]));
    Kokkos::deep_copy(out.o, h);
  }
  auto g = make_grads<double>(s, in);
  attention_backward<double>(s, in, params, out, pathtest::to_device<double>(p.dout, "dout"), g);
  r.grad["q"] = pathtest::flat(g.dq);
  r.grad["k"] = pathtest::flat(g.dk);
  r.grad["v"] = pathtest::flat(g.dv);
  r.grad["path_w"] = pathtest::flat(g.dpath_w);
  r.grad["path_beta"] = pathtest::flat(g.dpath_beta);
  if (p.fox()) {
    r.grad["fox_cq"] = pathtest::flat(g.dfox_cq);
    r.grad["fox_ck"] = pathtest::flat(g.dfox_ck);
  }
  return r;
}

double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  require(a.size() == b.size(), "rel_error: sizes ", a.size(), " and ", b.size(), " differ");
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  return rel_error(std::vector<double>(a.begin(), a.end()), b);
}

}  // namespace lcr::test::cudapath
