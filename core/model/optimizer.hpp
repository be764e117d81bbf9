#pragma once
// AdamW over the one contiguous parameter buffer, with a warmup + cosine learning-rate
// schedule, global gradient-norm clipping, weight-decay groups and per-slice clamps.
//
// Update (PyTorch AdamW order; t = 1, 2, ... the update count, g the clipped gradient):
//   p <- p (1 - lr wd_group)
//   m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2
//   p <- p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   p <- clamp(p, lo, hi) for slices with a range (PoPE delta into [-2 pi, 0])
//
// Weight-decay groups (model_param_ranges): decay on the weight matrices (wq wk wv wo
// w_gate w_up w_down lm_head fox_w path_u path_beta_w). No decay on RMSNorm gains and the
// FoX / PaTH gate biases (pulling a gain toward 0 rescales activations, not capacity).
// No decay on PaTH's w convolution filter path_conv: it belongs to the position scheme's
// transition, and w = y / |y| removes its overall scale (exactly without the SiLU, nearly
// with it), so decay would not regularise the model, only shrink the filter and so raise
// its effective step size. (The paper's trainer decays every tensor alike, gains included;
// this optimizer departs from that for gains and scheme parameters.) Nor on any attention
// scheme parameter (GOAT alpha/beta/lambda/bump/MLP, PoPE delta, sink, QK-norm gains):
// these are priors whose magnitude IS what is learned and logged; decay would bias them
// toward the uniform prior. Embeddings (and the tied LM head): no decay by default
// (OLMo 2's finding: decaying embeddings shrinks their norm and hurts stability);
// decay_embeddings = true follows GPT-2/nanoGPT instead.
//
// Deterministic: the norm is summed in fixed-size chunks in double, chunks summed on the
// host in order; each element's update is independent.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/params.hpp"

namespace lcr {

struct AdamWConfig {
  double lr = 3e-4;          // peak learning rate
  double min_lr = 3e-5;      // cosine floor (absolute)
  int64_t warmup_steps = 0;  // linear warmup: lr (s + 1) / warmup for s < warmup
  int64_t total_steps = 0;   // cosine from lr at warmup to min_lr at total; 0 = no decay
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // decoupled, for the decay group only
  double grad_clip = 1.0;     // max global L2 norm; 0 disables clipping
  bool decay_embeddings = false;
};

// Error naming the field: lr <= 0, min_lr outside [0, lr], betas outside [0, 1), ...
void validate(const AdamWConfig& cfg);

// The learning rate of update number `step` (0-based):
//   step < warmup:            lr (step + 1) / warmup
//   warmup <= step < total:   min_lr + (lr - min_lr) (1 + cos(pi (step - warmup) / (total -
//   warmup))) / 2 otherwise:                min_lr when total_steps > 0, lr when total_steps == 0
double learning_rate(const AdamWConfig& cfg, int64_t step);

// A slice of the buffer with its optimizer treatment.
struct ParamRange {
  std::string name;
  int64_t offset = 0, size = 0;
  bool decay = false;
  bool clamp = false;
  double lo = 0, hi = 0;  // clamp range when clamp
  bool frozen = false;    // not trained: zero_frozen_grads clears its gradient before a step
};

// The model's slices with decay and clamps as documented above; frozen: the sink logits
// under numerics.off_by_one (softmax-off-by-one fixes them at their initial 0).
std::vector<ParamRange> model_param_ranges(const ModelLayout& layout, const AdamWConfig& cfg);

// Zeroes the gradient of every frozen range (after the all-reduce, before the step), so a
// frozen value stays as initialised, its moments stay 0 and it adds nothing to the norm.
template <class T>
void zero_frozen_grads(const std::vector<ParamRange>& ranges, const View1<T>& grads);

// sqrt(sum g^2) in double, deterministic on every backend.
template <class T>
double global_grad_norm(const View1<const T>& g);

template <class T>
class AdamW {
 public:
  struct StepInfo {
    int64_t step = 0;       // 0-based index of the update just taken
    double lr = 0;          // learning rate used
    double grad_norm = 0;   // before clipping
    double clip_scale = 1;  // factor applied to the gradient (1 = not clipped)
  };

  // ranges must tile [0, n) exactly (any order). Moments start at zero.
  AdamW(const AdamWConfig& cfg, std::vector<ParamRange> ranges, int64_t n);

  // One update of params from grads (grads are read, not modified). Throws an Error, leaving
  // params and moments untouched, when the gradient norm is not finite.
  StepInfo step(const View1<T>& params, const View1<const T>& grads);

  const AdamWConfig& config() const { return cfg_; }
  const std::vector<ParamRange>& ranges() const { return ranges_; }
  int64_t steps_taken() const { return t_; }
  // Checkpoint state: the moments (same layout as the parameters) and the update count.
  View1<T> m() const { return m_; }
  View1<T> v() const { return v_; }
  void set_steps_taken(int64_t t);

 private:
  AdamWConfig cfg_;
  std::vector<ParamRange> ranges_;
  View1<T> m_, v_;
  View1<uint8_t> decay_;  // per element: 1 = weight decay applies
  int64_t t_ = 0;
};

}  // namespace lcr
