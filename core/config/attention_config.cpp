#include "core/config/attention_config.hpp"

namespace lcr::config {

void bind_attention(Table& root, AttentionSpec& s) {
  Table& a = root.table("attention", "attention layer: position scheme, shapes, numerics");
  std::vector<std::pair<std::string, Scheme>> schemes;
  for (const auto& n : scheme_names()) schemes.emplace_back(n, parse_scheme(n));
  a.choice("scheme", s.scheme, schemes, "position scheme");
  a.field("heads", s.heads, "H, query heads");
  a.field("kv_heads", s.kv_heads, "Hkv, key/value heads; divides heads (GQA)");
  a.field("head_dim", s.head_dim, "d_h, the kernel's head width (GOAT: d_c + 2R + 2)");
  a.field("value_dim", s.value_dim, "dv; 0 = head_dim");

  Table& r = a.table("rope");
  r.choice("pairing", s.rope.pairing,
           {{"half_split", RopePairing::HalfSplit}, {"interleaved", RopePairing::Interleaved}},
           "rotated pairs: (m, m + r/2) or (2m, 2m+1)");
  r.field("rotary_dim", s.rope.rotary_dim, "r, leading dims rotated; 0 = the whole head");
  r.field("base", s.rope.base, "angle = pos * base^(-2m/r)");
  r.field("yarn_factor", s.rope.yarn_factor, "YaRN scale s = L'/L; 1 disables YaRN");
  r.field("yarn_original_len", s.rope.yarn_original_len, "YaRN: training context N");
  r.field("yarn_beta_fast", s.rope.yarn_beta_fast, "YaRN ramp upper edge");
  r.field("yarn_beta_slow", s.rope.yarn_beta_slow, "YaRN ramp lower edge");
  r.choice("yarn_convention", s.rope.yarn_convention,
           {{"released", YarnConvention::Released}, {"paper", YarnConvention::Paper}},
           "YaRN ramp and temperature: the authors' code (checkpoints) or the paper's text");

  a.table("alibi").choice(
      "slopes", s.alibi.slopes,
      {{"published", AlibiSlopes::Published}, {"geometric", AlibiSlopes::Geometric}},
      "ALiBi slopes: the authors' recipe, or 2^(-8(h+1)/H) for every H");

  Table& g = a.table("goat");
  g.choice("recipe", s.goat.recipe, {{"lcr", GoatRecipe::Lcr}, {"authors", GoatRecipe::Authors}},
           "GOAT's parameterisation: lcr's (per-query-head alpha, beta; per-KV-head MLPs; "
           "neutral start) or the authors' package (per-KV-head alpha, beta; one shared MLP "
           "with per-head gains; softplus recency slope seeded at ALiBi's)");
  g.field("query_gate", s.goat.query_gate,
          "the authors' query gate sigmoid(b_h - softplus(a_h) |q_c|) on the prior");
  g.field("modes", s.goat.modes, "R Fourier modes (0: no relative prior); d_c = head_dim - 2R - 2");
  g.field("base", s.goat.base, "w_r = base^(-(r-1)/max(R-1,1))");
  g.field("mlp_hidden", s.goat.mlp_hidden, "hidden width of the key-bias SiLU MLP");
  g.field("feature_freqs", s.goat.feature_freqs, "sin/cos pairs in phi(j)");
  g.field("train_len", s.goat.train_len, "L_train in phi(j)");
  g.field("grid_width", s.goat.grid_width, "GOAT2D: p sits at (p / W, p % W)");
  g.field("y_modes", s.goat.y_modes, "GOAT2D: modes on the y axis; 0 = R / 2");

  a.table("fox").choice(
      "gate_scale", s.fox.gate_scale,
      {{"unscaled", FoxGateScale::Unscaled}, {"softmax_scale", FoxGateScale::SoftmaxScale}},
      "FoX / PaTH-FoX log gates: as the papers write them, or times 1/sqrt(d) as fla's "
      "PaTH-FoX kernels");
  a.table("pope").field("base", s.pope.base, "theta_c = base^(-(c-1)/d)");
  a.table("path").field("block_size", s.path.block_size,
                        "PaTH block length (any value >= 1 gives the same result)");

  Table& n = a.table("numerics");
  n.field("qk_norm", s.numerics.qk_norm, "per-head RMSNorm of q and k before the scheme");
  n.field("qk_norm_eps", s.numerics.qk_norm_eps, "RMSNorm epsilon");
  n.field("softcap", s.numerics.softcap, "logit <- c tanh(logit / c); 0 disables");
  n.field("sink", s.numerics.sink, "learned per-head sink logit");
  n.field("off_by_one", s.numerics.off_by_one,
          "softmax-off-by-one: 1 added to the softmax denominator (a sink logit fixed at 0, "
          "not learned)");
}

AttentionSpec attention_spec_from(const Document& root) {
  AttentionSpec spec;
  Table t;
  bind_attention(t, spec);
  t.read(root);
  return spec;
}

std::string attention_spec_toml(const AttentionSpec& spec) {
  AttentionSpec copy = spec;
  Table t;
  bind_attention(t, copy);
  return t.to_toml();
}

std::vector<std::pair<std::string, Value>> attention_spec_values(const AttentionSpec& spec) {
  AttentionSpec copy = spec;
  Table t;
  bind_attention(t, copy);
  return t.table("attention").values();
}

}  // namespace lcr::config
