#include "kernels/attention/spec.hpp"

#include <cmath>

#include "kernels/base/error.hpp"
#include "kernels/schemes/goat/goat.hpp"
#include "kernels/schemes/pope/pope.hpp"
#include "kernels/schemes/rope/rope.hpp"

namespace lcr {
namespace {
struct NamedScheme {
  const char* name;
  Scheme scheme;
};
constexpr NamedScheme kSchemes[] = {
    {"nope", Scheme::NoPE}, {"rope", Scheme::RoPE},     {"alibi", Scheme::ALiBi},
    {"goat", Scheme::GOAT}, {"goat2d", Scheme::GOAT2D}, {"pope", Scheme::PoPE},
    {"fox", Scheme::FoX},   {"path", Scheme::PaTH},     {"path_fox", Scheme::PaTHFoX},
};
}  // namespace

const char* scheme_name(Scheme s) {
  for (const auto& n : kSchemes)
    if (n.scheme == s) return n.name;
  return "?";
}

std::vector<std::string> scheme_names() {
  std::vector<std::string> out;
  for (const auto& n : kSchemes) out.emplace_back(n.name);
  return out;
}

Scheme parse_scheme(const std::string& name) {
  std::string valid;
  for (const auto& n : kSchemes) {
    if (name == n.name) return n.scheme;
    valid += std::string(valid.empty() ? "" : ", ") + n.name;
  }
  throw_error("unknown position scheme '", name, "'; valid schemes: ", valid);
}

double fox_gate_scale(const AttentionSpec& spec) {
  return spec.fox.gate_scale == FoxGateScale::SoftmaxScale ? 1.0 / std::sqrt(double(spec.head_dim))
                                                           : 1.0;
}

int input_qk_dim(const AttentionSpec& spec) {
  switch (spec.scheme) {
    case Scheme::GOAT:
    case Scheme::GOAT2D:
      return spec.head_dim - (2 * spec.goat.modes + 2);
    default:
      return spec.head_dim;
  }
}

void validate(const AttentionSpec& s) {
  require(s.heads > 0 && s.kv_heads > 0, "heads (", s.heads, ") and kv_heads (", s.kv_heads,
          ") must be positive");
  require(s.heads % s.kv_heads == 0, "heads (", s.heads, ") must be a multiple of kv_heads (",
          s.kv_heads, "): each KV head serves heads/kv_heads query heads (GQA)");
  require(s.head_dim > 0, "head_dim must be positive, got ", s.head_dim);
  require(s.value_dim >= 0, "value_dim must be >= 0 (0 means head_dim), got ", s.value_dim);
  require(s.numerics.softcap >= 0 && std::isfinite(s.numerics.softcap),
          "softcap must be a finite number >= 0 (0 disables it), got ", s.numerics.softcap);
  require(s.numerics.qk_norm_eps > 0, "qk_norm_eps must be > 0, got ", s.numerics.qk_norm_eps);
  require(!(s.numerics.sink && s.numerics.off_by_one),
          "numerics.sink (a learned sink logit) and numerics.off_by_one (one fixed at 0) are "
          "both set; choose one");
  switch (s.scheme) {
    case Scheme::RoPE:
      rope::validate(s);
      break;
    case Scheme::GOAT:
    case Scheme::GOAT2D:
      goat::validate(s);
      break;
    case Scheme::PoPE:
      pope::validate(s);
      break;
    default:
      break;
  }
}

}  // namespace lcr
