// gemm against a naive triple loop at odd sizes (1, 7, 33, 129: below, at and across the
// 4 x 8 blocks and the vector kernels' 16-, 32- and 64-wide column blocks; 100 and 200 take
// every count of packs a block), every transpose combination, alpha/beta, padded leading
// dimensions, with each kernel this build and CPU have.
// Tolerance: every kernel sums the same K products in increasing k order (the vector ones
// with FMA), so results agree to a few ulps of sum |a b|: 1e-13 (double) / 1e-5 (float)
// relative to that sum.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/model/gemm.hpp"
#include "kernels/base/error.hpp"

namespace lcr {
namespace {

template <class T>
void check_gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, T beta, int pad,
                double tol) {
  const int64_t ar = ta == Trans::No ? M : K, ac = ta == Trans::No ? K : M;
  const int64_t br = tb == Trans::No ? K : N, bc = tb == Trans::No ? N : K;
  const int64_t lda = ac + pad, ldb = bc + pad, ldc = N + pad;
  View1<T> A("A", size_t(ar * lda)), B("B", size_t(br * ldb)), C("C", size_t(M * ldc));
  auto hA = Kokkos::create_mirror_view(A), hB = Kokkos::create_mirror_view(B),
       hC = Kokkos::create_mirror_view(C);
  std::mt19937_64 gen(uint64_t(M * 131 + N * 17 + K));
  std::uniform_real_distribution<double> u(-1, 1);
  for (size_t i = 0; i < hA.extent(0); ++i) hA(i) = T(u(gen));
  for (size_t i = 0; i < hB.extent(0); ++i) hB(i) = T(u(gen));
  for (size_t i = 0; i < hC.extent(0); ++i) hC(i) = T(u(gen));
  Kokkos::deep_copy(A, hA);
  Kokkos::deep_copy(B, hB);
  Kokkos::deep_copy(C, hC);
  // With a host backend the mirror IS the device view; keep C's initial values apart.
  const std::vector<T> C0(hC.data(), hC.data() + hC.extent(0));
  gemm<T>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  auto out = Kokkos::create_mirror_view_and_copy(HostSpace(), C);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = ta == Trans::No ? hA(i * lda + k) : hA(k * lda + i);
        const double b = tb == Trans::No ? hB(k * ldb + j) : hB(j * ldb + k);
        s += a * b;
        mag += std::abs(a * b);
      }
      const double want = double(alpha) * s + double(beta) * double(C0[size_t(i * ldc + j)]);
      ASSERT_NEAR(out(i * ldc + j), want, tol * (1 + std::abs(double(alpha)) * mag))
          << "M=" << M << " N=" << N << " K=" << K << " at (" << i << ", " << j << ")";
    }
  // Padding columns untouched.
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(out(i * ldc + j), C0[size_t(i * ldc + j)]);
}

// Runs the test body with each kernel in turn, then restores the default.
class GemmKernels : public ::testing::TestWithParam<GemmKernel> {
 protected:
  void SetUp() override {
    if (!gemm_use_kernel(GetParam())) GTEST_SKIP() << "this build or CPU lacks the kernel";
  }
  void TearDown() override { gemm_use_kernel(GemmKernel::Best); }
};

TEST_P(GemmKernels, MatchesNaiveAtOddSizesAllTransposes) {
  const int64_t sizes[][3] = {{1, 1, 1},  {7, 7, 7},    {1, 129, 7}, {129, 1, 33},  {33, 7, 129},
                              {7, 33, 1}, {65, 31, 40}, {5, 100, 9}, {37, 200, 70}, {6, 16, 3}};
  for (auto ta : {Trans::No, Trans::Yes})
    for (auto tb : {Trans::No, Trans::Yes})
      for (const auto& s : sizes) {
        check_gemm<double>(ta, tb, s[0], s[1], s[2], 1.0, 0.0, 0, 1e-13);
        check_gemm<double>(ta, tb, s[0], s[1], s[2], -0.5, 1.25, 3, 1e-13);
        check_gemm<float>(ta, tb, s[0], s[1], s[2], 2.0f, 1.0f, 1, 1e-5);
      }
}

TEST_P(GemmKernels, BetaZeroIgnoresNaNInC) {
  View1<float> A("A", 7 * 5), B("B", 5 * 40), C("C", 7 * 40);
  Kokkos::deep_copy(A, 1.0f);
  Kokkos::deep_copy(B, 0.5f);
  Kokkos::deep_copy(C, std::nanf(""));
  gemm<float>(Trans::No, Trans::No, 7, 40, 5, 1.0f, A.data(), B.data(), 0.0f, C.data());
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), C);
  for (size_t i = 0; i < h.extent(0); ++i) ASSERT_EQ(h(i), 2.5f) << "at " << i;
}

std::string kernel_name(const ::testing::TestParamInfo<GemmKernel>& info) {
  const char* names[] = {"Best", "Portable", "Sse", "Avx2", "Avx512"};
  return names[int(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Each, GemmKernels,
                         ::testing::Values(GemmKernel::Best, GemmKernel::Portable, GemmKernel::Sse,
                                           GemmKernel::Avx2, GemmKernel::Avx512),
                         kernel_name);

TEST(Gemm, BetaZeroIgnoresGarbageInC) {
  View1<double> A("A", 4), B("B", 4), C("C", 4);
  Kokkos::deep_copy(A, 1.0);
  Kokkos::deep_copy(B, 2.0);
  Kokkos::deep_copy(C, std::nan(""));
  gemm<double>(Trans::No, Trans::No, 2, 2, 2, 1.0, A.data(), B.data(), 0.0, C.data());
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), C);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h(i), 4.0);
}

TEST(Gemm, KZeroScalesC) {
  View1<double> C("C", 6);
  Kokkos::deep_copy(C, 3.0);
  gemm<double>(Trans::No, Trans::No, 2, 3, 0, 1.0, nullptr, 0, nullptr, 3, 0.5, C.data(), 3);
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), C);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(h(i), 1.5);
}

TEST(Gemm, RejectsBadLeadingDimension) {
  View1<double> A("A", 4), B("B", 4), C("C", 4);
  EXPECT_THROW(
      gemm<double>(Trans::No, Trans::No, 2, 2, 2, 1.0, A.data(), 1, B.data(), 2, 0.0, C.data(), 2),
      Error);
}

}  // namespace
}  // namespace lcr
