// GOAT options, parameters, geometry and the Kokkos lanes (forward and backward).
// The math and the lane layout are in goat.hpp.
#include "kernels/schemes/goat/goat.hpp"

#include <cmath>

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/attention/params.hpp"
#include "kernels/base/error.hpp"

namespace lcr::goat {

// ---------------------------------------------------------------- options, geometry

void validate(const AttentionSpec& s) {
  const auto& g = s.goat;
  require(g.modes >= 0,
          "goat.modes must be >= 0 (number of Fourier modes R; 0: no relative prior), got ",
          g.modes);
  const int dp = 2 * g.modes + 2;
  require(s.head_dim > dp, "GOAT needs head_dim > 2*modes + 2 (head_dim ", s.head_dim, ", modes ",
          g.modes, " leave d_c = ", s.head_dim - dp,
          " content dims); raise head_dim or lower goat.modes");
  require(g.mlp_hidden >= 1, "goat.mlp_hidden must be >= 1 (width of the key-bias MLP), got ",
          g.mlp_hidden);
  require(g.feature_freqs >= 1,
          "goat.feature_freqs must be >= 1 (sin/cos pairs in the key-bias features), got ",
          g.feature_freqs);
  require(g.train_len >= 1, "goat.train_len must be >= 1 (L_train in the key-bias features), got ",
          g.train_len);
  require(std::isfinite(g.base) && g.base > 1,
          "goat.base must be a finite number > 1 (frequencies B^(-(r-1)/(R-1))), got ", g.base);
  if (s.scheme != Scheme::GOAT2D) return;
  require(g.grid_width >= 1,
          "goat2d needs goat.grid_width >= 1 (position p sits at (p / W, p % W)), got ",
          g.grid_width);
  require(g.modes >= 2, "goat2d needs goat.modes >= 2 (at least one mode per axis), got ", g.modes);
  require(g.y_modes >= 0 && g.y_modes < g.modes, "goat.y_modes must be in [0, modes) = [0, ",
          g.modes, ") (0 means modes/2; the rest go to the x axis), got ", g.y_modes);
}

int content_dim(const AttentionSpec& s) { return s.head_dim - (2 * s.goat.modes + 2); }
int feature_count(const AttentionSpec& s) { return 2 * s.goat.feature_freqs + 2; }
int lanes_width(const AttentionSpec& s) { return s.head_dim; }
double sdpa_scale(const AttentionSpec& s) { return 1.0 / std::sqrt(double(s.head_dim)); }

int y_modes(const AttentionSpec& s) {
  if (s.scheme != Scheme::GOAT2D) return 0;
  return s.goat.y_modes > 0 ? s.goat.y_modes : s.goat.modes / 2;
}

Axis mode_axis(const AttentionSpec& s, int r) {
  if (s.scheme != Scheme::GOAT2D) return Axis::Linear;
  return r < y_modes(s) ? Axis::Y : Axis::X;
}

namespace {
// B^(-n / max(N - 1, 1)) for the 0-based rung n of an N-rung ladder.
double ladder(double base, int n, int N) { return std::pow(base, -double(n) / std::max(N - 1, 1)); }
}  // namespace

double mode_frequency(const AttentionSpec& s, int r) {
  const int Ry = y_modes(s);
  switch (mode_axis(s, r)) {
    case Axis::Y:
      return ladder(s.goat.base, r, Ry);
    case Axis::X:
      return ladder(s.goat.base, r - Ry, s.goat.modes - Ry);
    default:
      return ladder(s.goat.base, r, s.goat.modes);
  }
}

double feature_frequency(const AttentionSpec& s, int m) {
  return ladder(s.goat.base, m, s.goat.feature_freqs);
}

int64_t mode_coordinate(const AttentionSpec& s, int r, int64_t p) {
  switch (mode_axis(s, r)) {
    case Axis::Y:
      return p / s.goat.grid_width;
    case Axis::X:
      return p % s.goat.grid_width;
    default:
      return p;
  }
}

void add_params(const AttentionSpec& s, ParamLayout& l) {
  const int64_t H = s.heads, Hkv = s.kv_heads, R = s.goat.modes, N = s.goat.mlp_hidden;
  const int64_t NF = feature_count(s);
  if (s.goat.recipe == GoatRecipe::Authors) {
    l.add("goat.kv_alpha", {Hkv, R});
    l.add("goat.kv_beta", {Hkv, R});
    l.add("goat.slope", {Hkv});
    l.add("goat.gain", {Hkv});
    l.add("goat.bump", {Hkv});
    l.add("goat.shared_w1", {N, NF});
    l.add("goat.shared_b1", {N});
    l.add("goat.shared_w2", {N});
  } else {
    l.add("goat.alpha", {H, R});
    l.add("goat.beta", {H, R});
    l.add("goat.lambda", {Hkv});
    l.add("goat.bump", {Hkv});
    l.add("goat.mlp_w1", {Hkv, N, NF});
    l.add("goat.mlp_b1", {Hkv, N});
    l.add("goat.mlp_w2", {Hkv, N});
  }
  if (s.goat.query_gate) {
    l.add("goat.gate_scale", {H});
    l.add("goat.gate_bias", {H});
  }
}

// ---------------------------------------------------------------- device tables

namespace {

// cos / sin of every mode's angle at positions pos0 .. pos0 + L - 1: [L, R, 2], double.
// The angle w_r c_r(p) is formed in double so positions up to ~1e7 keep ~1e-9 rad.
View3<double> mode_table(const AttentionSpec& s, int64_t pos0, int L) {
  const int R = s.goat.modes;
  std::vector<double> hf(R);
  std::vector<int> ha(R);
  for (int r = 0; r < R; ++r) {
    hf[r] = mode_frequency(s, r);
    ha[r] = int(mode_axis(s, r));
  }
  const View1<double> freq = device_copy("lcr::goat_freq", hf);
  const View1<int> axis = device_copy("lcr::goat_axis", ha);
  const int64_t W = std::max(s.goat.grid_width, 1);
  View3<double> tab("lcr::goat_mode_table", L, R, 2);
  Kokkos::parallel_for(
      "lcr::goat_mode_table", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {L, R}),
      KOKKOS_LAMBDA(int t, int r) {
        const int64_t p = pos0 + t;
        const int64_t c = axis(r) == 1 ? p / W : axis(r) == 2 ? p % W : p;
        const double ang = freq(r) * double(c);
        tab(t, r, 0) = kmath::cos(ang);
        tab(t, r, 1) = kmath::sin(ang);
      });
  return tab;
}

// phi(p) at positions pos0 .. pos0 + L - 1: [L, 2F + 2], double.
View2<double> feature_table(const AttentionSpec& s, int64_t pos0, int L) {
  const int F = s.goat.feature_freqs, NF = feature_count(s);
  std::vector<double> hf(F);
  for (int m = 0; m < F; ++m) hf[m] = feature_frequency(s, m);
  const View1<double> freq = device_copy("lcr::goat_feature_freq", hf);
  const double inv_len = 1.0 / double(s.goat.train_len);
  const double inv_log = 1.0 / std::log1p(double(s.goat.train_len));
  View2<double> phi("lcr::goat_features", L, NF);
  Kokkos::parallel_for(
      "lcr::goat_features", Kokkos::RangePolicy<ExecSpace>(0, L), KOKKOS_LAMBDA(int t) {
        const double p = double(pos0 + t);
        for (int m = 0; m < F; ++m) {
          phi(t, 2 * m) = kmath::sin(p * freq(m));
          phi(t, 2 * m + 1) = kmath::cos(p * freq(m));
        }
        phi(t, 2 * F) = p * inv_len;
        phi(t, 2 * F + 1) = kmath::log1p(p) * inv_log;
      });
  return phi;
}

// Parameter slices as device views (unmanaged aliases of the one buffer).
template <class T>
struct GoatParams {
  PView2<T> alpha, beta;   // [H, R]
  PView1<T> lambda, bump;  // [Hkv]
  PView3<T> w1;            // [Hkv, hidden, NF]
  PView2<T> b1, w2;        // [Hkv, hidden]
  explicit GoatParams(const ParamSet<T>& p)
      : alpha(p.v2("goat.alpha")),
        beta(p.v2("goat.beta")),
        lambda(p.v1("goat.lambda")),
        bump(p.v1("goat.bump")),
        w1(p.v3("goat.mlp_w1")),
        b1(p.v2("goat.mlp_b1")),
        w2(p.v2("goat.mlp_w2")),
        gate_scale(p.has("goat.gate_scale") ? p.v1("goat.gate_scale") : PView1<T>()),
        gate_bias(p.has("goat.gate_bias") ? p.v1("goat.gate_bias") : PView1<T>()) {}
  PView1<T> gate_scale, gate_bias;  // [H], with goat.query_gate
};

// The query gate of every query row [B, Lq, H] (goat.hpp) and the |q_c| it came from, in
// double; both empty without goat.query_gate.
struct QueryGate {
  View3<double> norm, gate;
};

template <class T>
QueryGate query_gate(const LaneArgs<T>& a, const GoatParams<T>& P, int dc) {
  if (!a.spec->goat.query_gate) return {};
  const int B = a.q.extent(0), Lq = a.q.extent(1), H = a.spec->heads;
  const auto q = a.q;
  QueryGate out{View3<double>("lcr::goat_query_norms", B, Lq, H),
                View3<double>("lcr::goat_query_gate", B, Lq, H)};
  const auto n = out.norm, g = out.gate;
  Kokkos::parallel_for(
      "lcr::goat_query_gate",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, Lq, H}),
      KOKKOS_LAMBDA(int b, int i, int h) {
        double ss = 0;
        for (int c = 0; c < dc; ++c) ss += double(q(b, i, h, c)) * double(q(b, i, h, c));
        n(b, i, h) = kmath::sqrt(ss);
        g(b, i, h) = kmath::sigmoid(double(P.gate_bias(h)) -
                                    kmath::softplus(double(P.gate_scale(h))) * n(b, i, h));
      });
  return out;
}

