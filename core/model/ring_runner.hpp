#pragma once
// The model's attention runner for context parallelism: adapts the ring (parallel/ring) to
// the AttentionRunner contract (runner.hpp). Header-only, so lcr_model itself needs no
// MPI; a target that includes this header links lcr_parallel.
//
// Every rank of the CP group calls the model with its LOCAL rows of every sequence in
// `layout` (shard_view(tokens, layout, rank), same for labels). Then:
//   segments        the rank's chunks in local order, at their global positions
//   global_cumsum   the ring's cross-rank prefix / suffix sums (fox_prefix.hpp)
//   rows_before_segments  PaTH's convolution prefix rows from other chunks / ranks
//                   (ring_conv_prefix.hpp), and their gradient back to their owners
//   forward         ring_attention_forward (PaTH, PaTH-FoX: path_ring_forward) with the
//                   global row 0 at pos0
//   backward        ring_attention_backward (path_ring_backward); the ring returns
//                   dparams already summed over the CP group, identical on every rank,
//                   so only CP rank 0 keeps them:
//                   the training loop's one sum of the gradient buffer over the DP x CP
//                   ranks then counts them once, like every other parameter's gradient.
// The loss: pass loss_norm = the labelled-row count of the whole batch (all ranks) to
// Model::forward and sum the returned losses over the group.
#include <vector>

#include "core/model/ring_conv_prefix.hpp"
#include "core/model/runner.hpp"
#include "kernels/base/error.hpp"
#include "parallel/comm/communicator.hpp"
#include "parallel/ring/fox_prefix.hpp"
#include "parallel/ring/layout.hpp"
#include "parallel/ring/path_ring.hpp"
#include "parallel/ring/ring_attention.hpp"

namespace lcr {

template <class T>
class RingAttention : public AttentionRunner<T> {
 public:
  // comm: the CP group; layout: how the sequence is split over comm's ranks; pos0: global
  // position of the sequence's row 0.
  RingAttention(Communicator& comm, SeqLayout layout, int64_t pos0 = 0)
      : comm_(comm), layout_(std::move(layout)), pos0_(pos0) {
    require(layout_.ranks() == comm_.size(), "ring layout is for ", layout_.ranks(),
            " ranks, the CP group has ", comm_.size());
  }

  std::vector<RowSegment> segments(int64_t local_len) const override {
    const int r = comm_.rank();
    require(local_len == layout_.local_length(r), "CP rank ", r, " holds ", layout_.local_length(r),
            " positions of ", layout_.describe(), ", the batch has ", local_len,
            " (shard tokens and labels with the same layout)");
    std::vector<RowSegment> segs;
    for (int c : layout_.chunks_of(r)) {
      const Chunk& ch = layout_.chunk(c);
      segs.push_back({ch.local_offset, ch.length, pos0_ + ch.start});
    }
    return segs;
  }

  void global_cumsum(const View3<const T>& x, const View3<T>& out, bool reverse) override {
    if (reverse)
      fox_global_cumulative_backward<T>(comm_, layout_, x, out);
    else
      fox_global_cumulative<T>(comm_, layout_, x, out);
  }

  std::vector<View4<T>> rows_before_segments(const View4<const T>& u) override {
    return ring_rows_before_chunks<T>(comm_, layout_, u);
  }
  void rows_before_segments_backward(const std::vector<View4<T>>& drows,
                                     const View4<T>& du) override {
    ring_rows_before_chunks_backward<T>(comm_, layout_, drows, du);
  }

  void forward(const AttentionSpec& spec, const AttentionInputs<T>& in, const ParamSet<T>& params,
               const AttentionOutputs<T>& out) override {
    forward_stats_ =
        is_path(spec.scheme)
            ? path_ring_forward<T>(comm_, layout_, spec, at_row0(in), params, out)
            : ring_attention_forward<T>(comm_, layout_, spec, at_row0(in), params, out);
  }

  void backward(const AttentionSpec& spec, const AttentionInputs<T>& in, const ParamSet<T>& params,
                const AttentionOutputs<T>& out, const View4<const T>& dout,
                AttentionGrads<T>& grads) override {
    const AttentionInputs<T> in0 = at_row0(in);
    backward_stats_ =
        is_path(spec.scheme)
            ? path_ring_backward<T>(comm_, layout_, spec, in0, params, out, dout, grads)
            : ring_attention_backward<T>(comm_, layout_, spec, in0, params, out, dout, grads);
    if (comm_.rank() != 0) Kokkos::deep_copy(grads.dparams.data, T(0));
  }

  const SeqLayout& layout() const { return layout_; }
  const RingStats& forward_stats() const { return forward_stats_; }  // of the last call
  const RingStats& backward_stats() const { return backward_stats_; }

 private:
  // The ring wants the position of global row 0, not of this rank's first row.
  AttentionInputs<T> at_row0(AttentionInputs<T> in) const {
    in.q_pos0 = in.k_pos0 = pos0_;
    return in;
  }

  Communicator& comm_;
  SeqLayout layout_;
  int64_t pos0_;
  RingStats forward_stats_, backward_stats_;
};

}  // namespace lcr
