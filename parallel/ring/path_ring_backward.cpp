// PaTH ring backward (path_ring.hpp). The ring schedule is the dot-product family's
// (ring_backward.cpp): (k~, v [, c_j]) travel again and their gradients follow one step
// behind, arriving home after N hops; what PaTH adds:
//   - per cross pair (a, b < a) the gradient of the carried query y = P_{b+1} ... P_{a-1} q~_a
//     goes back through the chain (left to right), giving dq~_a and dP_m for every chunk m
//     in between; the dP of all chunks are summed over the group (one all-reduce of
//     C x [B, Hkv, d, d]) so each owner gets its chunks' complete dP_c;
//   - the diagonal pair runs the chunk-local PaTH backward;
//   - on the owner, dq~, dk~ and dP_c go through the fold/transition backward into dq, dk,
//     dw, dbeta (then the QK-norm backward).
#include "parallel/ring/merge.hpp"
#include "parallel/ring/path_ring.hpp"
#include "parallel/ring/path_ring_chunks.hpp"

namespace lcr {

using namespace ring_detail;
using namespace path_ring_detail;

template <class T>
RingStats path_ring_backward(Communicator& comm, const SeqLayout& layout, const AttentionSpec& spec,
                             const AttentionInputs<T>& in, const ParamSet<T>& params,
                             const AttentionOutputs<T>& out, const View4<const T>& dout,
                             AttentionGrads<T>& grads) {
  const auto t_start = Clock::now();
  check_path_ring_inputs(comm, layout, spec, in, params);
  require(shape_of(dout) == shape_of(out.o), "dout has shape ", shape_string(shape_of(dout)),
          ", the local output o has ", shape_string(shape_of(out.o)));
  const int N = comm.size(), me = comm.rank();
  const int B = int(in.q.extent(0)), H = spec.heads, Hkv = spec.kv_heads, d = spec.head_dim;
  const int Dv = spec.v_dim(), block = spec.path.block_size;
  const bool fox = uses_fox(spec.scheme);
  RingStats st;
  st.pass = "backward";
  Kokkos::deep_copy(grads.dparams.data, T(0));

  auto chunks = prepare_path_chunks(layout, me, spec, in, params);
  int64_t p_bytes = 0;
  const auto p_all = gather_transitions(comm, layout, chunks, p_bytes);
  const int64_t p_span = int64_t(chunks.front().p.span());
  View1<T> dp_all("lcr::path_dP", size_t(p_span * layout.num_chunks()));  // zero
  auto dp_of = [&](int c) {
    return View4<T>(dp_all.data() + int64_t(c) * p_span, size_t(B), size_t(Hkv), size_t(d),
                    size_t(d));
  };

  // Query side per local chunk: final lse (sink included) and delta = <dO, O>; the
  // diagonal pair's gradients (w.r.t. the normed q, k, and v, w, beta, c) go straight into
  // per-chunk accumulators; cross pairs add dq~ and dc_i.
  struct Side {
    View3<const T> lse;
    View4<const T> dout;
    View3<T> delta, dfq, dfk, dfq_tmp, dbeta;
    View4<T> dq, dk, dv, dw, dq_fold, dy, g, g_next;
  };
  std::vector<Side> sides;
  for (const auto& a : chunks) {
    Side s;
    const int64_t n = a.ch.length;
    const auto o_a = chunk_input(View4<const T>(out.o), 1, a.ch, a.whole);
    s.lse = chunk_input(View3<const T>(out.lse), 2, a.ch, a.whole);
    s.dout = chunk_input(dout, 1, a.ch, a.whole);
    s.delta = View3<T>("lcr::delta", B, H, n);
    sdpa_row_delta<T>(o_a, s.dout, s.delta);
    s.dq = View4<T>("lcr::path_dq", B, n, H, d);
    s.dk = View4<T>("lcr::path_dk", B, n, Hkv, d);
    s.dv = View4<T>("lcr::path_dv", B, n, Hkv, Dv);
    s.dw = View4<T>("lcr::path_dw", B, n, Hkv, d);
    s.dbeta = View3<T>("lcr::path_dbeta", B, n, Hkv);
    s.dq_fold = View4<T>("lcr::path_dq_fold", B, n, H, d);
    s.dy = View4<T>("lcr::path_dy", B, n, H, d);
    s.g = View4<T>("lcr::path_dcarry", B, n, H, d);
    s.g_next = View4<T>("lcr::path_dcarry", B, n, H, d);
    if (fox) {
      s.dfq = View3<T>("lcr::dfox_cq", B, n, H);
      s.dfk = View3<T>("lcr::dfox_ck", B, n, H);
      s.dfq_tmp = View3<T>("lcr::dfox_cq_block", B, n, H);
    }
    path::path_backward<T>(diagonal_args(spec, a), s.lse, s.delta, s.dout, s.dq, s.dk, s.dv, s.dw,
                           s.dbeta, s.dfq, s.dfk);
    sides.push_back(s);
  }

  const RingMessage msg = ring_message(spec, d);
  const auto plans = all_plans(msg, layout, B);
  const int64_t cap = capacity(plans);
  const BufferSpace space = comm.buffer_space();
  CommBuffer<T> cur(cap, space), nxt(N > 1 ? cap : 0, space);
  RingGradBuffers<T> gbuf(cap, space, N);
  for (size_t i = 0; i < chunks.size(); ++i) {
    auto f = chunk_fields<T>(cur.data(), msg, plans[size_t(me)], int(i), layout, 0);
    Kokkos::deep_copy(f.k, chunks[i].k_fold);
    Kokkos::deep_copy(f.v, chunks[i].v);
    if (fox) Kokkos::deep_copy(f.fox, chunks[i].fox_k);
  }
  Kokkos::fence();
  st.prepare_s = seconds_since(t_start);

  auto pair_backward = [&](size_t ai, const ChunkFields<const T>& b, const ChunkFields<T>& gb,
                           const ChunkFields<T>& tb) {
    const PathChunk<T>& a = chunks[ai];
    Side& q = sides[ai];
    if (a.ch.index == b.index) return;  // the diagonal pair ran before the ring
    const auto xs = carry_chain(a, b.index, p_all);
    sdpa_backward<T>(cross_args(spec, a, xs.back(), b, in.q_pos0), q.lse, q.delta, q.dout, q.dy,
                     tb.k, tb.v, q.dfq_tmp, tb.fox);
    // dy back through y = P_{b+1} (... (P_{a-1} q~)): xs[t] is the input of P_{a-1-t}.
    View4<const T> g = q.dy;
    for (int t = int(xs.size()) - 1; t >= 1; --t) {
      const int m = a.ch.index - t;
      Kokkos::deep_copy(q.g_next, T(0));
      path::apply_transition_backward<T>(p_all[size_t(m)], xs[size_t(t - 1)], g, dp_of(m),
                                         q.g_next);
      std::swap(q.g, q.g_next);
      g = q.g;
    }
    accumulate(q.dq_fold.data(), g.data(), int64_t(q.dq_fold.span()));
    if (fox) accumulate(q.dfq.data(), q.dfq_tmp.data(), int64_t(q.dfq.span()));
    accumulate(gb.k.data(), tb.k.data(), int64_t(gb.k.span()));
    accumulate(gb.v.data(), tb.v.data(), int64_t(gb.v.span()));
    if (fox) accumulate(gb.fox.data(), tb.fox.data(), int64_t(gb.fox.span()));
  };
  // p_bytes: the transitions' allgather, counted as step 0's traffic.
  const CommBuffer<T>* home = &ring_backward_steps(comm, layout, msg, plans, cur, nxt, gbuf, chunks,
                                                   in.q_pos0, p_bytes, st, pair_backward);

  // Every rank added dP for the chunks its pairs crossed; the sum is each chunk's dP.
  const auto tr = Clock::now();
  allreduce_view(comm, dp_all);
  st.reduce_s = seconds_since(tr);

  // On the owner: folds and transitions back to q, k, w, beta; values, FoX, sink.
  const auto tp = Clock::now();
  View1<T> dsink_tmp("lcr::dsink_chunk", spec.numerics.has_sink() ? size_t(H) : 0);
  for (size_t ai = 0; ai < chunks.size(); ++ai) {
    const auto& a = chunks[ai];
    Side& q = sides[ai];
    const auto hf = chunk_fields<T>(home->data(), msg, plans[size_t(me)], int(ai), layout, 0);
    path::fold_queries_left_backward<T>(a.w, a.beta, a.q, block, q.dq_fold, q.dq, q.dw, q.dbeta);
    path::fold_keys_right_backward<T>(a.w, a.beta, a.k, block, hf.k, q.dk, q.dw, q.dbeta);
    path::chunk_transition_backward<T>(a.w, a.beta, block, dp_of(a.ch.index), q.dw, q.dbeta);
    accumulate(q.dv.data(), hf.v.data(), int64_t(q.dv.span()));
    auto dq = row_slot(grads.dq, 1, a.ch, a.whole);
    auto dk = row_slot(grads.dk, 1, a.ch, a.whole);
    if (spec.numerics.qk_norm) {
      const T eps = T(spec.numerics.qk_norm_eps);
      rms_norm_heads_backward<T>(chunk_input(in.q, 1, a.ch, a.whole), params.v1("qk_norm.q_gain"),
                                 eps, q.dq, dq.view, grads.dparams.v1("qk_norm.q_gain"));
      rms_norm_heads_backward<T>(chunk_input(in.k, 1, a.ch, a.whole), params.v1("qk_norm.k_gain"),
                                 eps, q.dk, dk.view, grads.dparams.v1("qk_norm.k_gain"));
    } else {
      Kokkos::deep_copy(dq.view, q.dq);
      Kokkos::deep_copy(dk.view, q.dk);
    }
    dq.flush();
    dk.flush();
    // A named lambda, not a range-for over a braced list of pairs: nvcc cannot deduce
    // structured bindings over one (Kokkos CUDA builds compile this file with nvcc).
    auto copy_rows = [&](const auto& dst, const auto& src) {
      auto slot = row_slot(dst, 1, a.ch, a.whole);
      Kokkos::deep_copy(slot.view, src);
      slot.flush();
    };
    copy_rows(grads.dv, q.dv);
    copy_rows(grads.dpath_w, q.dw);
    auto db = row_slot(grads.dpath_beta, 1, a.ch, a.whole);
    Kokkos::deep_copy(db.view, q.dbeta);
    db.flush();
    if (fox) {
      accumulate(q.dfk.data(), hf.fox.data(), int64_t(q.dfk.span()));
      copy_rows(grads.dfox_cq, q.dfq);
      copy_rows(grads.dfox_ck, q.dfk);
    }
    if (spec.numerics.has_sink()) {
      sdpa_sink_backward<T>(params.v1("sink"), q.lse, q.delta, dsink_tmp);
      accumulate(grads.dparams.v1("sink").data(), dsink_tmp.data(), H);
    }
  }
  Kokkos::fence();
  st.prepare_s += seconds_since(tp);

  // Parameters (sink, QK-norm gains) are replicated: sum every rank's share.
  const auto tr2 = Clock::now();
  allreduce_view(comm, grads.dparams.data);
  st.reduce_s += seconds_since(tr2);
  st.total_s = seconds_since(t_start);
  return st;
}

#define LCR_INSTANTIATE(T)                                                              \
  template RingStats path_ring_backward<T>(                                             \
      Communicator&, const SeqLayout&, const AttentionSpec&, const AttentionInputs<T>&, \
      const ParamSet<T>&, const AttentionOutputs<T>&, const View4<const T>&, AttentionGrads<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