// The gate's backward. dg = sum over the prior lanes of dq' times the ungated lane
// (sqrt(d_h) (al cs + be sn), sqrt(d_h) (al sn - be cs), sqrt(d_h)); with
// pre = gate_bias - softplus(gate_scale) |q_c|, d pre = dg g (1 - g). dq_c gains
// -d pre softplus(gate_scale) q_c / |q_c|; the gate's parameters sum d pre (bias) and
// -d pre |q_c| sigmoid(gate_scale) (scale) over the rows, one team per element.
template <class T>
void gate_backward(const LaneArgs<T>& a, const GoatParams<T>& P, const View4<const T>& dq2,
                   const View3<double>& qtab, const QueryGate& qg, const View4<T>& dq,
                   ParamSet<T>& dparams) {
  using Team = Kokkos::TeamPolicy<ExecSpace>;
  using Member = Team::member_type;
  const AttentionSpec& s = *a.spec;
  const int B = a.q.extent(0), Lq = a.q.extent(1), H = s.heads, R = s.goat.modes;
  const int dc = content_dim(s);
  const double ls = std::sqrt(double(s.head_dim));
  const auto q = a.q;
  const auto norms = qg.norm, gate = qg.gate;
  View3<double> dpre("lcr::goat_dgate", B, Lq, H);
  Kokkos::parallel_for(
      "lcr::goat_gate_backward",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, Lq, H}),
      KOKKOS_LAMBDA(int b, int i, int h) {
        double dg = double(dq2(b, i, h, dc + 2 * R));
        for (int r = 0; r < R; ++r) {
          const double cs = qtab(i, r, 0), sn = qtab(i, r, 1);
          const double al = double(P.alpha(h, r)), be = double(P.beta(h, r));
          dg += double(dq2(b, i, h, dc + 2 * r)) * (al * cs + be * sn) +
                double(dq2(b, i, h, dc + 2 * r + 1)) * (al * sn - be * cs);
        }
        const double g = gate(b, i, h), d = ls * dg * g * (1.0 - g);
        dpre(b, i, h) = d;
        const double n = norms(b, i, h);
        if (n > 0) {
          const double f = -d * kmath::softplus(double(P.gate_scale(h))) / n;
          for (int c = 0; c < dc; ++c) dq(b, i, h, c) += T(f * double(q(b, i, h, c)));
        }
      });
  const GoatParams<T> dP(dparams);
  Kokkos::parallel_for(
      "lcr::goat_dgate_params", Team(2 * H, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int h = m.league_rank() / 2, which = m.league_rank() % 2;
        const double sig = kmath::sigmoid(double(P.gate_scale(h)));
        double sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, B * Lq),
            [&](int t, double& acc) {
              const int b = t / Lq, i = t % Lq;
              acc += which == 0 ? dpre(b, i, h) : -dpre(b, i, h) * norms(b, i, h) * sig;
            },
            sum);
        Kokkos::single(Kokkos::PerTeam(m), [&] {
          if (which == 0)
            dP.gate_bias(h) += T(sum);
          else
            dP.gate_scale(h) += T(sum);
        });
      });
}

