#include "parallel/ring/ring_attention.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "parallel/ring/buffers.hpp"
#include "parallel/ring/merge.hpp"
#include "parallel/ring/message.hpp"
#include "parallel/ring/shard.hpp"

namespace lcr {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Tags name the message kind and the step it is consumed at, so a message from the
// wrong step or of the wrong kind is never matched silently (MPI's tag range is at
// least 32767; steps wrap harmlessly since messages between two ranks stay ordered).
constexpr int kTagKV = 1, kTagGrad = 2;
int ring_tag(int kind, int step) { return kind * 4096 + step % 4096; }

bool uses_fox(Scheme s) { return s == Scheme::FoX || s == Scheme::PaTHFoX; }

// Rows [r0, r0 + n) of a local tensor as a LayoutRight view of their own (the chunk
// kernels need contiguous [B, n, ...] views; a row range of a batched tensor is strided).
template <class V>
typename V::non_const_type take_rows(const V& src, int seq_dim, int64_t r0, int64_t n) {
  using Out = typename V::non_const_type;
  int64_t outer, inner;
  split_extents(src, seq_dim, outer, inner);
  Out out = resized_like<Out>(src, seq_dim, n, "lcr::chunk_rows");
  copy_rows<ExecSpace>(src.data(), int64_t(src.extent(seq_dim)), r0, out.data(), n, 0, outer, n,
                       inner);
  return out;
}

// A chunk's rows of a local input: the tensor itself when the chunk is all of it.
template <class V>
typename V::const_type chunk_input(const V& src, int seq_dim, const Chunk& ch, bool whole) {
  if (whole || src.extent(0) == 0) return src;
  return take_rows(src, seq_dim, ch.local_offset, ch.length);
}

// A chunk's rows of a local output: kernels write `view`; flush() puts the rows in place.
template <class V>
struct RowSlot {
  V view, dst;
  int seq_dim = 1;
  int64_t r0 = 0;
  bool alias = true;
  void flush() const {
    if (alias || dst.extent(0) == 0) return;
    int64_t outer, inner;
    split_extents(dst, seq_dim, outer, inner);
    const int64_t n = int64_t(view.extent(seq_dim));
    copy_rows<ExecSpace>(view.data(), n, 0, dst.data(), int64_t(dst.extent(seq_dim)), r0, outer, n,
                         inner);
  }
};

template <class V>
RowSlot<V> row_slot(const V& dst, int seq_dim, const Chunk& ch, bool whole) {
  RowSlot<V> s;
  s.dst = dst;
  s.seq_dim = seq_dim;
  s.r0 = ch.local_offset;
  s.alias = whole || dst.extent(0) == 0;
  s.view = s.alias ? dst : resized_like<V>(dst, seq_dim, ch.length, "lcr::chunk_out");
  return s;
}

// One chunk this rank holds: its inputs (positions at the chunk's global start) and the
// scheme's lanes for it, computed once and reused for every visiting key chunk.
template <class T>
struct LocalChunk {
  Chunk ch;
  bool whole = false;
  AttentionInputs<T> in;
  PreparedAttention<T> p;
};

template <class T>
std::vector<LocalChunk<T>> prepare_chunks(const SeqLayout& layout, int me,
                                          const AttentionSpec& spec, const AttentionInputs<T>& in,
                                          const ParamSet<T>& params) {
  std::vector<LocalChunk<T>> out;
  const bool whole = layout.chunks_of(me).size() == 1;
  for (int c : layout.chunks_of(me)) {
    LocalChunk<T> lc;
    lc.ch = layout.chunk(c);
    lc.whole = whole;
    lc.in.q = chunk_input(in.q, 1, lc.ch, whole);
    lc.in.k = chunk_input(in.k, 1, lc.ch, whole);
    lc.in.v = chunk_input(in.v, 1, lc.ch, whole);
    lc.in.fox_cq = chunk_input(in.fox_cq, 1, lc.ch, whole);
    lc.in.fox_ck = chunk_input(in.fox_ck, 1, lc.ch, whole);
    lc.in.q_pos0 = lc.in.k_pos0 = in.q_pos0 + lc.ch.start;
    lc.p = prepare_attention(spec, lc.in, params);
    out.push_back(std::move(lc));
  }
  return out;
}

// The fields of one chunk inside a packed ring buffer (k lanes, v, FoX c_j).
template <class T>  // T is const for a visiting chunk, non-const for gradient buffers
struct ChunkFields {
  int index = 0;
  int64_t pos0 = 0;
  View4<T> k, v;
  View3<T> fox;  // [B, rows, H] view of the [B, rows, H, 1] field, or empty
};

template <class T>
ChunkFields<T> chunk_fields(T* base, const RingMessage& msg, const PackedPlan& plan, int slot,
                            const SeqLayout& layout, int64_t pos_base) {
  ChunkFields<T> f;
  f.index = plan.chunks[size_t(slot)];
  f.pos0 = pos_base + layout.chunk(f.index).start;
  f.k = packed_field(base, msg, plan, slot, 0);
  f.v = packed_field(base, msg, plan, slot, 1);
  if (msg.fields.size() > 2) {
    auto x = packed_field(base, msg, plan, slot, 2);
    f.fox = View3<T>(x.data(), x.extent(0), x.extent(1), x.extent(2));
  }
  return f;
}

// SDPA arguments for (local query chunk a, visiting key chunk b): a's query lanes, ALiBi
// slopes, scale, softcap, FoX c_i; b's key lanes, values, FoX c_j and global position.
template <class T>
SdpaArgs<T> pair_args(const LocalChunk<T>& a, const ChunkFields<const T>& b) {
  SdpaArgs<T> s = a.p.sdpa;
  s.k = b.k;
  s.v = b.v;
  s.k_pos0 = b.pos0;
  if (b.fox.extent(0) > 0) s.bias_k = b.fox;
  return s;
}

// Causality skips a pair when every key of chunk b comes after every query of chunk a;
// chunks are in position order, so that is b > a.
bool masked(int query_chunk, int key_chunk) { return key_chunk > query_chunk; }

template <class T>
void pack_own_chunks(const std::vector<LocalChunk<T>>& chunks, const CommBuffer<T>& buf,
                     const RingMessage& msg, const PackedPlan& plan, const SeqLayout& layout) {
  for (size_t i = 0; i < chunks.size(); ++i) {
    auto f = chunk_fields<T>(buf.data(), msg, plan, int(i), layout, 0);
    Kokkos::deep_copy(f.k, chunks[i].p.sdpa.k);
    Kokkos::deep_copy(f.v, chunks[i].p.sdpa.v);
    if (f.fox.extent(0) > 0) Kokkos::deep_copy(f.fox, chunks[i].p.sdpa.bias_k);
  }
}

template <class T>
void check_ring_inputs(const Communicator& comm, const SeqLayout& layout, const AttentionSpec& spec,
                       const AttentionInputs<T>& in, const ParamSet<T>& params) {
  require(spec.scheme != Scheme::PaTH && spec.scheme != Scheme::PaTHFoX,
          "ring attention for PaTH is not built yet (it needs PaTH's block functions in "
          "kernels/schemes/path); run PaTH with a context-parallel size of 1");
  require(layout.ranks() == comm.size(), "the sequence layout is for ", layout.ranks(),
          " ranks but the context-parallel group has ", comm.size());
  check_inputs(spec, in, params);
  const int me = comm.rank();
  const int64_t Lr = layout.local_length(me);
  require(int64_t(in.q.extent(1)) == Lr && int64_t(in.k.extent(1)) == Lr, "rank ", me, " holds ",
          Lr, " positions in ", layout.describe(), " but its local q has ", in.q.extent(1),
          " rows and k ", in.k.extent(1), "; shard the sequence with shard_view");
  require(in.q_pos0 == in.k_pos0,
          "ring attention takes q_pos0 == k_pos0 (the global position "
          "of the full sequence's first row), got ",
          in.q_pos0, " and ", in.k_pos0);
}

std::vector<PackedPlan> all_plans(const RingMessage& msg, const SeqLayout& layout, int batch) {
  std::vector<PackedPlan> plans;
  for (int r = 0; r < layout.ranks(); ++r) plans.push_back(packed_plan(msg, layout, r, batch));
  return plans;
}

int64_t capacity(const std::vector<PackedPlan>& plans) {
  int64_t c = 0;
  for (const auto& p : plans) c = std::max(c, p.total);
  return c;
}

// Posts this step's K/V exchange (send the block we hold to the next rank, receive the
// next block from the previous one) BEFORE the step's compute, so the transfer overlaps it.
template <class T>
std::vector<Request> post_kv_exchange(Communicator& comm, const CommBuffer<T>& cur,
                                      const CommBuffer<T>& nxt, int64_t n_send, int64_t n_recv,
                                      int step, RingStepStats& ss) {
  const int N = comm.size(), me = comm.rank();
  std::vector<Request> reqs;
  cur.to_comm(n_send);
  reqs.push_back(comm.isend(cur.comm_data(), size_t(n_send), (me + 1) % N, ring_tag(kTagKV, step)));
  reqs.push_back(
      comm.irecv(nxt.comm_data(), size_t(n_recv), (me - 1 + N) % N, ring_tag(kTagKV, step)));
  ss.bytes_sent += n_send * int64_t(sizeof(T));
  ss.bytes_received += n_recv * int64_t(sizeof(T));
  return reqs;
}

void drive_progress(Communicator& comm, std::vector<Request>& reqs) {
  for (auto& r : reqs)
    if (r.pending()) comm.test(r);
}

double timed_wait(Communicator& comm, std::vector<Request>& reqs) {
  const auto t0 = Clock::now();
  comm.wait_all(reqs);
  return seconds_since(t0);
}

template <class T>
int lane_width(const std::vector<LocalChunk<T>>& chunks) {
  return int(chunks.front().p.sdpa.k.extent(3));
}

}  // namespace

