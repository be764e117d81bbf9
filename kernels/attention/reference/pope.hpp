#pragma once
// TEMPORARY: replaced by the PoPE reference in this session.
#include "core/error.hpp"
#include "kernels/attention/params.hpp"
namespace lcr::ref {
template <class T>
T pope_reference_logit(const AttentionSpec&, const ParamSet<T, HostSpace>&, const T*, const T*, int,
                       int64_t, int64_t) {
  throw_error("pope reference not implemented yet");
}
}  // namespace lcr::ref
