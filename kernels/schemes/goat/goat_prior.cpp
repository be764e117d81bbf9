// GOAT on the host: the learned prior's statistics for the run log and the analysis
// tools (relative prior curve and 2-D map, key bias u(j), per-mode amplitudes) and the
// parameter initialisation. Definitions in goat.hpp.
#include <cmath>
#include <functional>
#include <random>

#include "kernels/base/error.hpp"
#include "kernels/schemes/goat/goat.hpp"

namespace lcr::goat {
namespace {

void check_goat(const AttentionSpec& s, const char* what) {
  require(is_goat(s.scheme), "goat::", what, " needs a GOAT or GOAT2D spec, got scheme '",
          scheme_name(s.scheme), "'");
}

void check_head(int h, int count, const char* what) {
  require(h >= 0 && h < count, "goat::", what, ": head ", h, " out of range [0, ", count, ")");
}

// alpha cos(w d) + beta sin(w d) of head h's mode r at displacement d.
double mode_term(const AttentionSpec& s, const ParamSet<double, HostSpace>& P, int h, int r,
                 double d) {
  const double ang = mode_frequency(s, r) * d;
  return P.v2("goat.alpha")(h, r) * std::cos(ang) + P.v2("goat.beta")(h, r) * std::sin(ang);
}

// Normal draws that do not depend on the standard library's distribution code.
struct Normal {
  std::mt19937_64 rng;
  explicit Normal(uint64_t seed) : rng(seed) {}
  double uniform() { return (double(rng() >> 11) + 0.5) * 0x1.0p-53; }  // in (0, 1)
  double operator()(double sd) {
    const double u1 = uniform(), u2 = uniform();
    return sd * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

}  // namespace

std::vector<double> relative_prior(const AttentionSpec& s, const ParamSet<double, HostSpace>& given,
                                   int h, const std::vector<int64_t>& lags) {
  check_goat(s, "relative_prior");
  check_head(h, s.heads, "relative_prior");
  const auto P = host_lane_params(s, given);
  std::vector<double> out;
  out.reserve(lags.size());
  for (const int64_t l : lags) {
    double acc = 0;
    for (int r = 0; r < s.goat.modes; ++r) {
      // 1-D: the lag itself; 2-D: query at linear position l vs the key at 0.
      const double d = s.scheme == Scheme::GOAT2D ? double(mode_coordinate(s, r, l)) : double(l);
      acc += mode_term(s, P, h, r, d);
    }
    out.push_back(acc);
  }
  return out;
}

std::vector<double> relative_prior_2d(const AttentionSpec& s,
                                      const ParamSet<double, HostSpace>& given, int h,
                                      const std::vector<int64_t>& dys,
                                      const std::vector<int64_t>& dxs) {
  require(s.scheme == Scheme::GOAT2D, "goat::relative_prior_2d needs a GOAT2D spec, got '",
          scheme_name(s.scheme), "' (use relative_prior for 1-D GOAT)");
  check_head(h, s.heads, "relative_prior_2d");
  const auto P = host_lane_params(s, given);
  std::vector<double> out;
  out.reserve(dys.size() * dxs.size());
  for (const int64_t dy : dys)
    for (const int64_t dx : dxs) {
      double acc = 0;
      for (int r = 0; r < s.goat.modes; ++r)
        acc += mode_term(s, P, h, r, double(mode_axis(s, r) == Axis::Y ? dy : dx));
      out.push_back(acc);
    }
  return out;
}

std::vector<double> key_bias(const AttentionSpec& s, const ParamSet<double, HostSpace>& given,
                             int hk, const std::vector<int64_t>& positions) {
  check_goat(s, "key_bias");
  check_head(hk, s.kv_heads, "key_bias");
  const auto P = host_lane_params(s, given);
  const int F = s.goat.feature_freqs, N = s.goat.mlp_hidden, NF = feature_count(s);
  const auto w1 = P.v3("goat.mlp_w1");
  const auto b1 = P.v2("goat.mlp_b1"), w2 = P.v2("goat.mlp_w2");
  const double lambda = P.v1("goat.lambda")(hk), bump = P.v1("goat.bump")(hk);
  std::vector<double> phi(NF), out;
  out.reserve(positions.size());
  for (const int64_t j : positions) {
    require(j >= 0, "goat::key_bias: positions must be >= 0, got ", j);
    const double p = double(j);
    for (int m = 0; m < F; ++m) {
      phi[2 * m] = std::sin(p * feature_frequency(s, m));
      phi[2 * m + 1] = std::cos(p * feature_frequency(s, m));
    }
    phi[2 * F] = p / double(s.goat.train_len);
    phi[2 * F + 1] = std::log1p(p) / std::log1p(double(s.goat.train_len));
    double g = 0;
    for (int n = 0; n < N; ++n) {
      double pre = b1(hk, n);
      for (int m = 0; m < NF; ++m) pre += w1(hk, n, m) * phi[m];
      g += w2(hk, n) * pre / (1.0 + std::exp(-pre));  // silu
    }
    out.push_back(lambda * p + g + (j == 0 ? bump : 0.0));
  }
  return out;
}

std::vector<double> mode_amplitudes(const AttentionSpec& s,
                                    const ParamSet<double, HostSpace>& given, int h) {
  check_goat(s, "mode_amplitudes");
  check_head(h, s.heads, "mode_amplitudes");
  const auto P = host_lane_params(s, given);
  std::vector<double> out;
  for (int r = 0; r < s.goat.modes; ++r)
    out.push_back(std::hypot(P.v2("goat.alpha")(h, r), P.v2("goat.beta")(h, r)));
  return out;
}

template <class T>
void init_params(const AttentionSpec& s, ParamSet<T, HostSpace>& P, uint64_t seed) {
  check_goat(s, "init_params");
  Normal normal(seed);
  auto fill = [&](const std::string& name, double sd) {
    const auto& e = P.layout.at(name);
    for (int64_t i = 0; i < e.size(); ++i) P.data(e.offset + i) = T(sd == 0 ? 0.0 : normal(sd));
  };
  auto set = [&](const std::string& name, const std::function<double(int64_t)>& value) {
    const auto& e = P.layout.at(name);
    for (int64_t i = 0; i < e.size(); ++i) P.data(e.offset + i) = T(value(i));
  };
  if (s.goat.recipe == GoatRecipe::Authors) {
    fill("goat.kv_alpha", 0.01);
    fill("goat.kv_beta", 0.0);
    // softplus^-1(m) = log(expm1(m)): the recency slope starts at ALiBi's slope m.
    set("goat.slope", [&](int64_t hk) {
      return std::log(std::expm1(alibi_slope(int(hk), s.kv_heads, AlibiSlopes::Published)));
    });
    set("goat.gain", [](int64_t) { return 1.0; });
    fill("goat.bump", 0.0);
    fill("goat.shared_w1", 1e-3);
    fill("goat.shared_b1", 0.0);
    fill("goat.shared_w2", 1e-3);
  } else {
    fill("goat.alpha", 0.02);
    fill("goat.beta", 0.02);
    fill("goat.lambda", 0.0);
    fill("goat.bump", 0.0);
    fill("goat.mlp_w1", 1.0 / std::sqrt(double(feature_count(s))));
    fill("goat.mlp_b1", 0.0);
    fill("goat.mlp_w2", 0.0);
  }
  if (s.goat.query_gate) {
    set("goat.gate_scale", [](int64_t) { return -10.0; });
    set("goat.gate_bias", [](int64_t) { return 10.0; });
  }
}

template void init_params<float>(const AttentionSpec&, ParamSet<float, HostSpace>&, uint64_t);
template void init_params<double>(const AttentionSpec&, ParamSet<double, HostSpace>&, uint64_t);

}  // namespace lcr::goat
