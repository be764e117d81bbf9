// Ring forward: K/V lanes travel the ring, partial (o, lse) merge locally (docs/ring.md).
#include "parallel/ring/merge.hpp"
#include "parallel/ring/ring_attention.hpp"
#include "parallel/ring/ring_chunks.hpp"

namespace lcr {

using namespace ring_detail;

template <class T>
RingStats ring_attention_forward(Communicator& comm, const SeqLayout& layout,
                                 const AttentionSpec& spec, const AttentionInputs<T>& in,
                                 const ParamSet<T>& params, const AttentionOutputs<T>& out) {
  const auto t_start = Clock::now();
  check_ring_inputs(comm, layout, spec, in, params);
  const int N = comm.size(), me = comm.rank();
  const int B = int(in.q.extent(0)), H = spec.heads, Dv = spec.v_dim();
  check_ring_outputs(spec, in, out);
  RingStats st;
  st.pass = "forward";

  auto chunks = prepare_chunks(layout, me, spec, in, params);
  const RingMessage msg = ring_message(spec, lane_width(chunks));
  const auto plans = all_plans(msg, layout, B);
  CommBuffer<T> cur(capacity(plans), comm.buffer_space());
  CommBuffer<T> nxt(N > 1 ? capacity(plans) : 0, comm.buffer_space());
  pack_own_chunks(chunks, cur, msg, plans[size_t(me)], layout);

  // Per local chunk: the running (o, lse) and one block's partial result.
  std::vector<RowSlot<View4<T>>> o_acc;
  std::vector<RowSlot<View3<T>>> lse_acc;
  std::vector<View4<T>> o_blk;
  std::vector<View3<T>> lse_blk;
  for (const auto& a : chunks) {
    o_acc.push_back(row_slot(out.o, 1, a.ch, a.whole));
    lse_acc.push_back(row_slot(out.lse, 2, a.ch, a.whole));
    reset_partial(o_acc.back().view, lse_acc.back().view);
    o_blk.emplace_back("lcr::o_block", B, a.ch.length, H, Dv);
    lse_blk.emplace_back("lcr::lse_block", B, H, a.ch.length);
  }
  Kokkos::fence();
  st.prepare_s = seconds_since(t_start);

  ring_forward_steps(comm, layout, msg, plans, cur, nxt, chunks, in.q_pos0, 0, st,
                     [&](size_t ai, const ChunkFields<const T>& b) {
                       sdpa_forward(pair_args(chunks[ai], b), o_blk[ai], lse_blk[ai]);
                       ring_merge<T>(o_acc[ai].view, lse_acc[ai].view, o_blk[ai], lse_blk[ai]);
                     });

  finish_ring_forward<T>(spec, params, o_acc, lse_acc);
  st.total_s = seconds_since(t_start);
  return st;
}

#define LCR_INSTANTIATE(T)                                                                      \
  template RingStats ring_attention_forward<T>(Communicator&, const SeqLayout&,                 \
                                               const AttentionSpec&, const AttentionInputs<T>&, \
                                               const ParamSet<T>&, const AttentionOutputs<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
