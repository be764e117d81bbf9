#include "core/model/params.hpp"

#include <cmath>
#include <random>

#include "kernels/base/error.hpp"
#include "kernels/schemes/goat/goat.hpp"

namespace lcr {

const char* param_kind_name(ParamKind k) {
  switch (k) {
    case ParamKind::Embedding:
      return "embedding";
    case ParamKind::Matrix:
      return "matrix";
    case ParamKind::OutMatrix:
      return "output matrix";
    case ParamKind::Norm:
      return "norm";
    case ParamKind::Bias:
      return "bias";
    case ParamKind::Position:
      return "position";
    case ParamKind::Filter:
      return "filter";
  }
  return "?";
}

ModelLayout::ModelLayout(const ModelConfig& cfg) : cfg_(cfg) {
  validate(cfg_);
  attn_ = attention_param_layout(cfg_.attention);
  const int64_t V_ = V(), D_ = D(), F_ = F(), H_ = H(), Hkv_ = Hkv(), dq_ = dq(), dv_ = dv();
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    params_.add(name, std::move(shape));
    return params_.entries().back().offset;
  };
  embed_ = add("embed", {V_, D_});
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerSlices s;
    s.attn_norm = add(p + "attn_norm", {D_});
    s.wq = add(p + "wq", {D_, H_ * dq_});
    s.wk = add(p + "wk", {D_, Hkv_ * dq_});
    s.wv = add(p + "wv", {D_, Hkv_ * dv_});
    s.wo = add(p + "wo", {H_ * dv_, D_});
    // The attention block: its entries in attention-layout order, so that offset(e) - s.attn
    // equals the attention layout's own offset and a ParamSet can alias the block.
    s.attn = params_.total();
    for (const auto& e : attn_.entries()) {
      const int64_t off = add(p + "attn." + e.name, e.shape);
      require(off - s.attn == e.offset, "internal: attention block of layer ", l,
              " is not contiguous");
    }
    if (uses_fox(cfg_.attention.scheme)) {
      s.fox_w = add(p + "fox_w", {D_, H_});
      s.fox_b = add(p + "fox_b", {H_});
    }
    if (is_path(cfg_.attention.scheme)) {
      // A full [D, Hkv d] w projection, as flash-linear-attention uses for GQA. Its MHA
      // variant (and the paper's "low-rank linear layer") factors it through rank 32 to save
      // parameters at D = 2048. At CPU widths (D, Hkv d <= 64) a rank-32 factor costs
      // 32 (D + Hkv d) >= D Hkv d parameters, plus a second GEMM and a product of two small
      // random inits; at large widths the full matrix stays small next to wq (Hkv <= H).
      const int64_t d = cfg_.attention.head_dim;
      s.path_u = add(p + "path_u", {D_, Hkv_ * d});
      s.path_conv = add(p + "path_conv", {Hkv_, d, 3});
      s.path_beta_w = add(p + "path_beta_w", {D_, Hkv_});
      s.path_beta_b = add(p + "path_beta_b", {Hkv_});
    }
    s.mlp_norm = add(p + "mlp_norm", {D_});
    s.w_gate = add(p + "w_gate", {D_, F_});
    s.w_up = add(p + "w_up", {D_, F_});
    s.w_down = add(p + "w_down", {F_, D_});
    layers_.push_back(s);
  }
  final_norm_ = add("final_norm", {D_});
  if (!cfg_.tie_embeddings) lm_head_ = add("lm_head", {D_, V_});
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

ParamKind ModelLayout::kind(const ParamEntry& e) const {
  const std::string& n = e.name;
  if (n == "embed") return ParamKind::Embedding;
  if (n.find(".attn.") != std::string::npos) return ParamKind::Position;
  if (ends_with(n, "norm")) return ParamKind::Norm;
  if (ends_with(n, "fox_b") || ends_with(n, "path_beta_b")) return ParamKind::Bias;
  if (ends_with(n, "path_conv")) return ParamKind::Filter;
  if (ends_with(n, ".wo") || ends_with(n, ".w_down")) return ParamKind::OutMatrix;
  return ParamKind::Matrix;
}

int64_t count_params(const ModelLayout& layout, bool exclude_embeddings) {
  int64_t n = 0;
  for (const auto& e : layout.params().entries())
    if (!exclude_embeddings || (e.name != "embed" && e.name != "lm_head")) n += e.size();
  return n;
}

namespace {

// splitmix64: decorrelates the per-slice stream seeds derived from (seed, slice index).
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// N(0, std^2) draws by Box-Muller from 53-bit uniforms (libstdc++'s normal_distribution
// differs between libraries; this does not).
class Normal {
 public:
  explicit Normal(uint64_t seed) : gen_(seed) {}
  double operator()() {
    if (have_) {
      have_ = false;
      return spare_;
    }
    const double u1 = (double(gen_() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = double(gen_() >> 11) * 0x1.0p-53;          // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * M_PI * u2;
    spare_ = r * std::sin(t);
    have_ = true;
    return r * std::cos(t);
  }

 private:
  std::mt19937_64 gen_;
  double spare_ = 0;
  bool have_ = false;
};

}  // namespace

template <class T>
void init_params(const ModelLayout& layout, const View1<T, HostSpace>& P, uint64_t seed) {
  const ModelConfig& c = layout.config();
  require(int64_t(P.extent(0)) == layout.total(), "parameter buffer has ", P.extent(0),
          " values, the model needs ", layout.total());
  const double out_std = c.init_std / std::sqrt(2.0 * c.n_layers);
  const auto& entries = layout.params().entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const ParamEntry& e = entries[i];
    T* p = P.data() + e.offset;
    const ParamKind k = layout.kind(e);
    Normal normal(mix(seed ^ mix(uint64_t(i) + 1)));
    for (int64_t j = 0; j < e.size(); ++j) {
      switch (k) {
        case ParamKind::Embedding:
        case ParamKind::Matrix:
        case ParamKind::Filter:
          p[j] = T(c.init_std * normal());
          break;
        case ParamKind::OutMatrix:
          p[j] = T(out_std * normal());
          break;
        case ParamKind::Norm:
          p[j] = T(1);
          break;
        case ParamKind::Bias:
          // PaTH's beta bias starts at 0 (flash-linear-attention zeroes biases): beta = 1.
          p[j] = T(ends_with(e.name, "fox_b") ? c.fox_bias_init : 0.0);
          break;
        case ParamKind::Position:
          // Defaults every scheme agrees with: sink 0, PoPE delta 0, GOAT lambda/bump 0;
          // QK-norm gains are gains. GOAT's own init runs below, per layer.
          p[j] = T(e.name.find("qk_norm.") != std::string::npos ? 1 : 0);
          break;
      }
    }
  }
  const Scheme s = c.attention.scheme;
  if (is_goat(s)) {
    for (int l = 0; l < c.n_layers; ++l) {
      ParamSet<T, HostSpace> ps = attention_params(layout, P, l);
      goat::init_params<T>(c.attention, ps, mix(seed ^ mix(0xA77E4000ull + uint64_t(l))));
    }
  }
}

template void init_params<float>(const ModelLayout&, const View1<float, HostSpace>&, uint64_t);
template void init_params<double>(const ModelLayout&, const View1<double, HostSpace>&, uint64_t);

}  // namespace lcr
