// Tests of the CUDA PaTH / PaTH-FoX kernels (kernels/attention/cuda/path).
//
// CudaPath.*     the GPU kernels; SKIP with the reason where there is no GPU.
// CudaPathEmu.*  the same kernel source on the SIMT emulator (CPU; small sizes).
// CudaPathArgs.* argument errors (host only).
//
// Each case draws fresh inputs (the float64 PaTH test problems: beta over (0, 2) with a third
// near 2 and a third at or near 1; FoX gates over global positions), runs forward and
// backward, and compares o, lse and every gradient with the float64 answer for the exact
// inputs the kernel was given: o and lse from the reference definition
// (kernels/attention/reference/path.hpp), gradients from the Kokkos PaTH in float64 (itself
// checked against dual numbers and finite differences in tests/kernels), and, at L <= 129,
// directional derivatives of the reference on dual numbers.
//
// Tolerance: error <= 3 x the naive bf16 error of the same tensor (path_cuda_support.hpp: how
// far the float64 answer moves when q, k, v, w, dout and o are stored in bf16 once) + 1e-4. Why 3:
// the kernels round to bf16 where any bf16 kernel must (the operands of every tensor-core
// product: carried queries, folded keys, transitions, probabilities, dS) and each rounding
// moves the answer by about one naive error; the errors are independent, so they add in
// quadrature, and the measured ratios sit between 0.5 and 1.5 (docs/cuda.md). Errors are
// ||a - b|| / max(||b||, 1e-3 sqrt(n)); the FoX query lane's exact gradient is zero without
// softcap (a row-wide logit shift leaves the softmax unchanged), so it is measured against
// the key lane's norm. Errors with an RMS below 1e-5 pass (kAbsFloor, L = 1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "cuda_test_util.hpp"
#include "kernels/base/error.hpp"
#include "path_cuda_support.hpp"

namespace lcr::test::cudapath {
namespace {

constexpr double kTolFactor = 3.0, kTolFloor = 1e-4;
// Absolute floor on an error's RMS: at L = 1 every gradient but dv is zero in exact arithmetic
// (one key: dS = P (dP - delta) = 0), the naive yardstick is 0, and the kernel leaves fp32
// rounding residue of ~1e-6 (measured).
constexpr double kAbsFloor = 1e-5;

double norm(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s);
}

// ||a - b|| / den
template <class A>
double err_over(const std::vector<A>& a, const std::vector<double>& b, double den) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(double(a[i]))) return INFINITY;
    s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  }
  return std::sqrt(s) / den;
}

double den_of(const std::vector<double>& ref) {
  return std::max(norm(ref), 1e-3 * std::sqrt(double(ref.size())));
}

