#pragma once
// Per-layer, per-head attention statistics for the HDF5 run file (DESIGN.md section 6),
// measured on the activations of the model's LAST forward pass.
//
// What is measured. For each head h, on probe query rows i (a few rows evenly spaced over
// the sequence, the last row always included, of the first batch elements), the attention
// distribution p_i over the keys j <= i (plus the sink as one extra outcome when the sink
// is enabled) is recomputed in float64 from the kernel's own inputs (prepare_attention:
// the scheme's q', k' lanes, scale, ALiBi slope, FoX bias, softcap; PaTH: q, k after
// QK-norm carried through the transitions H_t = I - beta_t w_t w_t^T key by key, plus the
// FoX bias for PaTH-FoX), so it is exactly the distribution the model used, up to rounding:
//   entropy           mean_i  -sum_j p_ij log p_ij                        (nats)
//   max_logit         max_i,j s_ij, the final logit fed to the softmax (after softcap)
//   first_token_mass  mean_i  p_i,0, the weight on the key at GLOBAL position 0 (the
//                     "attention sink" token)
// Cost: O(rows x L x d) per head (PaTH too), next to O(L^2 d) for the forward; it never
// materialises more than one row of probabilities. Why a probe rather than the kernel: the tiled
// kernel keeps only lse, and entropy and max logit need the logits themselves.
//
// Needs a forward pass whose runner has ONE segment (LocalAttention): the stats need all
// keys of a row. With context parallelism, run a separate single-rank probe forward.
#include <vector>

#include "core/model/model.hpp"

namespace lcr {

struct HeadAttentionStats {
  double entropy = 0;
  double max_logit = 0;
  double first_token_mass = 0;
};

struct ProbeOptions {
  int rows = 32;  // query rows per sequence (evenly spaced, last row included)
  int batch = 1;  // sequences of the batch probed (the first ones)
};

// [layer][head] statistics of the last forward pass.
template <class T>
std::vector<std::vector<HeadAttentionStats>> attention_probe_stats(const Model<T>& model,
                                                                   const ProbeOptions& opt = {});

}  // namespace lcr