// ---------------------------------------------------------------- forward

// The lanes from lcr's lane parameters (a.params in the lane layout).
template <class T>
void forward_on_lanes(const LaneArgs<T>& a, const View4<T>& q2, const View4<T>& k2) {
  const AttentionSpec& s = *a.spec;
  const int B = a.q.extent(0), Lq = a.q.extent(1), Lk = a.k.extent(1);
  const int H = s.heads, Hkv = s.kv_heads, R = s.goat.modes, N = s.goat.mlp_hidden;
  const int dc = content_dim(s), NF = feature_count(s);
  const double dh = s.head_dim;
  const T content_scale = T(std::sqrt(dh / dc)), lane_scale = T(std::sqrt(dh));
  const GoatParams<T> P(*a.params);
  const auto qtab = mode_table(s, a.q_pos0, Lq);
  const auto ktab = mode_table(s, a.k_pos0, Lk);
  const auto phi = feature_table(s, a.k_pos0, Lk);
  const auto q = a.q, k = a.k;
  const int64_t k_pos0 = a.k_pos0;
  const bool gated = s.goat.query_gate;
  const auto gate = query_gate(a, P, dc).gate;

  // q' = [sqrt(d_h/d_c) q_c, g sqrt(d_h) q_rel, g sqrt(d_h), 0]   (g = 1 without the gate)
  Kokkos::parallel_for(
      "lcr::goat_q_lanes", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, Lq, H}),
      KOKKOS_LAMBDA(int b, int i, int h) {
        for (int c = 0; c < dc; ++c) q2(b, i, h, c) = content_scale * q(b, i, h, c);
        const double ls = double(lane_scale) * (gated ? gate(b, i, h) : 1.0);
        for (int r = 0; r < R; ++r) {
          const double cs = qtab(i, r, 0), sn = qtab(i, r, 1);
          const double al = double(P.alpha(h, r)), be = double(P.beta(h, r));
          q2(b, i, h, dc + 2 * r) = T(ls * (al * cs + be * sn));
          q2(b, i, h, dc + 2 * r + 1) = T(ls * (al * sn - be * cs));
        }
        q2(b, i, h, dc + 2 * R) = gated ? T(ls) : lane_scale;
        q2(b, i, h, dc + 2 * R + 1) = T(0);
      });

  // u(j) per KV head, in double: lambda j + w2 . silu(W1 phi(j) + b1) + bump 1{j = 0}.
  View2<double> u("lcr::goat_key_bias", Lk, Hkv);
  Kokkos::parallel_for(
      "lcr::goat_key_bias", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {Lk, Hkv}),
      KOKKOS_LAMBDA(int j, int hk) {
        const int64_t p = k_pos0 + j;
        double g = 0;
        for (int n = 0; n < N; ++n) {
          double pre = double(P.b1(hk, n));
          for (int m = 0; m < NF; ++m) pre += double(P.w1(hk, n, m)) * phi(j, m);
          g += double(P.w2(hk, n)) * kmath::silu(pre);
        }
        u(j, hk) = double(P.lambda(hk)) * double(p) + g + (p == 0 ? double(P.bump(hk)) : 0.0);
      });

  // k' = [k_c, k_rel, u(j), 0]
  Kokkos::parallel_for(
      "lcr::goat_k_lanes",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, Lk, Hkv}),
      KOKKOS_LAMBDA(int b, int j, int hk) {
        for (int c = 0; c < dc; ++c) k2(b, j, hk, c) = k(b, j, hk, c);
        for (int r = 0; r < R; ++r) {
          k2(b, j, hk, dc + 2 * r) = T(ktab(j, r, 0));
          k2(b, j, hk, dc + 2 * r + 1) = T(ktab(j, r, 1));
        }
        k2(b, j, hk, dc + 2 * R) = T(u(j, hk));
        k2(b, j, hk, dc + 2 * R + 1) = T(0);
      });
}

