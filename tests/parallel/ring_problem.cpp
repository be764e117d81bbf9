#include "ring_problem.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace lcr::test {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// Parameter draws keeping every logit O(1) at the test lengths (<= 128 positions).
double draw_param(const std::string& name, std::mt19937_64& rng) {
  std::normal_distribution<double> n01(0.0, 1.0);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  if (name == "pope.delta") return -kTwoPi * u01(rng);  // its clamp range [-2pi, 0]
  if (name.rfind("qk_norm.", 0) == 0) return 1.0 + 0.2 * n01(rng);
  if (name == "goat.lambda") return 0.01 * n01(rng);
  if (name == "goat.slope") return -4.6 + 0.5 * n01(rng);       // softplus(s) ~ 0.01, as lambda
  if (name == "goat.gate_scale") return -3.0 + 0.5 * n01(rng);  // g mid-range (harness)
  return 0.5 * n01(rng);
}

template <class V>
void fill_normal(const V& v, std::mt19937_64& rng) {
  std::normal_distribution<double> n01(0.0, 1.0);
  for (size_t i = 0; i < v.span(); ++i) v.data()[i] = n01(rng);
}

}  // namespace

FullProblem make_full_problem(const RingCase& c, int64_t L) {
  const auto& s = c.spec;
  validate(s);
  std::mt19937_64 rng(c.seed);
  const int dq = input_qk_dim(s), B = c.batch;
  FullProblem p;
  p.q = H4<double>("q", B, L, s.heads, dq);
  p.k = H4<double>("k", B, L, s.kv_heads, dq);
  p.v = H4<double>("v", B, L, s.kv_heads, s.v_dim());
  p.dout = H4<double>("dout", B, L, s.heads, s.v_dim());
  for (auto* v : {&p.q, &p.k, &p.v, &p.dout}) fill_normal(*v, rng);
  if (uses_fox(s.scheme)) {
    std::normal_distribution<double> n01(0.0, 1.0);
    p.log_f = H3<double>("log_f", B, L, s.heads);
    p.fox_c = H3<double>("fox_c", B, L, s.heads);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < s.heads; ++h) {
        double acc = 0;
        for (int64_t t = 0; t < L; ++t) {
          const double lf = -std::log1p(std::exp(-(2.0 + n01(rng))));  // log sigmoid
          p.log_f(b, t, h) = lf;
          acc += lf;
          p.fox_c(b, t, h) = acc;
        }
      }
  }
  p.params = ParamSet<double, HostSpace>(attention_param_layout(s), "params");
  for (const auto& e : p.params.layout.entries())
    for (int64_t i = 0; i < e.size(); ++i) p.params.data(e.offset + i) = draw_param(e.name, rng);
  return p;
}

std::vector<RingCase> ring_cases() {
  std::vector<RingCase> all;
  auto add = [&](const std::string& name, const AttentionSpec& s, int batch) {
    all.push_back({name, s, batch, 1000 + all.size(), 0});
  };
  AttentionSpec base;
  base.heads = 2;
  base.kv_heads = 2;
  base.head_dim = 16;

  AttentionSpec s = base;
  s.scheme = Scheme::NoPE;
  add("nope", s, 2);
  s.numerics.sink = true;
  s.numerics.softcap = 5.0;
  add("nope_sink_softcap", s, 1);

  s = base;
  s.scheme = Scheme::RoPE;
  s.heads = 4;  // GQA 4 -> 2
  add("rope_halfsplit_gqa", s, 1);
  s.rope.pairing = RopePairing::Interleaved;
  s.rope.rotary_dim = 8;
  s.numerics.qk_norm = true;
  s.numerics.sink = true;
  add("rope_interleaved_partial_qknorm_sink", s, 2);

  s = base;
  s.scheme = Scheme::ALiBi;
  s.heads = 4;
  s.kv_heads = 1;  // MQA
  add("alibi_mqa", s, 1);
  s.numerics.sink = true;
  s.numerics.softcap = 4.0;
  add("alibi_sink_softcap", s, 1);

  s = base;
  s.scheme = Scheme::GOAT;
  s.head_dim = 24;  // d_c = 14 with 4 modes
  s.goat.modes = 4;
  s.goat.mlp_hidden = 6;
  s.goat.feature_freqs = 2;
  s.goat.train_len = 64;
  add("goat", s, 1);
  s.heads = 4;
  s.numerics.qk_norm = true;
  s.numerics.sink = true;
  s.numerics.softcap = 6.0;
  add("goat_gqa_qknorm_sink_softcap", s, 2);
  // The authors' recipe (GQA: their alpha, beta per KV head) with the query gate.
  s.numerics = {};
  s.goat.recipe = GoatRecipe::Authors;
  s.goat.query_gate = true;
  add("goat_authors_gqa_gate", s, 1);

  s = base;
  s.scheme = Scheme::GOAT2D;
  s.head_dim = 24;
  s.goat.modes = 4;
  s.goat.mlp_hidden = 6;
  s.goat.feature_freqs = 2;
  s.goat.train_len = 64;
  s.goat.grid_width = 8;
  add("goat2d", s, 1);

  s = base;
  s.scheme = Scheme::PoPE;
  add("pope", s, 1);
  s.heads = 4;
  s.numerics.qk_norm = true;
  s.numerics.softcap = 5.0;
  add("pope_gqa_qknorm_softcap", s, 1);

  s = base;
  s.scheme = Scheme::FoX;
  s.value_dim = 12;
  add("fox", s, 2);
  s.heads = 4;
  s.numerics.sink = true;
  s.numerics.qk_norm = true;
  add("fox_gqa_sink_qknorm", s, 1);
  return all;
}

RingCase ring_case(const std::string& name) {
  for (const auto& c : ring_cases())
    if (c.name == name) return c;
  throw_error("no ring test case named '", name, "'");
}

double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  if (!(diff == diff)) return INFINITY;  // NaN
  return diff / std::max(scale, 1e-3);
}

}  // namespace lcr::test
