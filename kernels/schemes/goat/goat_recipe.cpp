// GOAT's authors' recipe on the host: the slice offsets of the map between their parameter
// buffer and the lanes' (goat_recipe.hpp), and the lane parameters for the host-side
// statistics. The device side (the map run by the lanes) is in goat.cpp.
#include <Kokkos_Core.hpp>

#include "kernels/attention/params.hpp"
#include "kernels/base/error.hpp"
#include "kernels/schemes/goat/goat.hpp"

namespace lcr::goat {

AttentionSpec lane_spec(const AttentionSpec& s) {
  AttentionSpec out = s;
  out.goat.recipe = GoatRecipe::Lcr;
  return out;
}

RecipeMap recipe_map(const AttentionSpec& s) {
  require(s.goat.recipe == GoatRecipe::Authors, "goat::recipe_map needs goat.recipe = \"authors\"");
  const ParamLayout a = attention_param_layout(s), l = attention_param_layout(lane_spec(s));
  RecipeMap m;
  m.H = s.heads;
  m.Hkv = s.kv_heads;
  m.R = s.goat.modes;
  m.N = s.goat.mlp_hidden;
  m.NF = feature_count(s);
  m.a_alpha = a.at("goat.kv_alpha").offset;
  m.a_beta = a.at("goat.kv_beta").offset;
  m.a_slope = a.at("goat.slope").offset;
  m.a_gain = a.at("goat.gain").offset;
  m.a_bump = a.at("goat.bump").offset;
  m.a_w1 = a.at("goat.shared_w1").offset;
  m.a_b1 = a.at("goat.shared_b1").offset;
  m.a_w2 = a.at("goat.shared_w2").offset;
  m.a_end = m.a_w2 + m.N;
  m.l_alpha = l.at("goat.alpha").offset;
  m.l_beta = l.at("goat.beta").offset;
  m.l_lambda = l.at("goat.lambda").offset;
  m.l_bump = l.at("goat.bump").offset;
  m.l_w1 = l.at("goat.mlp_w1").offset;
  m.l_b1 = l.at("goat.mlp_b1").offset;
  m.l_w2 = l.at("goat.mlp_w2").offset;
  m.l_end = m.l_w2 + int64_t(m.Hkv) * m.N;
  m.tail = a.total() - m.a_end;
  require(m.a_alpha == 0 && m.l_alpha == 0 && l.total() - m.l_end == m.tail,
          "goat::recipe_map: the GOAT slices must lead both layouts (params.cpp)");
  return m;
}

ParamSet<double, HostSpace> host_lane_params(const AttentionSpec& s,
                                             const ParamSet<double, HostSpace>& P) {
  ParamSet<double, HostSpace> out(attention_param_layout(lane_spec(s)), "lcr::goat_lane_params");
  if (s.goat.recipe != GoatRecipe::Authors) {
    Kokkos::deep_copy(out.data, P.data);
    return out;
  }
  const RecipeMap m = recipe_map(s);
  for (int64_t e = 0; e < m.lane_total(); ++e) out.data(e) = recipe_expand(m, P.data.data(), e);
  return out;
}

}  // namespace lcr::goat