// ---------------------------------------------------------------- backward

// The lanes' backward into lcr's lane parameters (a.params and dparams in the lane layout).
template <class T>
void backward_on_lanes(const LaneArgs<T>& a, const View4<const T>& dq2, const View4<const T>& dk2,
                       const View4<T>& dq, const View4<T>& dk, ParamSet<T>& dparams) {
  using Team = Kokkos::TeamPolicy<ExecSpace>;
  using Member = Team::member_type;
  const AttentionSpec& s = *a.spec;
  const int B = a.q.extent(0), Lq = a.q.extent(1), Lk = a.k.extent(1);
  const int H = s.heads, Hkv = s.kv_heads, R = s.goat.modes, N = s.goat.mlp_hidden;
  const int dc = content_dim(s), NF = feature_count(s);
  const double dh = s.head_dim;
  const T content_scale = T(std::sqrt(dh / dc));
  const double lane_scale = std::sqrt(dh);
  const GoatParams<T> P(*a.params);
  const GoatParams<T> dP(dparams);
  const int64_t k_pos0 = a.k_pos0;

  // Content lanes: dq_c = sqrt(d_h/d_c) dq'_c, dk_c = dk'_c.
  Kokkos::parallel_for(
      "lcr::goat_dq_content",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, Lq, H}),
      KOKKOS_LAMBDA(int b, int i, int h) {
        for (int c = 0; c < dc; ++c) dq(b, i, h, c) = content_scale * dq2(b, i, h, c);
      });
  Kokkos::parallel_for(
      "lcr::goat_dk_content",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, Lk, Hkv}),
      KOKKOS_LAMBDA(int b, int j, int hk) {
        for (int c = 0; c < dc; ++c) dk(b, j, hk, c) = dk2(b, j, hk, c);
      });

  // d alpha_hr = sqrt(d_h) sum_{b,i} (dq'_2r cos + dq'_2r+1 sin),
  // d beta_hr  = sqrt(d_h) sum_{b,i} (dq'_2r sin - dq'_2r+1 cos): one team per element
  // e = (h, r, which), summing over the B * Lq rows in double.
  const auto qtab = mode_table(s, a.q_pos0, Lq);
  const bool gated = s.goat.query_gate;
  const QueryGate qg = query_gate(a, P, dc);
  const auto gate = qg.gate;
  Kokkos::parallel_for(
      "lcr::goat_dalpha_dbeta", Team(H * R * 2, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int e = m.league_rank(), which = e % 2, r = (e / 2) % R, h = e / (2 * R);
        double sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, B * Lq),
            [&](int t, double& acc) {
              const int b = t / Lq, i = t % Lq;
              const double gt = gated ? gate(b, i, h) : 1.0;
              const double g0 = gt * double(dq2(b, i, h, dc + 2 * r));
              const double g1 = gt * double(dq2(b, i, h, dc + 2 * r + 1));
              const double cs = qtab(i, r, 0), sn = qtab(i, r, 1);
              acc += which == 0 ? g0 * cs + g1 * sn : g0 * sn - g1 * cs;
            },
            sum);
        Kokkos::single(Kokkos::PerTeam(m), [&] {
          if (which == 0)
            dP.alpha(h, r) += T(lane_scale * sum);
          else
            dP.beta(h, r) += T(lane_scale * sum);
        });
      });

  if (gated) gate_backward(a, P, dq2, qtab, qg, dq, dparams);

  // du(j, hk) = sum_b dk'(b, j, hk, u lane): u does not depend on the batch row.
  View2<double> du("lcr::goat_dkey_bias", Lk, Hkv);
  Kokkos::parallel_for(
      "lcr::goat_dkey_bias", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {Lk, Hkv}),
      KOKKOS_LAMBDA(int j, int hk) {
        double acc = 0;
        for (int b = 0; b < B; ++b) acc += dk2(b, j, hk, dc + 2 * R);
        du(j, hk) = acc;
      });

  // Key-bias parameters: du(j) * d u(j)/d theta summed over keys. lambda and bump: one team
  // each per KV head. The MLP's (per hidden unit n: w2_n, b1_n, W1_n,0 .. W1_n,NF-1): the
  // keys in chunks; one work item per (KV head, unit, chunk) recomputes the unit's
  // pre-activation once per key (NF flops, rather than storing [Lk, Hkv, hidden], which
  // would dominate memory at long contexts) and adds all 2 + NF of its terms to partial
  // sums of its own; then one item per parameter adds the chunks in order (no atomics).
  const auto phi = feature_table(s, a.k_pos0, Lk);
  Kokkos::parallel_for(
      "lcr::goat_dkey_lambda_bump", Team(Hkv * 2, Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int hk = m.league_rank() / 2, kind = m.league_rank() % 2;  // 0 lambda, 1 bump
        double sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, Lk),
            [&](int j, double& acc) {
              const int64_t p = k_pos0 + j;
              acc += kind == 0 ? du(j, hk) * double(p) : (p == 0 ? du(j, hk) : 0.0);
            },
            sum);
        Kokkos::single(Kokkos::PerTeam(m), [&] {
          if (kind == 0)
            dP.lambda(hk) += T(sum);
          else
            dP.bump(hk) += T(sum);
        });
      });
  constexpr int kKeyChunk = 128;
  const int nch = (Lk + kKeyChunk - 1) / kKeyChunk, nt = 2 + NF;
  View4<double> part("lcr::goat_dkey_mlp_part", Hkv, N, nch, nt);  // zeroed: [w2, b1, W1_c]
  Kokkos::parallel_for(
      "lcr::goat_dkey_mlp_chunks",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {Hkv, N, nch}),
      KOKKOS_LAMBDA(int hk, int n, int ch) {
        const int j1 = (ch + 1) * kKeyChunk < Lk ? (ch + 1) * kKeyChunk : Lk;
        const double w2 = double(P.w2(hk, n));
        for (int j = ch * kKeyChunk; j < j1; ++j) {
          double pre = double(P.b1(hk, n));
          for (int c = 0; c < NF; ++c) pre += double(P.w1(hk, n, c)) * phi(j, c);
          const double sg = kmath::sigmoid(pre);
          part(hk, n, ch, 0) += du(j, hk) * pre * sg;  // silu(pre)
          // silu'(x) = sigmoid(x) (1 + x (1 - sigmoid(x)))
          const double back = du(j, hk) * w2 * sg * (1.0 + pre * (1.0 - sg));
          part(hk, n, ch, 1) += back;
          for (int c = 0; c < NF; ++c) part(hk, n, ch, 2 + c) += back * phi(j, c);
        }
      });
  Kokkos::parallel_for(
      "lcr::goat_dkey_mlp",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {Hkv, N, nt}),
      KOKKOS_LAMBDA(int hk, int n, int t) {
        double sum = 0;
        for (int ch = 0; ch < nch; ++ch) sum += part(hk, n, ch, t);
        if (t == 0)
          dP.w2(hk, n) += T(sum);
        else if (t == 1)
          dP.b1(hk, n) += T(sum);
        else
          dP.w1(hk, n, t - 2) += T(sum);
      });
}

}  // namespace

