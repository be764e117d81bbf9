// PoPE lanes (DESIGN.md section 3; seed 002, which corrects the paper's printed sign of
// the frequency exponent and says the clamp is on delta, not theta).
//
// The logit is sum_c mu_q,c mu_k,c cos((p_j - p_i) theta_c + delta_c) / sqrt(d) with
// mu = softplus (content lives in the magnitudes only) and the phase from positions and
// the learned per-(KV head, channel) bias delta only. As one dot product of width 2d:
//   q' = [mu_q cos(phi), mu_q sin(phi)],   phi = p_i theta             (q' [B, Lq, H, 2d])
//   k' = [mu_k cos(psi), mu_k sin(psi)],   psi = p_j theta + delta[hk] (k' [B, Lk, Hkv, 2d])
//   <q', k'> = sum_c mu_q mu_k cos(phi - psi) = sum_c mu_q mu_k cos((p_j - p_i) theta + delta)
// The SDPA scale is 1/sqrt(d), not 1/sqrt(2d): the definition divides by the input width.
// delta is used as clamp(delta, -2 pi, 0); its gradient is the clamp's derivative (zero
// outside the range), so a parameter pushed outside by an optimizer stops moving there.
// Phases are computed in double precision: p theta at p = 1e7 has no accurate float32 form.
//
// Backward, per channel c (dq' = [dre, dim]):
//   dmu = dre cos + dim sin,   dx = dmu sigmoid(x)          (softplus' = sigmoid)
//   dpsi = mu (dim cos psi - dre sin psi)                   (keys only: phi has no parameter)
//   ddelta[hk, c] += sum over b, j of dpsi, inside the clamp range.
// The delta reduction is deterministic: the per-element dpsi is stored, then one team per
// (hk, c) reduces it over b and j in a fixed order (no atomics).
#include "kernels/schemes/pope/pope.hpp"

#include <cmath>

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/attention/kokkos/tile.hpp"
#include "kernels/base/error.hpp"

namespace lcr::pope {
// Kernel helpers sit in a named namespace rather than an anonymous one: nvcc's rules for
// extended (device) lambdas are simplest to meet in functions with external linkage.
namespace detail {

KOKKOS_INLINE_FUNCTION double clamp_delta(double x) {
  return x < kDeltaMin ? kDeltaMin : (x > kDeltaMax ? kDeltaMax : x);
}
KOKKOS_INLINE_FUNCTION bool delta_in_range(double x) { return x >= kDeltaMin && x <= kDeltaMax; }

View1<const double> theta_table(const AttentionSpec& spec) {
  return device_copy("lcr::pope_theta", frequencies(spec));
}

// cos and sin of every phase p theta_c + delta[h, c] of one call (positions p = p0 + i,
// i < L), from few trigonometric evaluations: with i = 64 a + k, the phase is the sum of
// (p0 + 64 a) theta_c, k theta_c and delta[h, c], and cos/sin of a sum come from those of
// its terms by the angle-addition formulas, each adding about an ulp in double. Tables of
// [L / 64, 2, d] block starts, [64, 2, d] offsets and [Hx, 2, d] deltas (cos then sin, each
// contiguous over c so a row's channels vectorise) replace B L Hx d evaluations.
struct Phases {
  View3<double> block;   // [ceil(L / 64), 2, d]: cos, sin of (p0 + 64 a) theta_c
  View3<double> offset;  // [64, 2, d]: cos, sin of k theta_c
  View3<double> delta;   // [Hx, 2, d]: cos, sin of clamp(delta[h, c]); empty without delta

