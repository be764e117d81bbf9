#pragma once
// Model FLOPs of one training token, for the logged model TFLOP/s and MFU.
//
//   forward + backward = 3 x forward
//   forward per token  = 2 x (matrix parameters that multiply activations: q/k/v/o, FoX
//                        and PaTH projections, MLP, LM head; not the embedding lookup)
//                      + attention per layer:
//                          causal: 2 (L + 1) / 2 H (d_h + dv)  (logits and the weighted
//                                  sum over (L + 1) / 2 keys on average)
//                          full:   2 L H (d_h + dv)            (PaLM's MFU convention,
//                                  which counts every query against every key)
// d_h = attention.head_dim, the logit width the scheme defines (GOAT: content plus prior
// lanes; PoPE: d), so every scheme of one head width counts the same attention FLOPs:
// model FLOPs, not the kernels' (padded or 2d-wide lanes are not counted).
// MFU = model FLOPs per second / the GPU's peak; docs/cuda.md reports both counts.
#include <cstdint>

#include "core/model/config.hpp"

namespace lcr::train {

struct TokenFlops {
  double causal = 0;  // forward + backward, causal attention counted exactly
  double full = 0;    // forward + backward, attention counted as L x L (PaLM)
};

TokenFlops model_flops_per_token(const ModelConfig& m, int64_t seq_len);

}  // namespace lcr::train
