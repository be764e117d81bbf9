#pragma once
// The model's parameters in ONE contiguous buffer (llm.c style); gradients and the AdamW
// moments use the same layout, so clipping, all-reduce, checkpoints and the optimizer see
// one array. Named slices, in buffer order:
//   embed [V, D]
//   per layer l, prefix "layers.<l>.":
//     attn_norm [D]   wq [D, H dq]   wk [D, Hkv dq]   wv [D, Hkv dv]   wo [H dv, D]
//     attn.<name>     the scheme's own parameters (attention_param_layout(spec): goat.*,
//                     pope.delta, sink, qk_norm.*), contiguous, so a ParamSet aliases them
//     fox_w [D, H]  fox_b [H]     (FoX, PaTH-FoX: forget gate f = sigmoid(xn W + b))
//     path_u [D, Hkv d]  path_conv [Hkv, d, 3]  path_beta_w [D, Hkv]  path_beta_b [Hkv]
//                                   (PaTH, PaTH-FoX: u = xn Wu -> w = normalize(conv3(u)),
//                                    beta = 2 sigmoid(xn Wb + b); core/model/path.hpp)
//     mlp_norm [D]  w_gate [D, F]  w_up [D, F]  w_down [F, D]
//   final_norm [D]
//   lm_head [D, V]                  (untied only; tied uses embed^T)
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/config.hpp"
#include "kernels/attention/params.hpp"

namespace lcr {

// What a slice is, for initialisation and weight-decay groups.
enum class ParamKind {
  Embedding,  // embed: N(0, std)
  Matrix,     // wq wk wv w_gate w_up lm_head fox_w path_u path_beta_w: N(0, std)
  OutMatrix,  // wo w_down: N(0, std / sqrt(2 n_layers)) (GPT-2: residual-branch outputs)
  Norm,       // RMSNorm gains: ones
  Bias,       // fox_b: fox_bias_init; path_beta_b: 0 (beta = 2 sigmoid(0) = 1 at init)
  Position,   // attn.*: the scheme's own init (GOAT prior, PoPE delta 0, sink 0, gains 1)
  Filter,     // path_conv: N(0, std) like flash-linear-attention's conv init; no decay
};
const char* param_kind_name(ParamKind k);

// Whether a parameter name (a dotted path, "layers.0.attn.sink") ends with suffix.
bool ends_with(const std::string& name, const std::string& suffix);

// Offsets into the buffer of one layer's slices (-1 when absent).
struct LayerSlices {
  int64_t attn_norm = -1, wq = -1, wk = -1, wv = -1, wo = -1;
  int64_t attn = -1;  // start of the attention parameter block (size attention().total())
  int64_t fox_w = -1, fox_b = -1;
  int64_t path_u = -1, path_conv = -1, path_beta_w = -1, path_beta_b = -1;
  int64_t mlp_norm = -1, w_gate = -1, w_up = -1, w_down = -1;
};

class ModelLayout {
 public:
  explicit ModelLayout(const ModelConfig& cfg);  // validates cfg

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& params() const { return params_; }   // every named slice
  const ParamLayout& attention() const { return attn_; }  // one layer's attn.* (offsets from 0)
  const LayerSlices& layer(int l) const { return layers_.at(size_t(l)); }
  int64_t embed() const { return embed_; }
  int64_t final_norm() const { return final_norm_; }
  int64_t lm_head() const { return lm_head_; }  // -1 when tied
  int64_t total() const { return params_.total(); }
  ParamKind kind(const ParamEntry& e) const;

  // Dimensions used everywhere.
  int V() const { return cfg_.vocab_size; }
  int D() const { return cfg_.d_model; }
  int F() const { return cfg_.ffn(); }
  int H() const { return cfg_.attention.heads; }
  int Hkv() const { return cfg_.attention.kv_heads; }
  int dq() const { return input_qk_dim(cfg_.attention); }
  int dv() const { return cfg_.attention.v_dim(); }

 private:
  ModelConfig cfg_;
  ParamLayout params_, attn_;
  std::vector<LayerSlices> layers_;
  int64_t embed_ = -1, final_norm_ = -1, lm_head_ = -1;
};

// A ParamSet whose buffer ALIASES layer l's attention block inside `buffer` (the model's
// parameters or gradients): what attention_forward/backward take. No copy.
template <class T, class M>
ParamSet<T, M> attention_params(const ModelLayout& layout, const View1<T, M>& buffer, int l) {
  ParamSet<T, M> p;
  p.layout = layout.attention();
  p.data = View1<T, M>(buffer.data() + layout.layer(l).attn, size_t(layout.attention().total()));
  return p;
}

// Fills a host buffer of layout.total() values, deterministically from the seed (each slice
// draws from its own stream, so adding a slice does not change the others). Normal draws:
// Box-Muller on std::mt19937_64 (identical with every standard library).
template <class T>
void init_params(const ModelLayout& layout, const View1<T, HostSpace>& params, uint64_t seed);

// Parameter counts for the log: total, and without embeddings/lm_head.
int64_t count_params(const ModelLayout& layout, bool exclude_embeddings);

}  // namespace lcr