  // (cos, sin) of the phase of row i, head h, channels c0 + k for k < n, as T.
  template <class T>
  KOKKOS_INLINE_FUNCTION void at(int i, int h, int c0, int n, T* KOKKOS_RESTRICT cs,
                                 T* KOKKOS_RESTRICT sn) const {
    const int a = i / 64, o = i % 64;
    const double* cb = &block(a, 0, c0);
    const double* sb = &block(a, 1, c0);
    const double* co = &offset(o, 0, c0);
    const double* so = &offset(o, 1, c0);
    if (delta.extent(0) > 0) {
      const double* cd = &delta(h, 0, c0);
      const double* sd = &delta(h, 1, c0);
      for (int k = 0; k < n; ++k) {
        const double c1 = cb[k] * co[k] - sb[k] * so[k], s1 = sb[k] * co[k] + cb[k] * so[k];
        cs[k] = T(c1 * cd[k] - s1 * sd[k]);
        sn[k] = T(s1 * cd[k] + c1 * sd[k]);
      }
    } else {
      for (int k = 0; k < n; ++k) {
        cs[k] = T(cb[k] * co[k] - sb[k] * so[k]);
        sn[k] = T(sb[k] * co[k] + cb[k] * so[k]);
      }
    }
  }
};

template <class T>
Phases phases(const View1<const double>& theta, int64_t pos0, int L, const PView2<T>& delta) {
  const int d = theta.extent(0), nblk = (L + 63) / 64;
  Phases p{View3<double>("lcr::pope_block", nblk, 2, d),
           View3<double>("lcr::pope_offset", 64, 2, d), View3<double>()};
  const auto block = p.block, offset = p.offset;
  Kokkos::parallel_for(
      "lcr::pope_block", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {nblk, d}),
      KOKKOS_LAMBDA(int a, int c) {
        const double ph = double(pos0 + 64 * int64_t(a)) * theta(c);
        block(a, 0, c) = kmath::cos(ph);
        block(a, 1, c) = kmath::sin(ph);
      });
  Kokkos::parallel_for(
      "lcr::pope_offset", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {64, d}),
      KOKKOS_LAMBDA(int k, int c) {
        offset(k, 0, c) = kmath::cos(double(k) * theta(c));
        offset(k, 1, c) = kmath::sin(double(k) * theta(c));
      });
  if (delta.extent(0) > 0) {
    const int Hx = delta.extent(0);
    p.delta = View3<double>("lcr::pope_delta_cs", Hx, 2, d);
    const auto dcs = p.delta;
    Kokkos::parallel_for(
        "lcr::pope_delta", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {Hx, d}),
        KOKKOS_LAMBDA(int h, int c) {
          const double dl = clamp_delta(double(delta(h, c)));
          dcs(h, 0, c) = kmath::cos(dl);
          dcs(h, 1, c) = kmath::sin(dl);
        });
  }
  return p;
}

// A row's channels go in chunks of tile::kRowChunk through small local arrays, so that on a
// SIMD CPU every step (the exp, the softplus series, the phase products) is a loop over
// contiguous data that the compiler vectorises; on a GPU a thread walks its row the same way.
constexpr int kChunk = tile::kRowChunk;

// mu = softplus(x) and, with sg, sigmoid(x) = softplus'(x), for k < n, from one exp each.
template <class T>
KOKKOS_INLINE_FUNCTION void softplus_chunk(const T* KOKKOS_RESTRICT x, int n, T* KOKKOS_RESTRICT mu,
                                           T* KOKKOS_RESTRICT sg) {
  T e[kChunk];
  tile::exp_neg_abs(x, n, e);
  for (int k = 0; k < n; ++k) mu[k] = (x[k] > T(0) ? x[k] : T(0)) + kmath::log1p_unit(e[k]);
  if (sg)
    for (int k = 0; k < n; ++k) sg[k] = tile::sigmoid_from(x[k], e[k]);
}

// x [B, L, Hx, d] -> y [B, L, Hx, 2d]: y = mu [cos(p theta + delta), sin(...)], where delta
// is clamp(delta[hx, :]) when `delta` is non-empty (keys) and 0 otherwise (queries).
template <class T>
void polar_forward(const View4<const T>& x, const View4<T>& y, const View1<const double>& theta,
                   const PView2<T>& delta, int64_t pos0) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2), d = x.extent(3);
  const Phases ph = phases(theta, pos0, L, delta);
  Kokkos::parallel_for(
      "lcr::pope_forward", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, L, H}),
      KOKKOS_LAMBDA(int b, int i, int h) {
        const T* xr = &x(b, i, h, 0);
        T* KOKKOS_RESTRICT re = &y(b, i, h, 0);
        T* KOKKOS_RESTRICT im = &y(b, i, h, d);
        for (int c0 = 0; c0 < d; c0 += kChunk) {
          const int n = d - c0 < kChunk ? d - c0 : kChunk;
          T mu[kChunk], cs[kChunk], sn[kChunk];
          softplus_chunk(xr + c0, n, mu, static_cast<T*>(nullptr));
          ph.at(i, h, c0, n, cs, sn);
          for (int k = 0; k < n; ++k) {
            re[c0 + k] = mu[k] * cs[k];
            im[c0 + k] = mu[k] * sn[k];
          }
        }
      });
}

