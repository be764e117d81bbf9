// The span boundary folds of the CUDA PaTH (path.hpp Folds / FoldGrads, device/fold.cuh) and
// the ring's carry helpers, against the float64 Kokkos definitions of
// kernels/schemes/path/ring.hpp, on the GPU and on the SIMT emulator.
//
// Forward: q_fold, k_fold, P against fold_queries_left, fold_keys_right, chunk_transition of
// the same bf16/fp32 inputs. Backward: the kernel's gradients with FoldGrads minus those
// without (same inputs, so the attention's own share cancels) against the float64
// *_backward rules fed the same random fold gradients.
// Tolerance, as the other CUDA PaTH tests: 3x the naive bf16 error (how far the float64
// answer moves when w is rounded to bf16, as the kernels' tensor-core products round it)
// plus 1e-3, which covers the bf16 block folds k~ and block transitions P_m that the fp32
// chains start from (2^-9 relative each, measured up to 6e-4 over 16 blocks).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/schemes/path/ring.hpp"
#include "path_cuda_support.hpp"

namespace lcr::test::cudapath {
namespace {

constexpr double kTolFactor = 3.0, kTolFloor = 1e-3;

template <class V>
std::vector<double> flat(const V& x) {
  std::vector<double> y(x.span());
  for (size_t i = 0; i < x.span(); ++i) y[i] = double(x.data()[i]);
  return y;
}

struct FoldRef {
  std::map<std::string, std::vector<double>> fold, grad;
};

// The float64 folds of problem p and, given seeds, the gradients they send to q, k, w, beta.
FoldRef reference(const GpuCase& c, const pathtest::PathProblem& p, const FoldSeeds& s) {
  const int B = c.B, L = c.L, H = c.H, Hkv = c.Hkv, D = c.D;
  View4<const double> w = p.w, q = p.q, k = p.k;
  View3<const double> beta = p.beta;
  View4<double> qf("qf", B, L, H, D), kf("kf", B, L, Hkv, D), P("P", B, Hkv, D, D);
  path::fold_queries_left<double>(w, beta, q, 64, qf);
  path::fold_keys_right<double>(w, beta, k, 64, kf);
  path::chunk_transition<double>(w, beta, 64, P);
  FoldRef r;
  r.fold["q"] = flat(qf);
  r.fold["k"] = flat(kf);
  r.fold["p"] = flat(P);
  View4<double> dqf("dqf", B, L, H, D), dkf("dkf", B, L, Hkv, D), dP("dP", B, Hkv, D, D);
  for (size_t i = 0; i < s.dq.size(); ++i) dqf.data()[i] = s.dq[i];
  for (size_t i = 0; i < s.dk.size(); ++i) dkf.data()[i] = s.dk[i];
  for (size_t i = 0; i < s.dp.size(); ++i) dP.data()[i] = s.dp[i];
  View4<double> dq("dq", B, L, H, D), dk("dk", B, L, Hkv, D), dw("dw", B, L, Hkv, D);
  View3<double> dbeta("dbeta", B, L, Hkv);
  path::fold_queries_left_backward<double>(w, beta, q, 64, dqf, dq, dw, dbeta);
  path::fold_keys_right_backward<double>(w, beta, k, 64, dkf, dk, dw, dbeta);
  path::chunk_transition_backward<double>(w, beta, 64, dP, dw, dbeta);
  r.grad["q"] = flat(dq);
  r.grad["k"] = flat(dk);
  r.grad["path_w"] = flat(dw);
  r.grad["path_beta"] = flat(dbeta);
  return r;
}

using ::lcr::cuda::test::rel_l2;

std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

void check_folds(const GpuCase& c, Device dev) {
  const Problems ps = make_problems(c);
  std::mt19937_64 rng(c.seed * 31 + 5);
  std::normal_distribution<float> n01(0.f, 1.f);
  FoldSeeds s;
  s.dq.resize(size_t(c.B) * c.L * c.H * c.D);
  s.dk.resize(size_t(c.B) * c.L * c.Hkv * c.D);
  s.dp.resize(size_t(c.B) * c.Hkv * c.D * c.D);
  for (auto* v : {&s.dq, &s.dk, &s.dp})
    for (float& x : *v) x = n01(rng);
  const FoldRef ref = reference(c, ps.in, s), naive = reference(c, ps.naive, s);
  const KernelResult with = run_kernels(c, ps.in, true, dev, &s);
  const KernelResult without = run_kernels(c, ps.in, true, dev);
  ASSERT_TRUE(with.all_written && without.all_written) << c.name << ": an output kept its poison";
  for (const auto& [name, r] : ref.fold) {
    const double err = rel_l2(to_double(with.fold.at(name)), r);
    const double yard = rel_l2(naive.fold.at(name), r);
    std::printf("  %s fold %s: error %.2e, naive bf16 %.2e\n", c.name.c_str(), name.c_str(), err,
                yard);
    EXPECT_LE(err, kTolFactor * yard + kTolFloor) << c.name << ": fold " << name;
  }
  for (const auto& [name, r] : ref.grad) {
    std::vector<double> diff(r.size());
    const auto& a = with.grad.at(name);
    const auto& b = without.grad.at(name);
    for (size_t i = 0; i < diff.size(); ++i) diff[i] = double(a[i]) - double(b[i]);
    const double err = rel_l2(diff, r), yard = rel_l2(naive.grad.at(name), r);
    std::printf("  %s fold gradient d%s: error %.2e, naive bf16 %.2e\n", c.name.c_str(),
                name.c_str(), err, yard);
    EXPECT_LE(err, kTolFactor * yard + kTolFloor) << c.name << ": fold gradient d" << name;
  }
}

GpuCase fold_case(const char* name, int L, int D, int H, int Hkv, bool fox, uint64_t seed) {
  GpuCase c;
  c.name = name, c.L = L, c.D = D, c.H = H, c.Hkv = Hkv, c.fox = fox, c.seed = seed;
  c.B = 2;
  return c;
}

// L = 1000: 16 blocks in groups of 4, so both chain levels and a short last group run.
std::vector<GpuCase> gpu_fold_cases() {
  return {fold_case("D64_L1", 1, 64, 4, 2, false, 301),
          fold_case("D64_L7", 7, 64, 4, 2, true, 302),
          fold_case("D64_L129", 129, 64, 4, 2, false, 303),
          fold_case("D64_L1000", 1000, 64, 4, 2, true, 304),
          fold_case("D128_L129", 129, 128, 4, 2, false, 305),
          fold_case("D128_L1000", 1000, 128, 2, 2, false, 306)};
}

class CudaPathFolds : public ::testing::TestWithParam<GpuCase> {};
TEST_P(CudaPathFolds, MatchFloat64Definitions) {
  LCR_REQUIRE_GPU();
  check_folds(GetParam(), Device::Gpu);
}
INSTANTIATE_TEST_SUITE_P(Cases, CudaPathFolds, ::testing::ValuesIn(gpu_fold_cases()),
                         [](const auto& info) { return info.param.name; });

// Emulator: small, but 300 positions give 6 blocks in 3 groups (a short last one).
std::vector<GpuCase> emu_fold_cases() {
  return {fold_case("D64_L7", 7, 64, 2, 1, false, 311),
          fold_case("D64_L300", 300, 64, 2, 1, true, 312)};
}
class CudaPathFoldsEmu : public ::testing::TestWithParam<GpuCase> {};
TEST_P(CudaPathFoldsEmu, MatchFloat64Definitions) { check_folds(GetParam(), Device::Emulator); }
INSTANTIATE_TEST_SUITE_P(Cases, CudaPathFoldsEmu, ::testing::ValuesIn(emu_fold_cases()),
                         [](const auto& info) { return info.param.name; });
// The same in the form without wgmma (sm_80 .. sm_89).
class CudaPathFoldsEmuMmaSync : public ::testing::TestWithParam<GpuCase> {};
TEST_P(CudaPathFoldsEmuMmaSync, MatchFloat64Definitions) {
  check_folds(GetParam(), Device::EmulatorMmaSync);
}
INSTANTIATE_TEST_SUITE_P(Cases, CudaPathFoldsEmuMmaSync, ::testing::ValuesIn(emu_fold_cases()),
                         [](const auto& info) { return info.param.name; });

// carry / carry_backward / mat_products against float64 loops, on the emulator and the GPU.
struct CarryCase {
  int B = 2, L = 70, H = 4, Hkv = 2, D = 64;
};

void check_carry(const CarryCase& k, Device dev) {
  std::mt19937_64 rng(977 + k.L + k.D);
  std::normal_distribution<float> n01(0.f, 1.f);
  const size_t nq = size_t(k.B) * k.L * k.H * k.D, nm = size_t(k.B) * k.Hkv * k.D * k.D;
  std::vector<float> M(nm), q(nq), dy(nq), dq0(nq), dM0(nm), A(nm), Bm(nm);
  for (auto* v : {&M, &q, &dy, &dq0, &dM0, &A, &Bm})
    for (float& x : *v) x = n01(rng) * 0.3f;
  const int G = k.H / k.Hkv;
  // float64 definitions
  std::vector<double> y(nq), dq(dq0.begin(), dq0.end()), dM(dM0.begin(), dM0.end()), C(nm);
  for (int b = 0; b < k.B; ++b)
    for (int i = 0; i < k.L; ++i)
      for (int h = 0; h < k.H; ++h) {
        const size_t row = ((size_t(b) * k.L + i) * k.H + h) * k.D;
        const size_t mb = (size_t(b) * k.Hkv + h / G) * k.D * k.D;
        for (int r = 0; r < k.D; ++r)
          for (int c = 0; c < k.D; ++c) {
            y[row + r] += double(M[mb + r * k.D + c]) * q[row + c];
            dq[row + c] += double(M[mb + r * k.D + c]) * dy[row + r];
            dM[mb + r * k.D + c] += double(dy[row + r]) * q[row + c];
          }
      }
  for (size_t m = 0; m < nm / (size_t(k.D) * k.D); ++m)  // C = A^T B + C0 (C0 = M)
    for (int r = 0; r < k.D; ++r)
      for (int c = 0; c < k.D; ++c) {
        double s = M[m * k.D * k.D + r * k.D + c];
        for (int t = 0; t < k.D; ++t)
          s += double(A[m * k.D * k.D + t * k.D + r]) * Bm[m * k.D * k.D + t * k.D + c];
        C[m * k.D * k.D + r * k.D + c] = s;
      }
  std::vector<float> y_k(nq), dq_k = dq0, dM_k = dM0, C_k = M;
  const int batch = k.B * k.Hkv;
  if (on_emulator(dev)) {
    const bool mma = dev == Device::EmulatorMmaSync;
    const auto carry = mma ? cuda::path::emu_mma::carry : cuda::path::emu::carry;
    const auto carry_backward =
        mma ? cuda::path::emu_mma::carry_backward : cuda::path::emu::carry_backward;
    const auto mat_products =
        mma ? cuda::path::emu_mma::mat_products : cuda::path::emu::mat_products;
    std::vector<__nv_bfloat16> yb(nq);
    carry(k.B, k.L, k.H, k.Hkv, k.D, M.data(), q.data(), yb.data());
    y_k = cuda::test::from_bf16(yb);
    carry_backward(k.B, k.L, k.H, k.Hkv, k.D, M.data(), q.data(), dy.data(), dq_k.data(),
                   dM_k.data());
    mat_products(batch, k.D, A.data(), true, Bm.data(), false, C_k.data(), true);
  } else {
    using cuda::DeviceBuffer;
    auto up = [](const std::vector<float>& x) {
      DeviceBuffer<float> d(x.size());
      LCR_CUDA_CHECK(cudaMemcpy(d.data(), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
      return d;
    };
    auto down = [](const DeviceBuffer<float>& d, std::vector<float>& x) {
      LCR_CUDA_CHECK(cudaMemcpy(x.data(), d.data(), x.size() * 4, cudaMemcpyDeviceToHost));
    };
    auto dM_ = up(M), dq_ = up(q), ddy = up(dy), ddq = up(dq0), ddM = up(dM0), dA = up(A),
         dB = up(Bm), dC = up(M);
    DeviceBuffer<__nv_bfloat16> dy_b(nq);
    cuda::path::carry(k.B, k.L, k.H, k.Hkv, k.D, dM_.data(), dq_.data(), dy_b.data(), nullptr);
    cuda::path::carry_backward(k.B, k.L, k.H, k.Hkv, k.D, dM_.data(), dq_.data(), ddy.data(),
                               ddq.data(), ddM.data(), nullptr);
    cuda::path::mat_products(batch, k.D, dA.data(), true, dB.data(), false, dC.data(), true,
                             nullptr);
    std::vector<__nv_bfloat16> yb(nq);
    LCR_CUDA_CHECK(cudaMemcpy(yb.data(), dy_b.data(), nq * 2, cudaMemcpyDeviceToHost));
    y_k = cuda::test::from_bf16(yb);
    down(ddq, dq_k);
    down(ddM, dM_k);
    down(dC, C_k);
  }
  // carry and carry_backward run on the tensor cores: M, q and dy are rounded to bf16 once
  // (2^-9 relative each, about 1.1e-3 RMS), y once more on output; the products sum D or
  // L G terms in fp32. Bound 8e-3: about 3x the combined RMS. mat_products is fp32
  // throughout.
  // dq and dM are checked on what the kernel added (their starting values are exact).
  auto added = [](const std::vector<float>& got, const std::vector<double>& want,
                  const std::vector<float>& start, std::vector<double>& ref) {
    std::vector<double> a(got.size());
    ref.resize(got.size());
    for (size_t i = 0; i < got.size(); ++i)
      a[i] = double(got[i]) - start[i], ref[i] = want[i] - start[i];
    return a;
  };
  std::vector<double> dq_ref, dM_ref;
  const double e_y = rel_l2(to_double(y_k), y), e_dq = rel_l2(added(dq_k, dq, dq0, dq_ref), dq_ref),
               e_dM = rel_l2(added(dM_k, dM, dM0, dM_ref), dM_ref);
  std::printf("  carry D=%d L=%d: y %.2e, dq %.2e, dM %.2e\n", k.D, k.L, e_y, e_dq, e_dM);
  EXPECT_LE(e_y, 8e-3) << "carry y";
  EXPECT_LE(e_dq, 8e-3) << "carry_backward dq";
  EXPECT_LE(e_dM, 8e-3) << "carry_backward dM";
  EXPECT_LE(rel_l2(to_double(C_k), C), 1e-5) << "mat_products";
}

TEST(CudaPathCarry, MatchesFloat64LoopsOnTheEmulator) {
  for (Device dev : {Device::Emulator, Device::EmulatorMmaSync}) {
    check_carry({2, 70, 4, 2, 64}, dev);
    check_carry({1, 5, 1, 1, 128}, dev);
  }
}

TEST(CudaPathCarry, MatchesFloat64LoopsOnTheGpu) {
  LCR_REQUIRE_GPU();
  check_carry({2, 1000, 4, 2, 64}, Device::Gpu);
  check_carry({1, 333, 2, 1, 128}, Device::Gpu);
}

}  // namespace
}  // namespace lcr::test::cudapath
