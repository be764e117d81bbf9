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
// log(1 + e) for 0 <= e <= 1 (softplus's tail). float: log(u) times e / (u - 1), u = 1 + e
// rounded, which undoes u's rounding (Goldberg, "What every computer scientist should know
// about floating-point arithmetic", Thm. 4: a few ulp), so it runs on logf rather than
// glibc's slower log1pf; double keeps log1p (the reference tests' exactness).
template <class T>
KOKKOS_INLINE_FUNCTION T log1p_unit(T e) {
  if constexpr (std::is_same_v<T, float>) {
    const float u = 1.f + e;
    return u == 1.f ? e : log(u) * (e / (u - 1.f));
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
