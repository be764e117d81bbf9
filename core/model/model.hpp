#pragma once
// The decoder-only transformer language model: token embedding -> n_layers pre-norm blocks
// (block.hpp) -> final RMSNorm -> LM head -> cross-entropy. Parameters and gradients live in
// one contiguous buffer each (params.hpp has the named slices).
//
// A training step (one rank; see runner.hpp for context parallelism):
//   Model<float> model(cfg, seed);
//   AdamW<float> opt(opt_cfg, model_param_ranges(model.layout(), opt_cfg), model.layout().total());
//   LocalAttention<float> attn;
//   model.zero_grad();
//   double loss = model.forward(tokens, labels, attn);   // tokens, labels [B, L] int32
//   model.backward(attn);                                 // grads() += dloss/dparams
//   (all-reduce grads() over DP / CP ranks here)
//   opt.step(model.params(), model.grads());
// Gradient accumulation: call forward/backward several times between zero_grad() calls,
// each with loss_norm = the labelled-row count of the whole accumulated batch.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/activations.hpp"
#include "core/model/block.hpp"
#include "core/model/params.hpp"
#include "core/model/runner.hpp"

namespace lcr {

// Checks a batch of n host values each: tokens in [0, V), labels in [-1, V) (-1 = ignored);
// an Error naming the count and the fix otherwise. Returns the labelled rows (label >= 0).
// Shared by Model and the GPU model (core/model/cuda).
int64_t check_batch(const int32_t* tokens, const int32_t* labels, int64_t n, int V);

template <class T>
class Model {
 public:
  // Validates cfg (Error naming the field), allocates and initialises parameters from seed.
  Model(const ModelConfig& cfg, uint64_t seed);

  const ModelConfig& config() const { return layout_.config(); }
  const ModelLayout& layout() const { return layout_; }
  View1<T> params() const { return params_; }  // [layout().total()]
  View1<T> grads() const { return grads_; }    // same layout
  void zero_grad();

  // Forward pass over this rank's local rows: tokens, labels [B, L] in [0, V) (labels may be
  // -1 = ignored). Keeps every activation for backward. Returns
  //   sum over labelled rows of -log p(label | prefix)  /  norm,
  // norm = loss_norm when > 0 (the labelled-row count over every rank and micro-batch, so
  // the gradients sum to those of the global mean), else this call's labelled-row count.
  double forward(const View2<const int32_t>& tokens, const View2<const int32_t>& labels,
                 AttentionRunner<T>& runner, double loss_norm = 0);
  // ADDS dloss/dparams into grads(); needs the preceding forward with the same runner.
  // Overwrites the stored logits with their gradient.
  void backward(AttentionRunner<T>& runner);

  int64_t labelled_rows() const { return labelled_; }  // of the last forward
  double loss_norm() const { return norm_; }           // denominator the last forward used
  const Activations<T>& activations() const { return acts_; }
  const std::vector<RowSegment>& segments() const { return segs_; }  // of the last forward

  // Layer l's attention call of the last forward (for statistics and probes).
  AttentionInputs<T> attention_inputs(int l) const;
  AttentionOutputs<T> attention_outputs(int l) const;
  ParamSet<T> attention_params(int l) const;

  // After a non-finite loss: "layer 3 (attention output)" for the first stage whose
  // activations hold a NaN/Inf, or "" when every activation is finite.
  std::string locate_nonfinite() const;

 private:
  void ensure_buffers(int64_t B, int64_t L);

  ModelLayout layout_;
  View1<T> params_, grads_;
  Activations<T> acts_;
  BackwardWork<T> work_;
  std::vector<RowSegment> segs_;
  int64_t labelled_ = 0;
  double norm_ = 0;
  bool have_forward_ = false;
};

}  // namespace lcr
