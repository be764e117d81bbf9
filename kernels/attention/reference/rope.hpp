#pragma once
// TEMPORARY: replaced by the RoPE reference in this session.
#include "core/error.hpp"
#include "kernels/attention/spec.hpp"
namespace lcr::ref {
template <class T>
T rope_reference_logit(const AttentionSpec&, const T*, const T*, int64_t, int64_t) {
  throw_error("rope reference not implemented yet");
}
}  // namespace lcr::ref
