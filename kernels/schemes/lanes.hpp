#pragma once
// The contract of a dot-product scheme's "lanes": a map from the caller's (q, k) to the
// (q', k') the plain SDPA kernel consumes, and its backward. Implemented by rope/, goat/,
// pope/; NoPE, ALiBi and FoX use q' = q, k' = k.
#include "kernels/attention/params.hpp"
#include "kernels/attention/spec.hpp"
#include "kernels/base/tensor.hpp"

namespace lcr {

template <class T>
struct LaneArgs {
  const AttentionSpec* spec = nullptr;
  const ParamSet<T>* params = nullptr;
  View4<const T> q;  // [B, Lq, H, dq]   (after QK-RMSNorm when enabled)
  View4<const T> k;  // [B, Lk, Hkv, dq]
  int64_t q_pos0 = 0, k_pos0 = 0;
};

}  // namespace lcr

// Explicit instantiations of a scheme's lanes_forward / lanes_backward (the declarations in
// its header) for float and double; used once, inside the scheme's namespace, in its .cpp.
#define LCR_INSTANTIATE_LANES(T)                                                           \
  template void lanes_forward<T>(const ::lcr::LaneArgs<T>&, const ::lcr::View4<T>&,        \
                                 const ::lcr::View4<T>&);                                  \
  template void lanes_backward<T>(const ::lcr::LaneArgs<T>&, const ::lcr::View4<const T>&, \
                                  const ::lcr::View4<const T>&, const ::lcr::View4<T>&,    \
                                  const ::lcr::View4<T>&, ::lcr::ParamSet<T>&);
#define LCR_INSTANTIATE_SCHEME_LANES() \
  LCR_INSTANTIATE_LANES(float)         \
  LCR_INSTANTIATE_LANES(double)
