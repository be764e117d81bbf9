#include "kernels/schemes/path/path.hpp"

#include <cmath>

#include "kernels/attention/kokkos/sdpa.hpp"
#include "kernels/base/error.hpp"
#include "kernels/schemes/numerics/qk_norm.hpp"
#include "kernels/schemes/path/params.hpp"
#include "kernels/schemes/path/scan.hpp"

namespace lcr::path {
// Helpers sit in a named namespace, not an anonymous one: nvcc's rules for extended
// (device) lambdas are simplest to meet in functions with external linkage.
namespace check_detail {

template <class V>
void expect_shape(const char* name, const V& v, std::vector<int64_t> want) {
  require(shape_of(v) == want, name, " has shape ", shape_string(shape_of(v)), ", expected ",
          shape_string(want));
}

// "[i0, i1, ...]" of flat index `flat` in a LayoutRight view of shape `shape`.
std::string index_string(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t r = shape.size(); r-- > 0;) {
    idx[r] = flat % shape[r];
    flat /= shape[r];
  }
  return shape_string(idx);
}

// First flat index (in units of `row` elements) for which bad(row start) holds; -1 if none.
template <class T, class Bad>
int64_t first_bad(const T* data, int64_t rows, const Bad& bad) {
  int64_t first = rows;
  Kokkos::parallel_reduce(
      "lcr::path_check", Kokkos::RangePolicy<ExecSpace>(0, rows),
      KOKKOS_LAMBDA(int64_t r, int64_t & m) {
        if (bad(data, r) && r < m) m = r;
      },
      Kokkos::Min<int64_t>(first));
  return first >= rows ? -1 : first;  // Min's identity is the largest int64_t
}

template <class V>
void check_finite(const char* name, const V& v) {
  using T = typename V::non_const_value_type;
  if (v.span() == 0) return;
  const int64_t at = first_bad(
      v.data(), int64_t(v.span()),
      KOKKOS_LAMBDA(const T* x, int64_t i) { return !(x[i] - x[i] == T(0)); });
  require(at < 0, name, " has a non-finite value (NaN or inf) at ", index_string(at, shape_of(v)),
          "; PaTH needs finite inputs");
}

template <class T>
View4<const T> rms_normed(const View4<const T>& x, const PView1<T>& gain, double eps) {
  View4<T> y("lcr::path_qk_normed", x.extent(0), x.extent(1), x.extent(2), x.extent(3));
  rms_norm_heads_forward<T>(x, gain, T(eps), y);
  return y;
}

template <class T>
PathArgs<T> make_args(const AttentionSpec& spec, const AttentionInputs<T>& in,
                      const ParamSet<T>& params) {
  PathArgs<T> a;
  a.q = in.q;
  a.k = in.k;
  if (spec.numerics.qk_norm) {
    a.q = rms_normed<T>(in.q, params.v1("qk_norm.q_gain"), spec.numerics.qk_norm_eps);
    a.k = rms_normed<T>(in.k, params.v1("qk_norm.k_gain"), spec.numerics.qk_norm_eps);
  }
  a.v = in.v;
  a.w = in.path_w;
  a.beta = in.path_beta;
  if (uses_fox(spec.scheme)) {
    a.fox_q = in.fox_cq;
    a.fox_k = in.fox_ck;
  }
  a.scale = T(1.0 / std::sqrt(double(spec.head_dim)));
  a.softcap = T(spec.numerics.softcap);
  a.block = spec.path.block_size;
  return a;
}

}  // namespace check_detail

using namespace check_detail;

