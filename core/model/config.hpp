#pragma once
// The shape of the decoder-only transformer (DESIGN.md section 2):
//   tokens [B, L] -> embed [V, D] -> n_layers x pre-norm block -> final RMSNorm -> LM head
//   block: x += Wo attn(RMSNorm(x) Wq, RMSNorm(x) Wk, RMSNorm(x) Wv)   (configured scheme)
//          x += Wdown (silu(RMSNorm(x) Wgate) * RMSNorm(x) Wup)        (SwiGLU)
// Widths: q and k have input_qk_dim(attention) per head (GOAT: d_c = head_dim - 2R - 2,
// PoPE: d), v and o have attention.v_dim() per head. d_model need not equal heads * head_dim.
#include <cstdint>
#include <string>

#include "kernels/attention/spec.hpp"

namespace lcr {

struct ModelConfig {
  int vocab_size = 256;  // V (byte-level default)
  int d_model = 64;      // D
  int n_layers = 2;
  AttentionSpec attention;     // heads, kv_heads, head_dim, scheme and its options
  int ffn_hidden = 0;          // F of the SwiGLU MLP; 0 = the multiple of 8 nearest 8 D / 3
  double norm_eps = 1e-5;      // RMSNorm epsilon (blocks and final norm)
  bool tie_embeddings = true;  // LM head = embed^T (no separate lm_head parameter)
  double init_std = 0.02;      // N(0, init_std^2) for matrices; output projections
                               // (wo, w_down) are further scaled by 1/sqrt(2 n_layers)
  double fox_bias_init = 0.0;  // FoX: initial forget-gate bias b (f = sigmoid(x W + b));
                               // 0 follows the FoX paper's default (no special init)
  bool path_w_silu = true;     // PaTH: SiLU after the w convolution (flash-linear-attention's
                               // ShortConvolution default; false = the paper's plain conv)

  int ffn() const;  // the resolved F
};

// Throws an Error naming the field and the fix: non-positive sizes, a bad attention spec
// (lcr::validate: impossible head split, GOAT with head_dim <= 2 modes + 2, ...), a PaTH
// block_size below 1.
void validate(const ModelConfig& cfg);

// "V=256 D=64 layers=2 heads=4/4 head_dim=16 ffn=176 scheme=goat tied"
std::string describe(const ModelConfig& cfg);

}  // namespace lcr
