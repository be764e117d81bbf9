// Tests of the CUDA SDPA (kernels/attention/cuda/sdpa.hpp).
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/attention/cuda/sdpa.hpp"

namespace lcr::cuda {
namespace {

SdpaArgs valid_args() {
  static __align__(16) __nv_bfloat16 dummy[8];  // host pointer: check() never dereferences
  SdpaArgs a;
  a.B = 2, a.Lq = 7, a.Lk = 7, a.H = 4, a.Hkv = 2, a.D = 64, a.Dv = 64;
  a.q = a.k = a.v = dummy;
  return a;
}

TEST(CudaSdpaCheck, AcceptsValidAndRejectsBadInput) {
  EXPECT_NO_THROW(check(valid_args()));
  auto bad = [](auto edit) {
    SdpaArgs a = valid_args();
    edit(a);
    EXPECT_THROW(check(a), lcr::Error);
  };
  bad([](SdpaArgs& a) { a.H = 3; });     // not a multiple of Hkv
  bad([](SdpaArgs& a) { a.D = 12; });    // not a multiple of 8
  bad([](SdpaArgs& a) { a.Dv = 264; });  // wider than 256
  bad([](SdpaArgs& a) { a.B = 0; });
  bad([](SdpaArgs& a) { a.softcap = -1.f; });
  bad([](SdpaArgs& a) { a.q = nullptr; });
  bad([](SdpaArgs& a) { a.k = a.k + 1; });  // misaligned
}

}  // namespace
}  // namespace lcr::cuda
