#pragma once
// Spec-level GPU ring attention for the dot-product family (NoPE, RoPE, ALiBi, GOAT 1-D/2-D,
// PoPE, FoX; QK-RMSNorm, softcap, sink, GQA): the GPU twin of ring_attention_forward /
// ring_attention_backward (parallel/ring/ring_attention.hpp), same contract, same result
// as the single-GPU cuda::attention_forward / attention_backward on the whole sequence
// up to fp32 reordering and bf16 rounding of the softmax weights.
//
// The scheme lanes come from the CUDA attention API (kernels/attention/cuda/api):
// prepare_attention per LOCAL chunk with the chunk's GLOBAL first position (zigzag ranks
// hold two chunks that are not adjacent), so the ring (RingSdpa) moves only what the
// kernel consumes: k' lanes, v and the FoX c_j. The backward maps the lane gradients
// back through prepared_backward per chunk and sums the parameter gradients over comm.
//
//   in: this rank's local tensors in `layout`: q [B, Lr, H, dq], k [B, Lr, Hkv, dq],
//       v [B, Lr, Hkv, dv] bf16; FoX: fox_cq = fox_ck = the GLOBAL cumulative log gates of
//       the local rows [B, Lr, H]; Lq = Lk = Lr; q_pos0 == k_pos0 = global position of
//       the whole sequence's row 0. Parameters replicated on every rank (device fp32).
//   out: o [B, Lr, H, dv] bf16, lse [B, H, Lr] (sink included).
//   grads: dq, dk, dv, dfox_cq, dfox_ck local (overwritten); dparams summed over comm.
#include <memory>

#include "kernels/attention/cuda/api/attention_cuda.hpp"
#include "parallel/ring/cuda/ring_cuda.hpp"

namespace lcr::cuda {

class RingAttention {
 public:
  // Collective over comm. Errors: PaTH (its own ring), a layout for another rank count.
  RingAttention(NcclCommunicator& comm, const SeqLayout& layout, const AttentionSpec& spec, int B);
  ~RingAttention();
  RingAttention(const RingAttention&) = delete;
  RingAttention& operator=(const RingAttention&) = delete;

  // Both return after the work has finished (stats need the GPU timings), with the work
  // ordered after what is queued on `stream`.
  RingStats forward(const DeviceParams& params, const AttentionInputs& in,
                    const AttentionOutputs& out, cudaStream_t stream);
  RingStats backward(const DeviceParams& params, const AttentionInputs& in,
                     const AttentionOutputs& out, const bf16* dout, const AttentionGrads& grads,
                     cudaStream_t stream);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace lcr::cuda
