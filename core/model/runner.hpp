#pragma once
// How a model layer runs attention: an injected AttentionRunner, so the same model code
// drives single-rank attention (LocalAttention, below) and the context-parallel ring
// (core/model/ring_runner.hpp: the local tensors are then this rank's shard).
//
// Position mapping. The model's rows are this rank's LOCAL rows, [B, L_local]. The runner
// owns the map from local rows to GLOBAL positions and reports it as segments: runs of
// consecutive global positions in local-row order. Single rank: one segment {0, L, pos0}.
// Zigzag ring: two segments, e.g. rank r of N holds chunks r and 2N-1-r, so
//   {row0 = 0, rows = n_r, pos0 = start of chunk r}, {row0 = n_r, rows = .., pos0 = start of
//   chunk 2N-1-r}.
// The attention call gets AttentionInputs with q_pos0 = k_pos0 = segments[0].pos0: exact
// for a one-segment runner; a multi-segment runner ignores them and applies its own layout.
//
// Sums over GLOBAL positions (FoX's cumulative gate c_t = sum_{s <= t} log f_s and its
// backward, the suffix sum of dc) also belong to the runner, because they need the rows
// of every rank: global_cumsum. So do the rows just before each segment that PaTH's
// width-3 convolution reads (rows_before_segments and its backward). A ring runner
// gathers per-chunk totals across the group (parallel/ring/fox_prefix.hpp);
// LocalAttention scans its rows.
//
// Gradients of the attention parameters: backward returns THIS rank's contribution; the
// training loop sums the whole gradient buffer over the DP x CP ranks once, after
// backward. (core/model/ring_runner.hpp adapts the ring, whose backward already sums
// dparams over the CP group, to this contract.)
#include <vector>

#include "kernels/attention/attention.hpp"

namespace lcr {

struct RowSegment {
  int64_t row0 = 0;  // first local row
  int64_t rows = 0;  // number of rows
  int64_t pos0 = 0;  // global position of row0 (row row0 + t sits at pos0 + t)
};

template <class T>
class AttentionRunner {
 public:
  virtual ~AttentionRunner() = default;

  // The segments covering local rows [0, local_len) in order. Throws an Error when the
  // runner cannot serve that length (e.g. a ring built for another sequence length).
  virtual std::vector<RowSegment> segments(int64_t local_len) const = 0;

  // x, out [B, L_local, H] (local rows): out at the row of global position p is the sum of x
  // over every global position p' <= p (reverse = false) or p' >= p (reverse = true) of
  // the whole sequence, every rank's rows included. Running sums in double.
  virtual void global_cumsum(const View3<const T>& x, const View3<T>& out, bool reverse) = 0;

  // PaTH's causal width-3 convolution (core/model/path.hpp) reads, before each segment, the
  // rows of u [B, L_local, Hkv, d] at the GLOBAL positions pos0 - 2 and pos0 - 1 of that
  // segment. Returns one [B, 2, Hkv, d] view per segment (index 1 = position pos0 - 1) with
  // zeros for positions before the sequence's row 0, or an empty view meaning all zeros.
  // Under context parallelism the rows may live on another rank (a collective call).
  virtual std::vector<View4<T>> rows_before_segments(const View4<const T>& u) = 0;
  // The backward: drows (one per segment, shaped like rows_before_segments' result; empty
  // where that was empty) are ADDED into du [B, L_local, Hkv, d] at the rows they were read
  // from, on whichever rank holds them (a collective call).
  virtual void rows_before_segments_backward(const std::vector<View4<T>>& drows,
                                             const View4<T>& du) = 0;

  // Same contract as attention_forward / attention_backward (kernels/attention/attention.hpp)
  // on this rank's local rows; backward overwrites every gradient in grads (dparams
  // included: the model adds them into its gradient buffer).
  virtual void forward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                       const ParamSet<T>& params, const AttentionOutputs<T>& out) = 0;
  virtual void backward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                        const ParamSet<T>& params, const AttentionOutputs<T>& out,
                        const View4<const T>& dout, AttentionGrads<T>& grads) = 0;
};

// Inclusive prefix (reverse: suffix) sums along axis 1 of x [B, L, H], per (b, h), in
// double: the global_cumsum of rows that are the whole sequence in order.
template <class T>
void local_cumsum(const View3<const T>& x, const View3<T>& out, bool reverse);

// All rows on this rank, consecutive global positions from pos0 (0 for training; a later
// window of a long document when evaluating with an offset).
template <class T>
class LocalAttention : public AttentionRunner<T> {
 public:
  explicit LocalAttention(int64_t pos0 = 0) : pos0_(pos0) {}

  std::vector<RowSegment> segments(int64_t local_len) const override {
    return {RowSegment{0, local_len, pos0_}};
  }
  void global_cumsum(const View3<const T>& x, const View3<T>& out, bool reverse) override {
    local_cumsum<T>(x, out, reverse);
  }
  // Row 0 is the start of the sequence (an evaluation window at pos0 > 0 starts its
  // convolution from zeros, like a fresh sequence): nothing before it.
  std::vector<View4<T>> rows_before_segments(const View4<const T>&) override {
    return {View4<T>()};
  }
  void rows_before_segments_backward(const std::vector<View4<T>>&, const View4<T>&) override {}
  void forward(const AttentionSpec& spec, const AttentionInputs<T>& in, const ParamSet<T>& params,
               const AttentionOutputs<T>& out) override {
    attention_forward(spec, in, params, out);
  }
  void backward(const AttentionSpec& spec, const AttentionInputs<T>& in, const ParamSet<T>& params,
                const AttentionOutputs<T>& out, const View4<const T>& dout,
                AttentionGrads<T>& grads) override {
    attention_backward(spec, in, params, out, dout, grads);
  }

 private:
  int64_t pos0_;
};

}  // namespace lcr
