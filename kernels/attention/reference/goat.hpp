#pragma once
// TEMPORARY: replaced by the GOAT reference in this session.
#include "core/error.hpp"
#include "kernels/attention/params.hpp"
namespace lcr::ref {
template <class T>
T goat_reference_logit(const AttentionSpec&, const ParamSet<T, HostSpace>&, const T*, const T*, int,
                       int, int64_t, int64_t) {
  throw_error("goat reference not implemented yet");
}
}  // namespace lcr::ref
