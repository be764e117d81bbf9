// RoPE lanes (DESIGN.md section 3; seed 001 sections 2-4).
//
// Each query row q [dq] at global position p becomes q' = a R(p) q (likewise k), and the
// SDPA kernel computes <q', k'> / sqrt(head_dim). R(p) rotates the pair (x_a, x_b) by the
// angle p theta'_m:
//   x'_a = x_a cos - x_b sin,   x'_b = x_a sin + x_b cos,
// with the pair (a, b) = (2m, 2m+1) for Interleaved (the paper's Eq. 34) and (m, m + r/2)
// for HalfSplit (the HuggingFace Llama layout). The two differ by a permutation of the
// dims, so weights trained with one silently degrade under the other: both are offered,
// neither is a default substitute for the other. Dims r..dq-1 pass through (partial RoPE).
//
// YaRN (s = yarn_factor > 1), NTK-by-parts: theta'_m = (1 - g) theta_m / s + g theta_m,
// g = 0 for long wavelengths (interpolate only), 1 for short ones (keep), a ramp between.
// Paper convention: g = ramp(N / lambda_m), lambda_m = 2 pi / theta_m, N = yarn_original_len,
// 0 below beta_slow, 1 above beta_fast, linear in N / lambda_m between. Released convention
// (the authors' code): g = 1 - clamp((m - lo) / (hi - lo), 0, 1) over the pair index m, with
// lo = max(floor(m(beta_fast)), 0), hi = min(ceil(m(beta_slow)), r - 1) (r - 1, not r/2 - 1,
// as that code bounds it; hi = lo + 0.001 when they meet), m(b) = r ln(N / (2 pi b)) /
// (2 ln base) the pair that makes b turns over N. The temperature softmax(q.k / (t sqrt(d)))
// with sqrt(1/t) = 0.1 ln s + 1 is folded in by multiplying q' and k' by a = sqrt(1/t), so
// the logit gets a^2 = 1/t: on the rotated dims only in the released convention (the
// authors scale the cos/sin tables), on partial RoPE's pass-through dims too in the paper's.
//
// Angles are computed in double precision whatever T is: at p = 1e7 a float32 angle would
// be off by ~0.5 rad. Backward: R(p) is orthogonal, so dq = a R(p)^T dq' = a R(-p) dq'.
#include "kernels/schemes/rope/rope.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/base/error.hpp"

namespace lcr::rope {
// Kernel helpers sit in a named namespace rather than an anonymous one: nvcc's rules for
// extended (device) lambdas are simplest to meet in functions with external linkage.
namespace detail {

constexpr double kTwoPi = 6.283185307179586;

// y[b, i, h, :r] = scale * R(sign * (pos0 + i)) x[b, i, h, :r] and
// y[b, i, h, r:] = pass_scale * x[b, i, h, r:] for x, y [B, L, Hx, D].
template <class T>
void rotate_rows(const View4<const T>& x, const View4<T>& y, const View1<const double>& theta,
                 int64_t pos0, double sign, T scale, T pass_scale, bool interleaved, int r) {
  const int B = x.extent(0), L = x.extent(1), H = x.extent(2), D = x.extent(3);
  const int half = r / 2;
  Kokkos::parallel_for(
      "lcr::rope_rotate", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, L, H}),
      KOKKOS_LAMBDA(int b, int i, int h) {
        const double pos = sign * double(pos0 + i);
        for (int m = 0; m < half; ++m) {
          const int ia = interleaved ? 2 * m : m;
          const int ib = interleaved ? 2 * m + 1 : m + half;
          const double ang = pos * theta(m);
          const T cs = T(kmath::cos(ang)), sn = T(kmath::sin(ang));
          const T xa = x(b, i, h, ia), xb = x(b, i, h, ib);
          y(b, i, h, ia) = scale * (xa * cs - xb * sn);
          y(b, i, h, ib) = scale * (xa * sn + xb * cs);
        }
        for (int c = r; c < D; ++c) y(b, i, h, c) = pass_scale * x(b, i, h, c);
      });
}

View1<const double> theta_table(const AttentionSpec& spec) {
  return device_copy("lcr::rope_theta", frequencies(spec));
}

// Applies R with angle sign `sign` (+1 forward, -1 backward) to both q-like and k-like
// tensors; the k side uses the key positions.
template <class T>
void apply(const AttentionSpec& spec, int64_t q_pos0, int64_t k_pos0, const View4<const T>& qx,
           const View4<const T>& kx, const View4<T>& qy, const View4<T>& ky, double sign) {
  const auto theta = theta_table(spec);
  const T scale = T(attention_factor(spec)), pass = T(pass_through_factor(spec));
  const bool inter = spec.rope.pairing == RopePairing::Interleaved;
  const int r = rotary_dim(spec);
  rotate_rows<T>(qx, qy, theta, q_pos0, sign, scale, pass, inter, r);
  rotate_rows<T>(kx, ky, theta, k_pos0, sign, scale, pass, inter, r);
}

}  // namespace detail