void check_case(const GpuCase& c, Device dev) {
  const Problems ps = make_problems(c);
  const KernelResult k = run_kernels(c, ps.in, true, dev);
  EXPECT_TRUE(k.all_written) << "an output kept its poison (NaN): not written, or NaN computed";
  const Result ref = pathtest::run_path_reference(ps.in);
  const Result gref = run_float64(ps.in, false);
  const Result ex = run_float64(ps.exact, false);
  const Result nv = run_float64(ps.naive, true);

  std::printf("%-34s", c.name.c_str());
  // rms: the error's root mean square, for the absolute floor.
  auto expect = [&](const std::string& what, double err, double naive, double rms) {
    std::printf(" %s %.1e/%.1e", what.c_str(), err, naive);
    EXPECT_TRUE(err <= kTolFactor * naive + kTolFloor || rms <= kAbsFloor)
        << c.name << ": " << what << " error " << err << " (rms " << rms << ") vs naive bf16 error "
        << naive;
  };
  auto rms_of = [](const auto& a, const std::vector<double>& b) {
    return err_over(a, b, std::sqrt(double(std::max<size_t>(b.size(), 1))));
  };
  expect("o", err_over(k.o, ref.o, den_of(ref.o)), err_over(nv.o, ex.o, den_of(ex.o)),
         rms_of(k.o, ref.o));
  expect("lse", err_over(k.lse, ref.lse, den_of(ref.lse)), err_over(nv.lse, ex.lse, den_of(ex.lse)),
         rms_of(k.lse, ref.lse));
  std::map<std::string, double> naive_of;
  for (const auto& [name, g] : k.grad) {
    const auto& r = gref.grad.at(name);
    double den = den_of(r), nden = den_of(ex.grad.at(name));
    if (name == "fox_cq") {
      den = std::max(den, norm(gref.grad.at("fox_ck")));
      nden = std::max(nden, norm(ex.grad.at("fox_ck")));
    }
    naive_of[name] = err_over(nv.grad.at(name), ex.grad.at(name), nden);
    expect("d" + name, err_over(g, r, den), naive_of[name], rms_of(g, r));
  }
  std::printf("\n");

  if (c.L > 129) return;
  // Directional derivatives of <dout, o> on dual numbers (the definition, no blocks).
  std::mt19937_64 rng(c.seed * 7919 + 1);
  std::normal_distribution<double> n01(0.0, 1.0);
  for (const auto& [name, g] : k.grad) {
    pathtest::PathProblem& pin = const_cast<pathtest::PathProblem&>(ps.in);
    std::vector<double> u(pathtest::path_input_size(pin, name));
    for (double& x : u) x = n01(rng);
    const double dd = pathtest::path_reference_directional(ps.in, name, u);
    double gu = 0;
    for (size_t i = 0; i < u.size(); ++i) gu += double(g[i]) * u[i];
    double scale = norm(gref.grad.at(name));
    if (name == "fox_cq") scale = std::max(scale, norm(gref.grad.at("fox_ck")));
    scale = std::max(scale, 1e-3 * std::sqrt(double(u.size()))) * norm(u);
    const double diff = std::abs(gu - dd);
    EXPECT_TRUE(diff / scale <= kTolFactor * naive_of[name] + kTolFloor ||
                diff <= kAbsFloor * norm(u))
        << c.name << ": <d" << name << ", u> = " << gu << " vs dual-number " << dd;
  }
}

std::string case_name(int D, bool fox, int L, const char* extra) {
  return std::string(fox ? "PaTHFoX" : "PaTH") + "_D" + std::to_string(D) + "_L" +
         std::to_string(L) + extra;
}

// L in {1, 7, 129, 1000}, B = 2, H = 4, Hkv = 2, both schemes, D = 64 and 128. L = 129 uses
// superchunks of 128 positions (so both scan levels run at a small size) and starts at
// position 37; L = 1000 uses superchunks of 256 (4 superchunks of 4 blocks).
std::vector<GpuCase> gpu_cases() {
  std::vector<GpuCase> cs;
  uint64_t seed = 100;
  for (int D : {64, 128})
    for (bool fox : {false, true})
      for (int L : {1, 7, 129, 1000}) {
        GpuCase c;
        c.D = D, c.fox = fox, c.L = L, c.seed = ++seed;
        std::string extra;
        if (L == 129) {
          c.superchunk = 128, c.pos0 = 37, extra = "_S128_pos37";
          if (fox) c.softcap = 8.f, extra += "_cap8";
          if (D == 64) c.warp_rows = 16, extra += "_wr16";
          if (D == 128) c.warp_rows = 16, extra += "_wr16";
        }
        if (L == 1000) {
          c.superchunk = 256, extra = "_S256";
          if (D == 64 && fox) c.warp_rows = 16, extra += "_wr16";
          if (D == 64 && !fox) c.warp_rows = 32, extra += "_wr32";
          if (D == 128) c.warp_rows = 32, extra += "_wr32";
        }
        c.name = case_name(D, fox, L, extra.c_str());
        cs.push_back(c);
      }
  GpuCase n2;
  n2.L = 129, n2.superchunk = 128, n2.beta = pathtest::BetaDraw::NearTwo, n2.seed = 7;
  n2.name = "PaTH_D64_L129_S128_betaNear2";
  cs.push_back(n2);
  GpuCase n1 = n2;
  n1.D = 128, n1.fox = true, n1.beta = pathtest::BetaDraw::NearOne, n1.seed = 8;
  n1.name = "PaTHFoX_D128_L129_S128_betaNear1";
  cs.push_back(n1);
  GpuCase mha = n2;  // no GQA, one head
  mha.H = mha.Hkv = 1, mha.B = 1, mha.L = 333, mha.beta = pathtest::BetaDraw::Mixed;
  mha.name = "PaTH_D64_L333_H1_S128";
  cs.push_back(mha);
  return cs;
}