// ---------------------------------------------------------------- the recipes

namespace {

// The authors' parameters mapped onto the lane layout (goat_recipe.hpp), on the device.
template <class T>
ParamSet<T> lane_params(const AttentionSpec& s, const RecipeMap& m, const ParamSet<T>& p) {
  ParamSet<T> out(attention_param_layout(lane_spec(s)), "lcr::goat_lane_params");
  const auto o = out.data;
  const T* src = p.data.data();
  Kokkos::parallel_for(
      "lcr::goat_recipe_expand", Kokkos::RangePolicy<ExecSpace>(0, m.lane_total()),
      KOKKOS_LAMBDA(int64_t e) { o(e) = recipe_expand(m, src, e); });
  return out;
}

}  // namespace

template <class T>
void lanes_forward(const LaneArgs<T>& a, const View4<T>& q2, const View4<T>& k2) {
  if (a.spec->goat.recipe != GoatRecipe::Authors) return forward_on_lanes(a, q2, k2);
  const ParamSet<T> lane = lane_params(*a.spec, recipe_map(*a.spec), *a.params);
  LaneArgs<T> b = a;
  b.params = &lane;
  forward_on_lanes(b, q2, k2);
}

template <class T>
void lanes_backward(const LaneArgs<T>& a, const View4<const T>& dq2, const View4<const T>& dk2,
                    const View4<T>& dq, const View4<T>& dk, ParamSet<T>& dparams) {
  if (a.spec->goat.recipe != GoatRecipe::Authors)
    return backward_on_lanes(a, dq2, dk2, dq, dk, dparams);
  const RecipeMap m = recipe_map(*a.spec);
  const ParamSet<T> lane = lane_params(*a.spec, m, *a.params);
  ParamSet<T> dlane(lane.layout, "lcr::goat_lane_grads");  // zeroed
  LaneArgs<T> b = a;
  b.params = &lane;
  backward_on_lanes(b, dq2, dk2, dq, dk, dlane);
  const T* src = a.params->data.data();
  const T* dl = dlane.data.data();
  const auto d = dparams.data;
  Kokkos::parallel_for(
      "lcr::goat_recipe_contract", Kokkos::RangePolicy<ExecSpace>(0, m.authors_total()),
      KOKKOS_LAMBDA(int64_t e) { d(e) += T(recipe_contract(m, src, dl, e)); });
}

LCR_INSTANTIATE_SCHEME_LANES()

}  // namespace lcr::goat