void validate(const AttentionSpec& s) {
  const auto& o = s.rope;
  require(o.rotary_dim >= 0 && o.rotary_dim <= s.head_dim, "rope.rotary_dim ", o.rotary_dim,
          " is outside [0, head_dim = ", s.head_dim,
          "]; set it to the number of leading dims to rotate, or 0 for the whole head");
  require(o.rotary_dim % 2 == 0, "RoPE rotates pairs: rope.rotary_dim ", o.rotary_dim,
          " is odd; use an even rotary_dim");
  require(o.rotary_dim > 0 || s.head_dim % 2 == 0, "RoPE rotates pairs: head_dim ", s.head_dim,
          " is odd; use an even head_dim or rotary_dim");
  require(std::isfinite(o.base) && o.base > 1, "rope.base must be a finite number > 1, got ",
          o.base, " (10000 is the usual value)");
  require(std::isfinite(o.yarn_factor) && o.yarn_factor >= 1, "rope.yarn_factor must be >= 1, got ",
          o.yarn_factor, " (it is the context extension s = L'/L; use 1 to disable YaRN)");
  require(o.yarn_original_len > 0, "rope.yarn_original_len must be > 0, got ", o.yarn_original_len,
          " (the context length the model was trained at)");
  require(o.yarn_beta_fast > o.yarn_beta_slow, "rope.yarn_beta_fast (", o.yarn_beta_fast,
          ") must be greater than rope.yarn_beta_slow (", o.yarn_beta_slow,
          "); Llama-family models use 32 and 1");
}

void add_params(const AttentionSpec&, ParamLayout&) {}  // RoPE learns nothing

int lanes_width(const AttentionSpec& spec) { return spec.head_dim; }

double sdpa_scale(const AttentionSpec& spec) { return 1.0 / std::sqrt(double(spec.head_dim)); }

int rotary_dim(const AttentionSpec& spec) {
  return spec.rope.rotary_dim > 0 ? spec.rope.rotary_dim : spec.head_dim;
}

std::vector<double> frequencies(const AttentionSpec& spec) {
  const auto& o = spec.rope;
  const int r = rotary_dim(spec);
  const double s = o.yarn_factor, alpha = o.yarn_beta_slow, beta = o.yarn_beta_fast;
  // Released convention: the pair index that makes b turns over the original context, and
  // the ramp's ends, rounded outwards and clamped as the authors' code does.
  auto pair_of_turns = [&](double b) {
    return r * std::log(double(o.yarn_original_len) / (detail::kTwoPi * b)) /
           (2 * std::log(o.base));
  };
  const double lo = std::max(std::floor(pair_of_turns(beta)), 0.0);
  double hi = std::min(std::ceil(pair_of_turns(alpha)), double(r - 1));
  if (hi == lo) hi += 0.001;
  std::vector<double> theta(r / 2);
  for (int m = 0; m < r / 2; ++m) {
    double t = std::pow(o.base, -2.0 * m / r);
    if (s > 1) {
      double g;  // 1 keeps theta_m, 0 interpolates it to theta_m / s
      if (o.yarn_convention == YarnConvention::Paper) {
        // ratio = how many full turns pair m makes over the original context.
        const double ratio = double(o.yarn_original_len) / (detail::kTwoPi / t);
        g = ratio < alpha ? 0.0 : ratio > beta ? 1.0 : (ratio - alpha) / (beta - alpha);
      } else {
        g = 1 - std::clamp((m - lo) / (hi - lo), 0.0, 1.0);
      }
      t = (1 - g) * t / s + g * t;
    }
    theta[m] = t;
  }
  return theta;
}

double attention_factor(const AttentionSpec& spec) {
  const double s = spec.rope.yarn_factor;
  return s > 1 ? 0.1 * std::log(s) + 1.0 : 1.0;
}

double pass_through_factor(const AttentionSpec& spec) {
  return spec.rope.yarn_convention == YarnConvention::Paper ? attention_factor(spec) : 1.0;
}

template <class T>
void lanes_forward(const LaneArgs<T>& a, const View4<T>& q2, const View4<T>& k2) {
  detail::apply<T>(*a.spec, a.q_pos0, a.k_pos0, a.q, a.k, q2, k2, +1.0);
}

template <class T>
void lanes_backward(const LaneArgs<T>& a, const View4<const T>& dq2, const View4<const T>& dk2,
                    const View4<T>& dq, const View4<T>& dk, ParamSet<T>&) {
  detail::apply<T>(*a.spec, a.q_pos0, a.k_pos0, dq2, dk2, dq, dk, -1.0);
}

LCR_INSTANTIATE_SCHEME_LANES()

}  // namespace lcr::rope
