#pragma once
// FoX cumulative forget gates made globally correct across a context-parallel group.
// FoX adds c_i - c_j to logit (i, j) with c_t = sum_{s <= t} log f_s over GLOBAL
// positions, so a rank's c needs the gate sums of every chunk before its own. Each rank
// sums its chunks' log f (per batch row and head), the chunk sums are allgathered, and an
// exclusive scan of them in chunk order gives each local chunk its offset:
//   c_t = offset(chunk of t) + sum_{s in chunk, s <= t} log f_s.
// The backward is the reverse (suffix) scan: dlog f_t = sum_{s >= t} dc_s, again with a
// cross-rank exclusive suffix of chunk sums. Sums run in double whatever T is, so c stays
// accurate at 1M positions in float32 mode.
#include "kernels/base/tensor.hpp"
#include "parallel/comm/communicator.hpp"
#include "parallel/ring/layout.hpp"

namespace lcr {

// log_f, c: [B, L_local, H], local rows in layout order (a rank's chunks concatenated).
template <class T>
void fox_global_cumulative(Communicator& comm, const SeqLayout& layout, const View3<const T>& log_f,
                           const View3<T>& c);

// dc -> dlog_f, both [B, L_local, H]: the gradient through fox_global_cumulative.
template <class T>
void fox_global_cumulative_backward(Communicator& comm, const SeqLayout& layout,
                                    const View3<const T>& dc, const View3<T>& dlog_f);

}  // namespace lcr
