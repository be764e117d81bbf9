#pragma once
// x rounded to the nearest bf16 (ties to even), as __float2bfloat16 does, on the host without
// CUDA headers; inf and NaN unchanged. Shared by the CPU attention harness (the naive bf16
// yardstick's rounded o) and the CUDA SDPA's float64 reference.
#include <cstdint>
#include <cstring>

namespace lcr::test {

inline float nearest_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace lcr::test
