#pragma once
// Device math that builds with Kokkos 3.4 (functions in Kokkos::Experimental) and with
// Kokkos >= 3.7 / 4.x (functions in Kokkos::).
#include <Kokkos_Core.hpp>
#include <type_traits>

namespace lcr::kmath {

#if KOKKOS_VERSION >= 30700
using Kokkos::cos;
using Kokkos::exp;
using Kokkos::log;
using Kokkos::log1p;
using Kokkos::sin;
using Kokkos::sqrt;
using Kokkos::tanh;
#else
using Kokkos::Experimental::cos;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::log;
using Kokkos::Experimental::log1p;
using Kokkos::Experimental::sin;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::tanh;
#endif

template <class T>
KOKKOS_INLINE_FUNCTION T sigmoid(T x) {
  return x >= T(0) ? T(1) / (T(1) + exp(-x)) : exp(x) / (T(1) + exp(x));
}
// log(1 + e) for 0 <= e <= 1 (softplus's tail). float: 2 atanh(s) with s = e / (2 + e) in
// [0, 1/3], its odd series through s^13 (the first term left out is below s / 15 9^-7, a
// fifth of an ulp): one division and a polynomial, no library call, so a loop of softplus
// vectorises. double keeps log1p (the reference tests' exactness).
template <class T>
KOKKOS_INLINE_FUNCTION T log1p_unit(T e) {
  if constexpr (std::is_same_v<T, float>) {
    const float s = e / (2.f + e), w = s * s;
    float p = 1.f / 13;
    p = p * w + 1.f / 11;
    p = p * w + 1.f / 9;
    p = p * w + 1.f / 7;
    p = p * w + 1.f / 5;
    p = p * w + 1.f / 3;
    return 2.f * s + 2.f * s * (p * w);
  } else {
    return log1p(e);
  }
}
// softplus(x) = log(1 + e^x), without overflow for large x.
template <class T>
KOKKOS_INLINE_FUNCTION T softplus(T x) {
  return x > T(0) ? x + log1p_unit(exp(-x)) : log1p_unit(exp(x));
}
// softplus(x) and sigmoid(x) (its derivative) from one exp.
template <class T>
KOKKOS_INLINE_FUNCTION void softplus_sigmoid(T x, T& sp, T& sg) {
  const T e = exp(x > T(0) ? -x : x);  // e^(-|x|)
  sp = (x > T(0) ? x : T(0)) + log1p_unit(e);
  sg = x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}
template <class T>
KOKKOS_INLINE_FUNCTION T silu(T x) {
  return x * sigmoid(x);
}

}  // namespace lcr::kmath