template <class T>
RingStats ring_attention_forward(Communicator& comm, const SeqLayout& layout,
                                 const AttentionSpec& spec, const AttentionInputs<T>& in,
                                 const ParamSet<T>& params, const AttentionOutputs<T>& out) {
  const auto t_start = Clock::now();
  check_ring_inputs(comm, layout, spec, in, params);
  const int N = comm.size(), me = comm.rank();
  const int B = int(in.q.extent(0)), H = spec.heads, Dv = spec.v_dim();
  require(shape_of(out.o) == std::vector<int64_t>{B, int64_t(in.q.extent(1)), H, Dv} &&
              shape_of(out.lse) == std::vector<int64_t>{B, H, int64_t(in.q.extent(1))},
          "ring forward outputs must be o [B, L_local, H, dv] and lse [B, H, L_local] (use "
          "make_outputs(spec, local inputs))");
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

  for (int s = 0; s < N; ++s) {
    RingStepStats ss;
    ss.step = s;
    const int owner = (me - s + N) % N, next_owner = (me - s - 1 + N) % N;
    std::vector<Request> reqs;
    if (s + 1 < N)
      reqs = post_kv_exchange(comm, cur, nxt, plans[size_t(owner)].total,
                              plans[size_t(next_owner)].total, s, ss);
    const auto tc = Clock::now();
    const PackedPlan& plan = plans[size_t(owner)];
    for (int slot = 0; slot < int(plan.chunks.size()); ++slot) {
      const auto b = chunk_fields<const T>(cur.data(), msg, plan, slot, layout, in.q_pos0);
      for (size_t ai = 0; ai < chunks.size(); ++ai) {
        if (masked(chunks[ai].ch.index, b.index)) {
          ++ss.blocks_skipped;
          continue;
        }
        sdpa_forward(pair_args(chunks[ai], b), o_blk[ai], lse_blk[ai]);
        ring_merge<T>(o_acc[ai].view, lse_acc[ai].view, o_blk[ai], lse_blk[ai]);
        ++ss.blocks_computed;
        drive_progress(comm, reqs);
      }
    }
    Kokkos::fence();
    ss.compute_s = seconds_since(tc);
    ss.wait_s = timed_wait(comm, reqs);
    if (s + 1 < N) {
      nxt.from_comm(plans[size_t(next_owner)].total);
      cur.swap(nxt);
    }
    st.steps.push_back(ss);
  }

  // The sink joins each row's softmax denominator once, after all key blocks.
  for (size_t ai = 0; ai < chunks.size(); ++ai) {
    if (spec.numerics.sink) sdpa_apply_sink<T>(params.v1("sink"), o_acc[ai].view, lse_acc[ai].view);
    o_acc[ai].flush();
    lse_acc[ai].flush();
  }
  Kokkos::fence();
  st.total_s = seconds_since(t_start);
  return st;
}

