#pragma once
// Attention tests written once, run for every scheme (Cabana style): a Case names the
// spec and shapes; the harness draws fresh random inputs, runs the Kokkos kernels in
// float64 and float32, the float64 reference, the reference on dual numbers (exact
// directional derivatives) and central finite differences.
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/attention/reference/reference.hpp"

namespace lcr::test {

template <class T>
using H3 = View3<T, HostSpace>;
template <class T>
using H4 = View4<T, HostSpace>;

struct Case {
  AttentionSpec spec;
  int B = 1, Lq = 7, Lk = 7;
  int64_t q_pos0 = 0, k_pos0 = 0;
  uint64_t seed = 1;
};

// All inputs in float64 on the host; "tensors" maps a name (q, k, v, fox_cq, fox_ck,
// or a parameter name) to its flat storage so tests can loop over everything.
struct Problem {
  Case c;
  H4<double> q, k, v, dout;
  H3<double> fox_cq, fox_ck;
  ParamSet<double, HostSpace> params;
};

Problem make_problem(const Case& c);

// Names of every differentiable input of the problem.
std::vector<std::string> input_names(const Problem& p);
// Flat access to one named input of a problem (host, float64).
double* input_data(Problem& p, const std::string& name);
size_t input_size(const Problem& p, const std::string& name);

struct Result {
  std::vector<double> o, lse;                       // flat, float64 on host
  std::map<std::string, std::vector<double>> grad;  // by input name
};

// Runs the Kokkos forward (and backward) in precision T. bf16_o: the backward receives o
// rounded to bf16, as the caller of a bf16 API holds it (its row delta = <dO, O> then carries
// that rounding, as a GPU backward's does); the returned o is unrounded.
template <class T>
Result run_kokkos(const Problem& p, bool backward, bool bf16_o = false);

// The float64 reference forward (flat o, lse).
Result run_reference(const Problem& p);

// <dout, o> of the reference: the scalar whose gradient the backward computes.
double reference_loss(const Problem& p);

// d/de <dout, o(x + e u)> at e = 0, exactly (dual numbers), with u set on one input.
double reference_directional(const Problem& p, const std::string& name,
                             const std::vector<double>& u);

double max_abs(const std::vector<double>& a);
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace lcr::test
