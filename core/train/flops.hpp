#pragma once
// Model FLOPs of one training token, for the logged model TFLOP/s and MFU.
//
//   forward + backward = 3 x forward
//   forward per token  = 2 x (matrix parameters that multiply activations: q/k/v/o, FoX
//                        and PaTH projections, MLP, LM head; not the embedding lookup)
//                      + per layer 2 (L + 1) / 2 H (dqk + dv)   (causal attention: the
//                        logits and the weighted sum over (L + 1) / 2 keys on average)
// with dqk = the model's q/k width (PoPE counts d, not its 2d-wide kernel lanes): model
// FLOPs, not the kernels'. PaLM's convention counts the full L x L attention instead of
// the causal half; docs/cuda.md gives both.
#include <cstdint>

#include "core/model/config.hpp"

namespace lcr::train {

double model_flops_per_token(const ModelConfig& m, int64_t seq_len);

}  // namespace lcr::train
