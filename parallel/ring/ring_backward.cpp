// Ring backward: K/V lanes travel again, their gradients follow one step behind and
// return to their owners; dQ stays local (docs/ring.md).
#include "parallel/ring/merge.hpp"
#include "parallel/ring/ring_attention.hpp"
#include "parallel/ring/ring_chunks.hpp"

namespace lcr {

using namespace ring_detail;

template <class T>
RingStats ring_attention_backward(Communicator& comm, const SeqLayout& layout,
                                  const AttentionSpec& spec, const AttentionInputs<T>& in,
                                  const ParamSet<T>& params, const AttentionOutputs<T>& out,
                                  const View4<const T>& dout, AttentionGrads<T>& grads) {
  const auto t_start = Clock::now();
  check_ring_inputs(comm, layout, spec, in, params);
  require(shape_of(dout) == shape_of(out.o), "dout has shape ", shape_string(shape_of(dout)),
          ", the local output o has ", shape_string(shape_of(out.o)));
  const int N = comm.size(), me = comm.rank();
  const int B = int(in.q.extent(0)), H = spec.heads;
  const bool fox = uses_fox(spec.scheme);
  RingStats st;
  st.pass = "backward";
  Kokkos::deep_copy(grads.dparams.data, T(0));

  // Query side, local to each chunk: final lse (sink included) and delta = <dO, O> (the
  // block-wise backward is exact with these), accumulators for dq lanes and dFoX c_i.
  struct QuerySide {
    View3<const T> lse;
    View4<const T> dout;
    View3<T> delta, dbq, dbq_tmp;
    View4<T> dq2, dq2_tmp;
  };
  auto chunks = prepare_chunks(layout, me, spec, in, params);
  std::vector<QuerySide> qs;
  for (const auto& a : chunks) {
    QuerySide q;
    const auto o_a = chunk_input(View4<const T>(out.o), 1, a.ch, a.whole);
    q.lse = chunk_input(View3<const T>(out.lse), 2, a.ch, a.whole);
    q.dout = chunk_input(dout, 1, a.ch, a.whole);
    q.delta = View3<T>("lcr::delta", B, H, a.ch.length);
    sdpa_row_delta<T>(o_a, q.dout, q.delta);
    const auto& ql = a.p.sdpa.q;
    q.dq2 = View4<T>("lcr::dq_lanes", B, ql.extent(1), ql.extent(2), ql.extent(3));
    q.dq2_tmp = View4<T>("lcr::dq_lanes_block", B, ql.extent(1), ql.extent(2), ql.extent(3));
    if (fox) {
      q.dbq = View3<T>("lcr::dfox_cq", B, a.ch.length, H);
      q.dbq_tmp = View3<T>("lcr::dfox_cq_block", B, a.ch.length, H);
    }
    qs.push_back(q);
  }

  // Key side: the K/V message travels as in the forward; its gradient (same packing)
  // travels one step behind, accumulating every rank's contribution, and arrives home
  // after N hops.
  const RingMessage msg = ring_message(spec, lane_width(chunks));
  const auto plans = all_plans(msg, layout, B);
  const int64_t cap = capacity(plans);
  const BufferSpace space = comm.buffer_space();
  CommBuffer<T> cur(cap, space), nxt(N > 1 ? cap : 0, space);
  RingGradBuffers<T> gbuf(cap, space, N);
  pack_own_chunks(chunks, cur, msg, plans[size_t(me)], layout);
  Kokkos::fence();
  st.prepare_s = seconds_since(t_start);

  auto pair_backward = [&](size_t ai, const ChunkFields<const T>& b, const ChunkFields<T>& gb,
                           const ChunkFields<T>& tb) {
    QuerySide& q = qs[ai];
    sdpa_backward<T>(pair_args(chunks[ai], b), q.lse, q.delta, q.dout, q.dq2_tmp, tb.k, tb.v,
                     q.dbq_tmp, tb.fox);
    accumulate(q.dq2.data(), q.dq2_tmp.data(), int64_t(q.dq2.span()));
    if (fox) accumulate(q.dbq.data(), q.dbq_tmp.data(), int64_t(q.dbq.span()));
    accumulate(gb.k.data(), tb.k.data(), int64_t(gb.k.span()));
    accumulate(gb.v.data(), tb.v.data(), int64_t(gb.v.span()));
    if (fox) accumulate(gb.fox.data(), tb.fox.data(), int64_t(gb.fox.span()));
  };
  const CommBuffer<T>* home = &ring_backward_steps(comm, layout, msg, plans, cur, nxt, gbuf, chunks,
                                                   in.q_pos0, 0, st, pair_backward);

  // Lane gradients -> dq, dk and parameter gradients; values, FoX lanes, sink.
  const auto tp = Clock::now();
  View1<T> dsink_tmp("lcr::dsink_chunk", spec.numerics.has_sink() ? size_t(H) : 0);
  for (size_t ai = 0; ai < chunks.size(); ++ai) {
    const auto& a = chunks[ai];
    const auto hf = chunk_fields<T>(home->data(), msg, plans[size_t(me)], int(ai), layout, 0);
    auto dq = row_slot(grads.dq, 1, a.ch, a.whole);
    auto dk = row_slot(grads.dk, 1, a.ch, a.whole);
    prepared_backward<T>(spec, a.in, params, a.p, qs[ai].dq2, hf.k, dq.view, dk.view,
                         grads.dparams);
    dq.flush();
    dk.flush();
    auto dv = row_slot(grads.dv, 1, a.ch, a.whole);
    Kokkos::deep_copy(dv.view, hf.v);
    dv.flush();
    if (fox) {
      auto dcq = row_slot(grads.dfox_cq, 1, a.ch, a.whole);
      auto dck = row_slot(grads.dfox_ck, 1, a.ch, a.whole);
      Kokkos::deep_copy(dcq.view, qs[ai].dbq);
      Kokkos::deep_copy(dck.view, hf.fox);
      dcq.flush();
      dck.flush();
    }
    if (spec.numerics.has_sink()) {
      sdpa_sink_backward<T>(params.v1("sink"), qs[ai].lse, qs[ai].delta, dsink_tmp);
      accumulate(grads.dparams.v1("sink").data(), dsink_tmp.data(), H);
    }
  }
  Kokkos::fence();
  st.prepare_s += seconds_since(tp);

  // Parameters are replicated over the CP group: their gradient is the sum of every
  // rank's share (query lanes from its queries, key lanes from its keys, sink, QK-norm).
  const auto tr = Clock::now();
  allreduce_view(comm, grads.dparams.data);
  st.reduce_s = seconds_since(tr);
  st.total_s = seconds_since(t_start);
  return st;
}

#define LCR_INSTANTIATE(T)                                                              \
  template RingStats ring_attention_backward<T>(                                        \
      Communicator&, const SeqLayout&, const AttentionSpec&, const AttentionInputs<T>&, \
      const ParamSet<T>&, const AttentionOutputs<T>&, const View4<const T>&, AttentionGrads<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
