#pragma once
// Context-parallel ring attention for PaTH and PaTH-FoX (docs/ring.md, "PaTH"; DESIGN.md
// section 5). Same calling convention as ring_attention.hpp, plus the PaTH inputs:
//   in.path_w [B, Lr, Hkv, d] (unit rows), in.path_beta [B, Lr, Hkv] (in [0, 2)), the
//   local rows in the layout; PaTH-FoX also in.fox_cq = in.fox_ck = GLOBAL cumulative
//   log gates of the local rows [B, Lr, H].
// PaTH's logit between key j of chunk b and query i of a later chunk a is
//   k~_j^T (P_{b+1} ... P_{a-1}) q~_i / sqrt(d) [+ c_i - c_j]
// (k~: keys folded to their chunk's right end, q~: queries folded to their chunk's left
// end, P_m: chunk m's transition; kernels/schemes/path/ring.hpp). So each rank folds its
// chunks' keys and queries and forms their transitions once; the small P's [B, Hkv, d, d]
// are allgathered; (k~, v [, c_j]) travel the ring like ordinary K/V; a visiting chunk b
// meets local chunk a > b through an ordinary scaled dot product with the carried query
// y = P_{b+1} ... P_{a-1} q~ (applied right to left); the diagonal pair a == b runs the
// chunk-local PaTH kernel. Partial (o, lse) merge as for every scheme; the sink joins last.
#include "kernels/attention/attention.hpp"
#include "parallel/comm/communicator.hpp"
#include "parallel/ring/layout.hpp"
#include "parallel/ring/stats.hpp"

namespace lcr {

template <class T>
RingStats path_ring_forward(Communicator& comm, const SeqLayout& layout, const AttentionSpec& spec,
                            const AttentionInputs<T>& in, const ParamSet<T>& params,
                            const AttentionOutputs<T>& out);

// Gradients of the local rows (dq, dk, dv, dpath_w, dpath_beta, dfox_cq, dfox_ck) and
// the group-summed dparams into grads (from make_grads(spec, local inputs)).
template <class T>
RingStats path_ring_backward(Communicator& comm, const SeqLayout& layout, const AttentionSpec& spec,
                             const AttentionInputs<T>& in, const ParamSet<T>& params,
                             const AttentionOutputs<T>& out, const View4<const T>& dout,
                             AttentionGrads<T>& grads);

}  // namespace lcr
