#pragma once
// Deterministic full-sequence attention problems for the multi-rank tests: every rank
// draws the same tensors from the same seed, shards them, runs the ring, gathers, and
// compares with the single-rank attention_forward / attention_backward on the full
// tensors (which every rank can compute, so every rank checks and every rank agrees).
#include <string>
#include <vector>

#include "kernels/attention/attention.hpp"

namespace lcr::test {

template <class T>
using H3 = View3<T, HostSpace>;
template <class T>
using H4 = View4<T, HostSpace>;

struct RingCase {
  std::string name;
  AttentionSpec spec;
  int batch = 1;
  uint64_t seed = 1;
  int64_t pos0 = 0;  // global position of the sequence's first row (q_pos0 = k_pos0)
};

// Full (unsharded) inputs, float64 on the host. FoX: log_f [B, L, H] (log sigmoid of a
// normal draw around +2, so gates near 0.9) and c = its inclusive cumulative sum.
struct FullProblem {
  H4<double> q, k, v, dout;
  H3<double> log_f, fox_c;
  ParamSet<double, HostSpace> params;
};

FullProblem make_full_problem(const RingCase& c, int64_t L);

// The cases every layout and rank count runs: each dot-product scheme alone, and with
// the numerics options and GQA mixed in.
std::vector<RingCase> ring_cases();
RingCase ring_case(const std::string& name);  // one of ring_cases() by name

// Host float64 view -> a view of type Out (device, precision T), same shape.
template <class Out, class HV>
Out to_device(const HV& h, const std::string& label) {
  Out d(label, h.layout());
  auto m = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < h.span(); ++i) m.data()[i] = typename Out::value_type(h.data()[i]);
  Kokkos::deep_copy(d, m);
  return d;
}

// Flat float64 copy of any view (for comparisons).
template <class V>
std::vector<double> flat(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  std::vector<double> out(h.span());
  for (size_t i = 0; i < h.span(); ++i) out[i] = double(h.data()[i]);
  return out;
}

// max |a - b| / max(max |b|, 1e-3): normwise relative error, absolute below 1e-3 (a
// gradient that is zero analytically is roundoff on both sides).
double rel_error(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace lcr::test