template <class T>
RingStats ring_attention_backward(Communicator& comm, const SeqLayout& layout,
                                  const AttentionSpec& spec, const AttentionInputs<T>& in,
                                  const ParamSet<T>& params, const AttentionOutputs<T>& out,
                                  const View4<const T>& dout, AttentionGrads<T>& grads) {
  const auto t_start = Clock::now();
  check_ring_inputs(comm, layout, spec, in, params);
  require(shape_of(dout) == shape_of(out.o), "dout has shape ", shape_string(shape_of(dout)),
          ", the local output o has ", shape_string(shape_of(out.o)));
  const int N = comm.size(), me = comm.rank(), prev = (me - 1 + N) % N, next = (me + 1) % N;
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
  CommBuffer<T> gpart(cap, space), gsend(N > 1 ? cap : 0, space), gin(N > 1 ? cap : 0, space);
  View1<T> gtmp("lcr::ring_grad_block", size_t(cap));
  pack_own_chunks(chunks, cur, msg, plans[size_t(me)], layout);
  Request send_req;
  Kokkos::fence();
  st.prepare_s = seconds_since(t_start);

  for (int s = 0; s < N; ++s) {
    RingStepStats ss;
    ss.step = s;
    const int owner = (me - s + N) % N, next_owner = (me - s - 1 + N) % N;
    const PackedPlan& plan = plans[size_t(owner)];
    std::vector<Request> reqs;
    if (s + 1 < N)
      reqs = post_kv_exchange(comm, cur, nxt, plan.total, plans[size_t(next_owner)].total, s, ss);
    if (s > 0) {  // the gradient of the block we now hold, accumulated by ranks before us
      reqs.push_back(comm.irecv(gin.comm_data(), size_t(plan.total), prev, ring_tag(kTagGrad, s)));
      ss.bytes_received += plan.total * int64_t(sizeof(T));
    }

    const auto tc = Clock::now();
    gpart.zero(plan.total);
    for (int slot = 0; slot < int(plan.chunks.size()); ++slot) {
      const auto b = chunk_fields<const T>(cur.data(), msg, plan, slot, layout, in.q_pos0);
      const auto gb = chunk_fields<T>(gpart.data(), msg, plan, slot, layout, in.q_pos0);
      const auto tb = chunk_fields<T>(gtmp.data(), msg, plan, slot, layout, in.q_pos0);
      for (size_t ai = 0; ai < chunks.size(); ++ai) {
        if (masked(chunks[ai].ch.index, b.index)) {
          ++ss.blocks_skipped;
          continue;
        }
        QuerySide& q = qs[ai];
        sdpa_backward<T>(pair_args(chunks[ai], b), q.lse, q.delta, q.dout, q.dq2_tmp, tb.k, tb.v,
                         q.dbq_tmp, tb.fox);
        accumulate(q.dq2.data(), q.dq2_tmp.data(), int64_t(q.dq2.span()));
        if (fox) accumulate(q.dbq.data(), q.dbq_tmp.data(), int64_t(q.dbq.span()));
        accumulate(gb.k.data(), tb.k.data(), int64_t(gb.k.span()));
        accumulate(gb.v.data(), tb.v.data(), int64_t(gb.v.span()));
        if (fox) accumulate(gb.fox.data(), tb.fox.data(), int64_t(gb.fox.span()));
        ++ss.blocks_computed;
        drive_progress(comm, reqs);
      }
    }
    Kokkos::fence();
    ss.compute_s = seconds_since(tc);

    ss.wait_s = timed_wait(comm, reqs);  // K/V for the next step and the incoming gradient
    if (N > 1) {
      const auto ta = Clock::now();
      if (s > 0) {
        gin.from_comm(plan.total);
        accumulate(gpart.data(), gin.data(), plan.total);
      }
      Kokkos::fence();
      ss.compute_s += seconds_since(ta);
      // Pass the accumulated gradient on; the previous step's send used gsend's buffer.
      if (send_req.pending()) {
        const auto tw = Clock::now();
        comm.wait(send_req);
        ss.wait_s += seconds_since(tw);
      }
      gpart.swap(gsend);
      gsend.to_comm(plan.total);
      send_req = comm.isend(gsend.comm_data(), size_t(plan.total), next, ring_tag(kTagGrad, s + 1));
      ss.bytes_sent += plan.total * int64_t(sizeof(T));
    }
    if (s + 1 < N) {
      nxt.from_comm(plans[size_t(next_owner)].total);
      cur.swap(nxt);
    }
    st.steps.push_back(ss);
  }

  // Our own chunks' gradients come home from the previous rank (after N hops).
  const CommBuffer<T>* home = &gpart;
  if (N > 1) {
    const int64_t n = plans[size_t(me)].total;
    std::vector<Request> fin;
    fin.push_back(comm.irecv(gin.comm_data(), size_t(n), prev, ring_tag(kTagGrad, N)));
    fin.push_back(std::move(send_req));
    st.steps.back().wait_s += timed_wait(comm, fin);
    st.steps.back().bytes_received += n * int64_t(sizeof(T));
    gin.from_comm(n);
    home = &gin;
  }

  // Lane gradients -> dq, dk and parameter gradients; values, FoX lanes, sink.
  const auto tp = Clock::now();
  View1<T> dsink_tmp("lcr::dsink_chunk", spec.numerics.sink ? size_t(H) : 0);
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
    if (spec.numerics.sink) {
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

#define LCR_INSTANTIATE(T)                                                                      \
  template RingStats ring_attention_forward<T>(Communicator&, const SeqLayout&,                 \
                                               const AttentionSpec&, const AttentionInputs<T>&, \
                                               const ParamSet<T>&, const AttentionOutputs<T>&); \
  template RingStats ring_attention_backward<T>(                                                \
      Communicator&, const SeqLayout&, const AttentionSpec&, const AttentionInputs<T>&,         \
      const ParamSet<T>&, const AttentionOutputs<T>&, const View4<const T>&, AttentionGrads<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
