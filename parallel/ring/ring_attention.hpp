#pragma once
// Context-parallel ring attention for the dot-product family (NoPE, RoPE, ALiBi, GOAT
// 1-D/2-D, PoPE, FoX; with sink, softcap, QK-norm, GQA). docs/ring.md explains the
// schedule; DESIGN.md section 5 states what must hold: the result equals the single-rank
// attention_forward / attention_backward up to floating-point reordering.
//
// Every rank of `comm` calls these with its LOCAL tensors in `layout` (rank r's chunks
// concatenated in chunk order, see layout.hpp / shard.hpp):
//   in.q [B, Lr, H, dq], in.k [B, Lr, Hkv, dq], in.v [B, Lr, Hkv, dv],
//   in.fox_cq = in.fox_ck = the GLOBAL cumulative log forget gates of the local rows
//   [B, Lr, H] (fox_prefix.hpp makes them from local log gates),
//   in.q_pos0 == in.k_pos0 = position of global row 0 (normally 0); the positions of the
//   local rows come from the layout.
//   out.o [B, Lr, H, dv], out.lse [B, H, Lr] (sink included).
// Parameters are replicated on every rank; the backward's dparams are summed over comm.
//
// Errors (bad shapes, a layout for another rank count, a mismatched message) are thrown
// as lcr::Error; a caller that cannot recover wraps the call in run_or_abort(comm, ...)
// so the whole job ends with the message instead of a peer hanging.
#include "kernels/attention/attention.hpp"
#include "parallel/comm/communicator.hpp"
#include "parallel/ring/layout.hpp"
#include "parallel/ring/stats.hpp"

namespace lcr {

template <class T>
RingStats ring_attention_forward(Communicator& comm, const SeqLayout& layout,
                                 const AttentionSpec& spec, const AttentionInputs<T>& in,
                                 const ParamSet<T>& params, const AttentionOutputs<T>& out);

// out: this rank's forward result; dout [B, Lr, H, dv]. grads (from make_grads(spec, in))
// receive the local dq, dk, dv, dfox_cq, dfox_ck and the CP-summed dparams (overwritten).
template <class T>
RingStats ring_attention_backward(Communicator& comm, const SeqLayout& layout,
                                  const AttentionSpec& spec, const AttentionInputs<T>& in,
                                  const ParamSet<T>& params, const AttentionOutputs<T>& out,
                                  const View4<const T>& dout, AttentionGrads<T>& grads);

}  // namespace lcr