template <class T>
void check_inputs(const AttentionSpec& spec, const AttentionInputs<T>& in) {
  const int64_t B = in.q.extent(0), Lq = in.q.extent(1), Lk = in.k.extent(1);
  require(spec.path.block_size >= 1, "path.block_size must be >= 1, got ", spec.path.block_size);
  require(Lq == Lk && in.q_pos0 == in.k_pos0,
          "PaTH is self-attention over one span of positions: q has ", Lq, " rows from position ",
          in.q_pos0, ", k has ", Lk, " rows from position ", in.k_pos0,
          "; pass the same span (a context-parallel ring uses kernels/schemes/path/ring.hpp)");
  expect_shape("path_w", in.path_w, {B, Lk, spec.kv_heads, spec.head_dim});
  expect_shape("path_beta", in.path_beta, {B, Lk, spec.kv_heads});
  check_finite("q", in.q);
  check_finite("k", in.k);
  check_finite("v", in.v);
  check_finite("path_w", in.path_w);
  check_finite("path_beta", in.path_beta);
  if (uses_fox(spec.scheme)) {
    check_finite("fox_cq", in.fox_cq);
    check_finite("fox_ck", in.fox_ck);
  }
  const T* beta = in.path_beta.data();
  const int64_t bad_beta = first_bad(
      beta, int64_t(in.path_beta.span()),
      KOKKOS_LAMBDA(const T* x, int64_t i) { return !(x[i] >= T(0) && x[i] < T(2)); });
  if (bad_beta >= 0) {
    T value;
    Kokkos::deep_copy(value,
                      Kokkos::subview(in.path_beta, bad_beta / (Lk * spec.kv_heads),
                                      bad_beta / spec.kv_heads % Lk, bad_beta % spec.kv_heads));
    throw_error("path_beta", index_string(bad_beta, shape_of(in.path_beta)), " = ", value,
                " is outside [0, 2): there H = I - beta w w^T does not shrink (|1 - beta| >= 1) "
                "and products of it can blow up; build beta with path::beta_forward, which "
                "keeps it in [0, ",
                kBetaMax, "]");
  }
  const int d = spec.head_dim;
  const T tol = T(kUnitNormTolerance);
  const int64_t bad_w = first_bad(
      in.path_w.data(), int64_t(in.path_w.span() / d), KOKKOS_LAMBDA(const T* x, int64_t r) {
        T ss = T(0);
        for (int c = 0; c < d; ++c) ss += x[r * d + c] * x[r * d + c];
        return !(ss - T(1) <= tol && T(1) - ss <= tol);
      });
  if (bad_w >= 0) {
    auto row = Kokkos::create_mirror_view_and_copy(
        HostSpace(),
        Kokkos::subview(in.path_w, bad_w / (Lk * spec.kv_heads), bad_w / spec.kv_heads % Lk,
                        bad_w % spec.kv_heads, Kokkos::ALL));
    double ss = 0;
    for (int c = 0; c < d; ++c) ss += double(row(c)) * double(row(c));
    throw_error("path_w", index_string(bad_w, {B, Lk, spec.kv_heads}), " has norm ", std::sqrt(ss),
                "; PaTH needs unit vectors (a zero vector has no direction): ",
                "normalise it, e.g. with path::w_forward");
  }
}

template <class T>
void attention_forward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                       const ParamSet<T>& params, const AttentionOutputs<T>& out) {
  path_forward<T>(make_args(spec, in, params), out.o, out.lse);
  if (spec.numerics.has_sink()) sdpa_apply_sink<T>(params.v1("sink"), out.o, out.lse);
}

template <class T>
void attention_backward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                        const ParamSet<T>& params, const AttentionOutputs<T>& out,
                        const View4<const T>& dout, AttentionGrads<T>& g) {
  const PathArgs<T> a = make_args(spec, in, params);
  const int B = in.q.extent(0), L = in.q.extent(1), H = spec.heads;
  Kokkos::deep_copy(g.dparams.data, T(0));
  View3<T> delta("lcr::delta", B, H, L);
  sdpa_row_delta<T>(out.o, dout, delta);
  const bool norm = spec.numerics.qk_norm;
  View4<T> dq = g.dq, dk = g.dk;
  if (norm) {
    dq = View4<T>("lcr::path_dq_normed", g.dq.layout());
    dk = View4<T>("lcr::path_dk_normed", g.dk.layout());
  }
  View3<T> dfq, dfk;
  if (uses_fox(spec.scheme)) {
    dfq = g.dfox_cq;
    dfk = g.dfox_ck;
  }
  path_backward<T>(a, out.lse, delta, dout, dq, dk, g.dv, g.dpath_w, g.dpath_beta, dfq, dfk);
  if (spec.numerics.has_sink())
    sdpa_sink_backward<T>(params.v1("sink"), out.lse, delta, g.dparams.v1("sink"));
  if (norm) {
    const T eps = T(spec.numerics.qk_norm_eps);
    rms_norm_heads_backward<T>(in.q, params.v1("qk_norm.q_gain"), eps, dq, g.dq,
                               g.dparams.v1("qk_norm.q_gain"));
    rms_norm_heads_backward<T>(in.k, params.v1("qk_norm.k_gain"), eps, dk, g.dk,
                               g.dparams.v1("qk_norm.k_gain"));
  }
}

#define LCR_INSTANTIATE(T)                                                             \
  template void check_inputs<T>(const AttentionSpec&, const AttentionInputs<T>&);      \
  template void attention_forward<T>(const AttentionSpec&, const AttentionInputs<T>&,  \
                                     const ParamSet<T>&, const AttentionOutputs<T>&);  \
  template void attention_backward<T>(const AttentionSpec&, const AttentionInputs<T>&, \
                                      const ParamSet<T>&, const AttentionOutputs<T>&,  \
                                      const View4<const T>&, AttentionGrads<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr::path
