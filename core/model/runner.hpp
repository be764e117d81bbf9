#pragma once
// How a model layer runs attention: an injected AttentionRunner, so the same model code
// drives single-rank attention (LocalAttention, below) and the context-parallel ring
// (parallel/ring provides a runner whose local tensors are this rank's shard).
//
// Position mapping. The model's rows are this rank's LOCAL rows, [B, L_local]. The runner
// owns the map from local rows to GLOBAL positions and reports it as segments: runs of
// consecutive global positions in local-row order. Single rank: one segment {0, L, pos0}.
// Zigzag ring: two segments, e.g. rank r of N holds chunks r and 2N-1-r, so
//   {row0 = 0, rows = n_r, pos0 = start of chunk r}, {row0 = n_r, rows = .., pos0 = start of
//   chunk 2N-1-r}.
// The model uses the segments only for what it computes itself from positions (FoX's
// cumulative gate c_t, a sum over GLOBAL positions; prior statistics). The attention call
// gets AttentionInputs with q_pos0 = k_pos0 = segments[0].pos0: exact for a one-segment
// runner; a multi-segment runner ignores them and applies its own layout.
//
// FoX across segments: the model scans log f inside each local segment and asks the runner
// for each segment's carry, the sum over all GLOBAL positions before it (forward) or after
// it (backward's reverse scan). A ring runner gathers the per-chunk totals of the whole
// group to answer; LocalAttention sums its own segments.
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

  // totals [B, S, H]: per local segment s, the sum of a per-position quantity x over the
  // segment. carry [B, S, H] (overwritten): sum of x over every global position before
  // segment s (reverse = false) or after its last position (reverse = true), over the whole
  // sequence, not only this rank's rows.
  virtual void segment_carry(const std::vector<RowSegment>& segs, const View3<const T>& totals,
                             const View3<T>& carry, bool reverse) = 0;

  // Same contract as attention_forward / attention_backward (kernels/attention/attention.hpp)
  // on this rank's local rows; backward overwrites every gradient in grads (dparams
  // included: the model adds them into its gradient buffer).
  virtual void forward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                       const ParamSet<T>& params, const AttentionOutputs<T>& out) = 0;
  virtual void backward(const AttentionSpec& spec, const AttentionInputs<T>& in,
                        const ParamSet<T>& params, const AttentionOutputs<T>& out,
                        const View4<const T>& dout, AttentionGrads<T>& grads) = 0;
};

// All rows on this rank, consecutive global positions from pos0 (0 for training; a later
// window of a long document when evaluating with an offset).
template <class T>
class LocalAttention : public AttentionRunner<T> {
 public:
  explicit LocalAttention(int64_t pos0 = 0) : pos0_(pos0) {}

  std::vector<RowSegment> segments(int64_t local_len) const override {
    return {RowSegment{0, local_len, pos0_}};
  }
  void segment_carry(const std::vector<RowSegment>& segs, const View3<const T>& totals,
                     const View3<T>& carry, bool reverse) override;
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

// The single-process answer to segment_carry when `segs` are ALL of the sequence's
// segments (any order): each segment's carry sums the totals of the segments before (after)
// it in global position order. Usable by any runner that has gathered every chunk's totals.
template <class T>
void local_segment_carry(const std::vector<RowSegment>& segs, const View3<const T>& totals,
                         const View3<T>& carry, bool reverse);

}  // namespace lcr
