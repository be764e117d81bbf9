// PaTH ring forward (path_ring.hpp): folded keys travel, transitions are allgathered, the
// query is carried back across the chunks between a visiting key chunk and its own.
#include "parallel/ring/path_ring.hpp"

#include "parallel/ring/merge.hpp"
#include "parallel/ring/path_ring_chunks.hpp"

namespace lcr {

using namespace ring_detail;
using namespace path_ring_detail;

template <class T>
RingStats path_ring_forward(Communicator& comm, const SeqLayout& layout, const AttentionSpec& spec,
                            const AttentionInputs<T>& in, const ParamSet<T>& params,
                            const AttentionOutputs<T>& out) {
  const auto t_start = Clock::now();
  check_path_ring_inputs(comm, layout, spec, in, params);
  const int N = comm.size(), me = comm.rank();
  const int B = int(in.q.extent(0)), H = spec.heads, Dv = spec.v_dim(), d = spec.head_dim;
  check_ring_outputs(spec, in, out);
  RingStats st;
  st.pass = "forward";

  auto chunks = prepare_path_chunks(layout, me, spec, in, params);
  int64_t p_bytes = 0;
  const auto p_all = gather_transitions(comm, layout, chunks, p_bytes);
  const RingMessage msg = ring_message(spec, d);
  const auto plans = all_plans(msg, layout, B);
  CommBuffer<T> cur(capacity(plans), comm.buffer_space());
  CommBuffer<T> nxt(N > 1 ? capacity(plans) : 0, comm.buffer_space());
  for (size_t i = 0; i < chunks.size(); ++i) {  // own (k~, v [, c_j]) into the first message
    auto f = chunk_fields<T>(cur.data(), msg, plans[size_t(me)], int(i), layout, 0);
    Kokkos::deep_copy(f.k, chunks[i].k_fold);
    Kokkos::deep_copy(f.v, chunks[i].v);
    if (f.fox.extent(0) > 0) Kokkos::deep_copy(f.fox, chunks[i].fox_k);
  }

  std::vector<RowSlot<View4<T>>> o_acc;
  std::vector<RowSlot<View3<T>>> lse_acc;
  std::vector<View4<T>> o_blk, y, tmp;
  std::vector<View3<T>> lse_blk;
  for (const auto& a : chunks) {
    o_acc.push_back(row_slot(out.o, 1, a.ch, a.whole));
    lse_acc.push_back(row_slot(out.lse, 2, a.ch, a.whole));
    reset_partial(o_acc.back().view, lse_acc.back().view);
    o_blk.emplace_back("lcr::o_block", B, a.ch.length, H, Dv);
    lse_blk.emplace_back("lcr::lse_block", B, H, a.ch.length);
    y.emplace_back("lcr::path_carried_q", B, a.ch.length, H, d);
    tmp.emplace_back("lcr::path_carried_q", B, a.ch.length, H, d);
  }
  Kokkos::fence();
  st.prepare_s = seconds_since(t_start);

  // p_bytes: the transitions' allgather, counted as step 0's traffic.
  ring_forward_steps(comm, layout, msg, plans, cur, nxt, chunks, in.q_pos0, p_bytes, st,
                     [&](size_t ai, const ChunkFields<const T>& b) {
                       const PathChunk<T>& a = chunks[ai];
                       if (a.ch.index == b.index) {  // own keys: the chunk-local PaTH kernel
                         path::path_forward<T>(diagonal_args(spec, a), o_blk[ai], lse_blk[ai]);
                       } else {
                         const auto q = carry_query(a, b.index, p_all, y[ai], tmp[ai]);
                         sdpa_forward(cross_args(spec, a, q, b, in.q_pos0), o_blk[ai], lse_blk[ai]);
                       }
                       ring_merge<T>(o_acc[ai].view, lse_acc[ai].view, o_blk[ai], lse_blk[ai]);
                     });

  finish_ring_forward<T>(spec, params, o_acc, lse_acc);
  st.total_s = seconds_since(t_start);
  return st;
}

#define LCR_INSTANTIATE(T)                                                                       \
  template RingStats path_ring_forward<T>(Communicator&, const SeqLayout&, const AttentionSpec&, \
                                          const AttentionInputs<T>&, const ParamSet<T>&,         \
                                          const AttentionOutputs<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