// The backward of polar_forward: dx overwritten; with a delta, dpsi [Hx, d, B * L] (the
// gradient of each element's phase) is written for the reduction.
template <class T>
void polar_backward(const View4<const T>& x, const View4<const T>& dy, const View4<T>& dx,
                    const View1<const double>& theta, const PView2<T>& delta, int64_t pos0,
                    const View3<T>& dpsi) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2), d = x.extent(3);
  const bool has_delta = delta.extent(0) > 0;
  const Phases ph = phases(theta, pos0, L, delta);
  Kokkos::parallel_for(
      "lcr::pope_backward", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, L, H}),
      KOKKOS_LAMBDA(int b, int i, int h) {
        const T* xr = &x(b, i, h, 0);
        const T* dre = &dy(b, i, h, 0);
        const T* dim = &dy(b, i, h, d);
        T* KOKKOS_RESTRICT dxr = &dx(b, i, h, 0);
        for (int c0 = 0; c0 < d; c0 += kChunk) {
          const int n = d - c0 < kChunk ? d - c0 : kChunk;
          T mu[kChunk], sg[kChunk], cs[kChunk], sn[kChunk];
          softplus_chunk(xr + c0, n, mu, sg);
          ph.at(i, h, c0, n, cs, sn);
          for (int k = 0; k < n; ++k)
            dxr[c0 + k] = (dre[c0 + k] * cs[k] + dim[c0 + k] * sn[k]) * sg[k];
          if (has_delta)
            for (int k = 0; k < n; ++k)
              dpsi(h, c0 + k, b * L + i) = mu[k] * (dim[c0 + k] * cs[k] - dre[c0 + k] * sn[k]);
        }
      });
}

// ddelta[hk, c] += sum_n dpsi[hk, c, n] where delta[hk, c] is inside the clamp range.
template <class T>
void reduce_delta_grad(const View3<const T>& dpsi, const PView2<T>& delta,
                       const PView2<T>& ddelta) {
  const int Hk = dpsi.extent(0), d = dpsi.extent(1), n = dpsi.extent(2);
  using Member = Kokkos::TeamPolicy<ExecSpace>::member_type;
  Kokkos::parallel_for(
      "lcr::pope_delta_grad", Kokkos::TeamPolicy<ExecSpace>(Hk * d, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const int hk = team.league_rank() / d, c = team.league_rank() % d;
        T sum = T(0);
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, n), [&](int t, T& acc) { acc += dpsi(hk, c, t); }, sum);
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          if (delta_in_range(double(delta(hk, c)))) ddelta(hk, c) += sum;
        });
      });
}

}  // namespace detail

void validate(const AttentionSpec& s) {
  require(std::isfinite(s.pope.base) && s.pope.base > 1,
          "pope.base must be a finite number > 1, got ", s.pope.base,
          " (theta_c = base^(-(c-1)/d); 10000 is the usual value)");
}

void add_params(const AttentionSpec& spec, ParamLayout& layout) {
  layout.add("pope.delta", {spec.kv_heads, spec.head_dim});
}

int lanes_width(const AttentionSpec& spec) { return 2 * spec.head_dim; }

double sdpa_scale(const AttentionSpec& spec) { return 1.0 / std::sqrt(double(spec.head_dim)); }

std::vector<double> frequencies(const AttentionSpec& spec) {
  const int d = spec.head_dim;
  std::vector<double> theta(d);
  for (int c = 0; c < d; ++c) theta[c] = std::pow(spec.pope.base, -double(c) / d);
  return theta;
}

template <class T>
void lanes_forward(const LaneArgs<T>& a, const View4<T>& q2, const View4<T>& k2) {
  const auto theta = detail::theta_table(*a.spec);
  detail::polar_forward<T>(a.q, q2, theta, PView2<T>(), a.q_pos0);
  detail::polar_forward<T>(a.k, k2, theta, a.params->v2("pope.delta"), a.k_pos0);
}

template <class T>
void lanes_backward(const LaneArgs<T>& a, const View4<const T>& dq2, const View4<const T>& dk2,
                    const View4<T>& dq, const View4<T>& dk, ParamSet<T>& dparams) {
  const auto theta = detail::theta_table(*a.spec);
  const auto delta = a.params->v2("pope.delta");
  const int B = a.k.extent(0), Lk = a.k.extent(1), Hk = a.k.extent(2), d = a.k.extent(3);
  detail::polar_backward<T>(a.q, dq2, dq, theta, PView2<T>(), a.q_pos0, View3<T>());
  View3<T> dpsi(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::pope_dpsi"), Hk, d,
                int64_t(B) * Lk);  // polar_backward writes every element
  detail::polar_backward<T>(a.k, dk2, dk, theta, delta, a.k_pos0, dpsi);
  detail::reduce_delta_grad<T>(dpsi, delta, dparams.v2("pope.delta"));
}

LCR_INSTANTIATE_SCHEME_LANES()

}  // namespace lcr::pope
