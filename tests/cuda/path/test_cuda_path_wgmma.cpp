// The wgmma forms of the PaTH kernels (kernels/attention/cuda/device/wgmma.cuh) on one
// warpgroup, against products in double of the same bf16 inputs (fresh each run):
//   c1 = A B^T (both operands K-major from swizzled tiles), c2 = P B (P from registers, B
//   MN-major), c3 = bf16(c1) B (the accumulators fed back as A fragments, as dkv does).
// WgmmaProbeEmu runs the emulator's model of the instruction and of the descriptors (what the
// emulator tests of every kernel rely on); WgmmaProbe runs the hardware, so the two agreeing
// with the definition checks the model (WgmmaProbeEmuDeathTest: the emulator's check that a
// missing async-proxy fence is caught). Tolerance 1e-5 relative (Frobenius): the products
// accumulate at most 128 bf16 x bf16 terms in fp32 (relative rounding ~1e-7 per add, well below
// 1e-5), while one misplaced element (a wrong swizzle, stride or fragment) moves the result by
// ~1e-2 or more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda_test_util.hpp"
#include "kernels/attention/cuda/path/plan.hpp"

namespace lcr::test::cudapath {
namespace {

using ::lcr::cuda::test::round_bf16;

struct Probe {
  std::vector<float> A, B, P;  // bf16 values: [64 x 128], [64 x 128], [64 x 64]
};

Probe make_probe(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Probe p;
  p.A = ::lcr::cuda::test::random_normal(64 * 128, rng);
  p.B = ::lcr::cuda::test::random_normal(64 * 128, rng);
  p.P = ::lcr::cuda::test::random_normal(64 * 64, rng);
  for (auto* v : {&p.A, &p.B, &p.P}) ::lcr::cuda::test::round_to_bf16(*v);
  return p;
}

using ::lcr::cuda::test::rel_l2;

// c = X Y with X [64 x K] and Y [K x N] given as element functions.
template <class X, class Y>
std::vector<double> product(int K, int N, X x, Y y) {
  std::vector<double> c(size_t(64) * N);
  for (int r = 0; r < 64; ++r)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(x(r, k)) * double(y(k, n));
      c[size_t(r) * N + n] = s;
    }
  return c;
}

void check(const Probe& p, const std::vector<float>& c1, const std::vector<float>& c2,
           const std::vector<float>& c3, uint64_t seed) {
  const auto r1 = product(
      128, 64, [&](int r, int k) { return p.A[r * 128 + k]; },
      [&](int k, int n) { return p.B[n * 128 + k]; });
  const auto r2 = product(
      64, 128, [&](int r, int k) { return p.P[r * 64 + k]; },
      [&](int k, int n) { return p.B[k * 128 + n]; });
  // c3 from the kernel's own c1, rounded as the kernel rounds it (round to nearest even).
  const auto r3 = product(
      64, 128, [&](int r, int k) { return round_bf16(c1[r * 64 + k]); },
      [&](int k, int n) { return p.B[k * 128 + n]; });
  EXPECT_LT(rel_l2(c1, r1), 1e-5) << "c1 = A B^T, seed " << seed;
  EXPECT_LT(rel_l2(c2, r2), 1e-5) << "c2 = P B, seed " << seed;
  EXPECT_LT(rel_l2(c3, r3), 1e-5) << "c3 = bf16(c1) B, seed " << seed;
}

TEST(WgmmaProbeEmu, MatchesTheDefinition) {
  const uint64_t seed = ::lcr::cuda::test::case_seed();
  const Probe p = make_probe(seed);
  const auto A = ::lcr::cuda::test::to_bf16(p.A), B = ::lcr::cuda::test::to_bf16(p.B),
             P = ::lcr::cuda::test::to_bf16(p.P);
  std::vector<float> c1(64 * 64), c2(64 * 128), c3(64 * 128);
  ::lcr::cuda::path::detail::wgmma_probe_emu(A.data(), B.data(), P.data(), c1.data(), c2.data(),
                                             c3.data());
  check(p, c1, c2, c3, seed);
}

// The form without wgmma (each product by mma.sync, reading the operands through the same
// descriptors: wgmma.cuh), as sm_80 .. sm_89 run it.
TEST(WgmmaProbeEmuMmaSync, MatchesTheDefinition) {
  const uint64_t seed = ::lcr::cuda::test::case_seed();
  const Probe p = make_probe(seed);
  const auto A = ::lcr::cuda::test::to_bf16(p.A), B = ::lcr::cuda::test::to_bf16(p.B),
             P = ::lcr::cuda::test::to_bf16(p.P);
  std::vector<float> c1(64 * 64), c2(64 * 128), c3(64 * 128);
  ::lcr::cuda::path::detail::wgmma_probe_emu_mma(A.data(), B.data(), P.data(), c1.data(), c2.data(),
                                                 c3.data());
  check(p, c1, c2, c3, seed);
}

// The emulator's async-proxy check (emu.hpp): the same probe without the fence between the
// tiles' cp.async and the products aborts, naming the missing fence.
TEST(WgmmaProbeEmuDeathTest, AMissingFenceAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Probe p = make_probe(1);
  const auto A = ::lcr::cuda::test::to_bf16(p.A), B = ::lcr::cuda::test::to_bf16(p.B),
             P = ::lcr::cuda::test::to_bf16(p.P);
  std::vector<float> c1(64 * 64), c2(64 * 128), c3(64 * 128);
  EXPECT_DEATH(::lcr::cuda::path::detail::wgmma_probe_emu(A.data(), B.data(), P.data(), c1.data(),
                                                          c2.data(), c3.data(), false),
               "fence_async_smem");
}

TEST(WgmmaProbe, MatchesTheDefinition) {
  LCR_REQUIRE_GPU();
  const uint64_t seed = ::lcr::cuda::test::case_seed();
  const Probe p = make_probe(seed);
  auto A = ::lcr::cuda::test::upload_bf16(p.A), B = ::lcr::cuda::test::upload_bf16(p.B),
       P = ::lcr::cuda::test::upload_bf16(p.P);
  ::lcr::cuda::DeviceBuffer<float> c1(64 * 64), c2(64 * 128), c3(64 * 128);
  ::lcr::cuda::path::detail::wgmma_probe(A.data(), B.data(), P.data(), c1.data(), c2.data(),
                                         c3.data());
  check(p, c1.download(), c2.download(), c3.download(), seed);
}

}  // namespace
}  // namespace lcr::test::cudapath
