#pragma once
// The final logit of a PaTH / PaTH-FoX pair, shared by every PaTH kernel so forward and
// backward recompute exactly the same number:
//   x = scale * k_j^T H_{j+1} ... H_i q_i + c_i - c_j,   s = softcap ? cap tanh(x / cap) : x.
#include "kernels/attention/kokkos/math.hpp"

namespace lcr::path {

template <class T>
struct Logit {
  T scale = T(1), softcap = T(0);
  KOKKOS_INLINE_FUNCTION T operator()(T raw, T fox_q, T fox_k) const {
    const T x = scale * raw + fox_q - fox_k;
    return softcap > T(0) ? softcap * kmath::tanh(x / softcap) : x;
  }
  // d s / d x given s.
  KOKKOS_INLINE_FUNCTION T dcap(T s) const {
    if (softcap <= T(0)) return T(1);
    const T u = s / softcap;
    return T(1) - u * u;
  }
};

// Level-0 scratch is small on GPUs (~48 KiB); the PaTH tiles go to level 1 beyond that.
inline int scratch_level(size_t bytes) { return bytes <= 32 * 1024 ? 0 : 1; }

}  // namespace lcr::path
