#include "core/model/config.hpp"

#include <cmath>
#include <sstream>

#include "kernels/base/error.hpp"

namespace lcr {

int ModelConfig::ffn() const {
  if (ffn_hidden > 0) return ffn_hidden;
  // LLaMA's rule: 2/3 of a 4D MLP keeps the parameter count of a GELU MLP; rounded to a
  // multiple of 8 so the GEMM tiles stay full.
  const int f = int(std::lround(8.0 * d_model / 3.0 / 8.0)) * 8;
  return f > 0 ? f : 8;
}

void validate(const ModelConfig& c) {
  require(c.vocab_size > 0, "model.vocab_size must be positive, got ", c.vocab_size);
  require(c.d_model > 0, "model.d_model must be positive, got ", c.d_model);
  require(c.n_layers > 0, "model.n_layers must be positive, got ", c.n_layers);
  require(c.ffn_hidden >= 0, "model.ffn_hidden must be >= 0 (0 picks about 8/3 d_model), got ",
          c.ffn_hidden);
  require(c.norm_eps > 0 && std::isfinite(c.norm_eps), "model.norm_eps must be > 0, got ",
          c.norm_eps);
  require(c.init_std > 0 && std::isfinite(c.init_std), "model.init_std must be > 0, got ",
          c.init_std);
  require(std::isfinite(c.fox_bias_init), "model.fox_bias_init must be finite");
  validate(c.attention);
  if (is_path(c.attention.scheme))
    require(c.attention.path.block_size >= 1,
            "attention.path.block_size must be >= 1 (PaTH's block length: every value gives the "
            "same result, 64 is a good default), got ",
            c.attention.path.block_size);
}

std::string describe(const ModelConfig& c) {
  std::ostringstream os;
  os << "V=" << c.vocab_size << " D=" << c.d_model << " layers=" << c.n_layers
     << " heads=" << c.attention.heads << "/" << c.attention.kv_heads
     << " head_dim=" << c.attention.head_dim << " ffn=" << c.ffn()
     << " scheme=" << scheme_name(c.attention.scheme) << (c.tie_embeddings ? " tied" : " untied");
  return os.str();
}

}  // namespace lcr