class CudaPath : public ::testing::TestWithParam<GpuCase> {};

TEST_P(CudaPath, MatchesFloat64Reference) {
  LCR_REQUIRE_GPU();
  check_case(GetParam(), Device::Gpu);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPath, ::testing::ValuesIn(gpu_cases()),
                         [](const auto& info) { return info.param.name; });

// The emulator is ~10^6 times slower than the GPU: small sizes, one case per feature.
std::vector<GpuCase> emu_cases() {
  std::vector<GpuCase> cs;
  GpuCase a;
  a.L = 7, a.seed = 11, a.name = "PaTH_D64_L7";
  cs.push_back(a);
  GpuCase one;  // one position: every gradient but dv is zero in exact arithmetic
  one.L = 1, one.fox = true, one.seed = 16, one.name = "PaTHFoX_D64_L1";
  cs.push_back(one);
  GpuCase e;  // 16-row warps in the carry
  e.L = 300, e.superchunk = 256, e.warp_rows = 16, e.fox = true, e.seed = 15;
  e.H = 2, e.Hkv = 1, e.name = "PaTHFoX_D64_L300_S256_wr16";
  cs.push_back(e);
  GpuCase d;  // 32-row warps in the carry, a block of padding (L < Lp - 64)
  d.L = 300, d.superchunk = 128, d.warp_rows = 32;
  d.seed = 14, d.H = 2, d.Hkv = 1, d.name = "PaTH_D64_L300_S128_wr32";
  cs.push_back(d);
  GpuCase b;
  b.L = 129, b.fox = true, b.superchunk = 128, b.pos0 = 37, b.softcap = 8.f, b.seed = 12;
  b.name = "PaTHFoX_D64_L129_S128_pos37_cap8";
  cs.push_back(b);
  GpuCase c;
  c.L = 129, c.D = 128, c.H = 2, c.Hkv = 1, c.superchunk = 128, c.seed = 13;
  c.warp_rows = 32;
  c.name = "PaTH_D128_L129_S128_wr32_H2";
  cs.push_back(c);
  // D = 128 with FoX lanes and softcap (the logit mode of the wgmma kernels' epilogues).
  GpuCase f = c;
  f.L = 200, f.fox = true, f.softcap = 8.f, f.seed = 17;
  f.name = "PaTHFoX_D128_L200_S128_wr32_cap8";
  cs.push_back(f);
  return cs;
}

class CudaPathEmu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(CudaPathEmu, MatchesFloat64Reference) { check_case(GetParam(), Device::Emulator); }

INSTANTIATE_TEST_SUITE_P(Cases, CudaPathEmu, ::testing::ValuesIn(emu_cases()),
                         [](const auto& info) { return info.param.name; });

// The kernels in the form sm_80 .. sm_89 run (each wgmma product by mma.sync: wgmma.cuh), same
// cases and tolerances: the products see the same bf16 operands and accumulate in fp32.
class CudaPathEmuMmaSync : public ::testing::TestWithParam<GpuCase> {};

