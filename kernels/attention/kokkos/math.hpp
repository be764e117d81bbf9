#pragma once
// Device math that builds with Kokkos 3.4 (functions in Kokkos::Experimental) and with
// Kokkos >= 3.7 / 4.x (functions in Kokkos::).
#include <Kokkos_Core.hpp>

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
// softplus(x) = log(1 + e^x), without overflow for large x.
template <class T>
KOKKOS_INLINE_FUNCTION T softplus(T x) {
  return x > T(0) ? x + log1p(exp(-x)) : log1p(exp(x));
}
template <class T>
KOKKOS_INLINE_FUNCTION T silu(T x) {
  return x * sigmoid(x);
}

}  // namespace lcr::kmath