TEST_P(CudaPathEmuMmaSync, MatchesFloat64Reference) {
  check_case(GetParam(), Device::EmulatorMmaSync);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPathEmuMmaSync, ::testing::ValuesIn(emu_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(CudaPathArgs, RejectsBadInputWithAClearError) {
  static __align__(16) __nv_bfloat16 hb[16];
  static __align__(16) float hf[16];
  auto valid = [] {
    cuda::path::Args a;
    a.B = 2, a.L = 7, a.H = 4, a.Hkv = 2, a.D = 64;
    a.q = a.k = a.v = hb;
    a.w = a.beta = hf;
    return a;
  };
  EXPECT_NO_THROW(cuda::path::check(valid()));
  auto bad = [&](auto edit, const char* says) {
    cuda::path::Args a = valid();
    edit(a);
    try {
      cuda::path::check(a);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const lcr::Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  bad([](auto& a) { a.D = 96; }, "D=96");
  bad([](auto& a) { a.H = 3; }, "H=3");
  bad([](auto& a) { a.L = 0; }, "L=0");
  bad([](auto& a) { a.w = nullptr; }, "must all be given");
  bad([](auto& a) { a.fox_q = hf; }, "both FoX gate tensors");
  bad([](auto& a) { a.k = hb + 1; }, "16-byte aligned");
  bad([](auto& a) { a.q_pos0 = 5; }, "q_pos0=5");
  bad([](auto& a) { a.softcap = -1.f; }, "softcap=-1");
  bad([](auto& a) { a.superchunk = 100; }, "superchunk=100");
  bad([](auto& a) { a.warp_rows = 8; }, "warp_rows=8");
  // The backward writes and adds its gradients as float pairs: a 4-byte-aligned dq is refused
  // before anything runs (emulator entry point: the same host checks as the GPU's).
  static __align__(16) float grads[5][16];
  cuda::path::Grads g;
  g.dq = grads[0] + 1, g.dk = grads[1], g.dv = grads[2], g.dw = grads[3], g.dbeta = grads[4];
  try {
    cuda::path::emu::backward(valid(), hb, hf, hb, g, nullptr, 0);
    ADD_FAILURE() << "accepted a 4-byte-aligned dq";
  } catch (const lcr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("8-byte aligned"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lcr::test::cudapath

namespace lcr::test::cudapath {
namespace {

// check_values() reads the data: beta outside [0, 2), a w row that is not a unit vector and
// a NaN are errors that name the tensor and index; valid data passes.
TEST(CudaPathArgs, CheckValuesNamesTheBadEntry) {
  LCR_REQUIRE_GPU();
  GpuCase c;
  c.L = 5;
  const Problems ps = make_problems(c);
  auto f32 = [](const auto& v) {
    std::vector<float> y(v.span());
    for (size_t i = 0; i < y.size(); ++i) y[i] = float(v.data()[i]);
    return y;
  };
  std::vector<float> w = f32(ps.in.w), beta = f32(ps.in.beta);
  cuda::DeviceBuffer<__nv_bfloat16> q(cuda::test::to_bf16(f32(ps.in.q)));
  cuda::DeviceBuffer<__nv_bfloat16> k(cuda::test::to_bf16(f32(ps.in.k)));
  cuda::DeviceBuffer<__nv_bfloat16> v(cuda::test::to_bf16(f32(ps.in.v)));
  cuda::DeviceBuffer<float> wd(w), bd(beta);
  cuda::path::Args a;
  a.B = c.B, a.L = c.L, a.H = c.H, a.Hkv = c.Hkv, a.D = c.D;
  a.q = q.data(), a.k = k.data(), a.v = v.data(), a.w = wd.data(), a.beta = bd.data();
  EXPECT_NO_THROW(cuda::path::check_values(a, nullptr));
  auto expect_error = [&](const char* says) {
    try {
      cuda::path::check_values(a, nullptr);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const lcr::Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  std::vector<float> bad = beta;
  bad[3] = 2.5f;
  bd.upload(bad);
  expect_error("beta[0, 1, 1] = 2.5");
  bd.upload(beta);
  bad = w;
  bad[c.D * 2] *= 1.1f;
  wd.upload(bad);
  expect_error("w[0, 1, 0] has norm");
  bad[c.D * 2] = NAN;
  wd.upload(bad);
  expect_error("is not finite");
}

}  // namespace
}  // namespace lcr::test::cudapath
