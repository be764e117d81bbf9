#pragma once
// Internals shared by the ring passes (ring_forward.cpp, ring_backward.cpp, and the PaTH
// ring, path_ring*.cpp): a rank's local chunks and their prepared lanes, the packed ring message
// of a key chunk, the per-step exchange and its timing. Not a public API.
#include <algorithm>
#include <vector>

#include "kernels/attention/attention.hpp"
#include "kernels/base/error.hpp"
#include "kernels/base/timer.hpp"
#include "parallel/comm/communicator.hpp"
#include "parallel/ring/buffers.hpp"
#include "parallel/ring/layout.hpp"
#include "parallel/ring/merge.hpp"
#include "parallel/ring/message.hpp"
#include "parallel/ring/shard.hpp"
#include "parallel/ring/stats.hpp"

namespace lcr::ring_detail {

// Tags name the message kind and the step it is consumed at, so a message from the
// wrong step or of the wrong kind is never matched silently (MPI's tag range is at
// least 32767; steps wrap harmlessly since messages between two ranks stay ordered).
inline constexpr int kTagKV = 1, kTagGrad = 2;
inline int ring_tag(int kind, int step) { return kind * 4096 + step % 4096; }

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
inline bool masked(int query_chunk, int key_chunk) { return key_chunk > query_chunk; }

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

// What both rings (this one and the PaTH ring) ask of a rank's inputs: the layout is the
// group's, the local rows are this rank's shard, q and k share the global row 0.
template <class T>
void check_ring_shards(const Communicator& comm, const SeqLayout& layout, const AttentionSpec& spec,
                       const AttentionInputs<T>& in, const ParamSet<T>& params) {
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

template <class T>
void check_ring_inputs(const Communicator& comm, const SeqLayout& layout, const AttentionSpec& spec,
                       const AttentionInputs<T>& in, const ParamSet<T>& params) {
  require(!is_path(spec.scheme),
          "ring_attention_forward / backward take the dot-product family; PaTH / PaTH-FoX have "
          "their own ring (parallel/ring/path_ring.hpp: path_ring_forward / backward)");
  check_ring_shards(comm, layout, spec, in, params);
}

// A ring forward writes o [B, L_local, H, dv] and lse [B, H, L_local].
template <class T>
void check_ring_outputs(const AttentionSpec& spec, const AttentionInputs<T>& in,
                        const AttentionOutputs<T>& out) {
  const int64_t B = in.q.extent(0), Lr = in.q.extent(1), H = spec.heads, Dv = spec.v_dim();
  require(shape_of(out.o) == std::vector<int64_t>{B, Lr, H, Dv} &&
              shape_of(out.lse) == std::vector<int64_t>{B, H, Lr},
          "ring forward outputs must be o [B, L_local, H, dv] and lse [B, H, L_local] (use "
          "make_outputs(spec, local inputs))");
}

// The end of a ring forward: the sink joins each row's softmax denominator once, after all
// key blocks, then each chunk's running (o, lse) goes to the caller's rows.
template <class T>
void finish_ring_forward(const AttentionSpec& spec, const ParamSet<T>& params,
                         std::vector<RowSlot<View4<T>>>& o_acc,
                         std::vector<RowSlot<View3<T>>>& lse_acc) {
  for (size_t ai = 0; ai < o_acc.size(); ++ai) {
    if (spec.numerics.has_sink())
      sdpa_apply_sink<T>(params.v1("sink"), o_acc[ai].view, lse_acc[ai].view);
    o_acc[ai].flush();
    lse_acc[ai].flush();
  }
  Kokkos::fence();
}

inline std::vector<PackedPlan> all_plans(const RingMessage& msg, const SeqLayout& layout,
                                         int batch) {
  std::vector<PackedPlan> plans;
  for (int r = 0; r < layout.ranks(); ++r) plans.push_back(packed_plan(msg, layout, r, batch));
  return plans;
}

inline int64_t capacity(const std::vector<PackedPlan>& plans) {
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

inline void drive_progress(Communicator& comm, std::vector<Request>& reqs) {
  for (auto& r : reqs)
    if (r.pending()) comm.test(r);
}

inline double timed_wait(Communicator& comm, std::vector<Request>& reqs) {
  const auto t0 = Clock::now();
  comm.wait_all(reqs);
  return seconds_since(t0);
}

// The forward step loop of the dot-product and PaTH rings. At step s this rank holds the
// packed key chunks of rank (me - s) mod N in `cur`; the next step's exchange is posted
// before the step's blocks so the transfer overlaps them. For every (visiting chunk b,
// local query chunk chunks[ai]) that causality does not mask, block(ai, b) computes that
// block and merges it. One RingStepStats per step goes to st; first_step_bytes is extra
// traffic of step 0 outside the exchange (PaTH's transition allgather).
template <class T, class C, class Block>
void ring_forward_steps(Communicator& comm, const SeqLayout& layout, const RingMessage& msg,
                        const std::vector<PackedPlan>& plans, CommBuffer<T>& cur,
                        CommBuffer<T>& nxt, const std::vector<C>& chunks, int64_t q_pos0,
                        int64_t first_step_bytes, RingStats& st, Block&& block) {
  const int N = comm.size(), me = comm.rank();
  for (int s = 0; s < N; ++s) {
    RingStepStats ss;
    ss.step = s;
    if (s == 0) ss.bytes_sent = ss.bytes_received = first_step_bytes;
    const int owner = (me - s + N) % N, next_owner = (me - s - 1 + N) % N;
    std::vector<Request> reqs;
    if (s + 1 < N)
      reqs = post_kv_exchange(comm, cur, nxt, plans[size_t(owner)].total,
                              plans[size_t(next_owner)].total, s, ss);
    const auto tc = Clock::now();
    const PackedPlan& plan = plans[size_t(owner)];
    for (int slot = 0; slot < int(plan.chunks.size()); ++slot) {
      const auto b = chunk_fields<const T>(cur.data(), msg, plan, slot, layout, q_pos0);
      for (size_t ai = 0; ai < chunks.size(); ++ai) {
        if (masked(chunks[ai].ch.index, b.index)) {
          ++ss.blocks_skipped;
          continue;
        }
        block(ai, b);
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
}

// The backward's key-side gradient buffers, packed like the K/V message: gpart sums the
// held chunks' gradient of this step, gsend is in flight to the next rank, gin comes from
// the previous one; gtmp is one block's scratch.
template <class T>
struct RingGradBuffers {
  CommBuffer<T> gpart, gsend, gin;
  View1<T> gtmp;
  RingGradBuffers(int64_t cap, BufferSpace space, int N)
      : gpart(cap, space),
        gsend(N > 1 ? cap : 0, space),
        gin(N > 1 ? cap : 0, space),
        gtmp("lcr::ring_grad_block", size_t(cap)) {}
};

// The backward step loop of the dot-product and PaTH rings. K/V travel as in the forward;
// the gradient of the held key chunks (same packing) travels one step behind, summing every
// rank's share, and arrives home after N hops. For every unmasked (visiting chunk b, local
// query chunk chunks[ai]), block(ai, b, gb, tb) runs that block's backward and ADDS its
// key-side gradient into gb (tb: scratch fields of the same chunk). Returns the buffer
// holding this rank's own chunks' summed key-side gradients.
template <class T, class C, class Block>
const CommBuffer<T>& ring_backward_steps(Communicator& comm, const SeqLayout& layout,
                                         const RingMessage& msg,
                                         const std::vector<PackedPlan>& plans, CommBuffer<T>& cur,
                                         CommBuffer<T>& nxt, RingGradBuffers<T>& g,
                                         const std::vector<C>& chunks, int64_t q_pos0,
                                         int64_t first_step_bytes, RingStats& st, Block&& block) {
  const int N = comm.size(), me = comm.rank(), prev = (me - 1 + N) % N, next = (me + 1) % N;
  Request send_req;
  for (int s = 0; s < N; ++s) {
    RingStepStats ss;
    ss.step = s;
    if (s == 0) ss.bytes_sent = ss.bytes_received = first_step_bytes;
    const int owner = (me - s + N) % N, next_owner = (me - s - 1 + N) % N;
    const PackedPlan& plan = plans[size_t(owner)];
    std::vector<Request> reqs;
    if (s + 1 < N)
      reqs = post_kv_exchange(comm, cur, nxt, plan.total, plans[size_t(next_owner)].total, s, ss);
    if (s > 0) {  // the gradient of the block we now hold, accumulated by ranks before us
      reqs.push_back(
          comm.irecv(g.gin.comm_data(), size_t(plan.total), prev, ring_tag(kTagGrad, s)));
      ss.bytes_received += plan.total * int64_t(sizeof(T));
    }

    const auto tc = Clock::now();
    g.gpart.zero(plan.total);
    for (int slot = 0; slot < int(plan.chunks.size()); ++slot) {
      const auto b = chunk_fields<const T>(cur.data(), msg, plan, slot, layout, q_pos0);
      const auto gb = chunk_fields<T>(g.gpart.data(), msg, plan, slot, layout, q_pos0);
      const auto tb = chunk_fields<T>(g.gtmp.data(), msg, plan, slot, layout, q_pos0);
      for (size_t ai = 0; ai < chunks.size(); ++ai) {
        if (masked(chunks[ai].ch.index, b.index)) {
          ++ss.blocks_skipped;
          continue;
        }
        block(ai, b, gb, tb);
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
        g.gin.from_comm(plan.total);
        accumulate(g.gpart.data(), g.gin.data(), plan.total);
      }
      Kokkos::fence();
      ss.compute_s += seconds_since(ta);
      // Pass the accumulated gradient on; the previous step's send used gsend's buffer.
      if (send_req.pending()) {
        const auto tw = Clock::now();
        comm.wait(send_req);
        ss.wait_s += seconds_since(tw);
      }
      g.gpart.swap(g.gsend);
      g.gsend.to_comm(plan.total);
      send_req =
          comm.isend(g.gsend.comm_data(), size_t(plan.total), next, ring_tag(kTagGrad, s + 1));
      ss.bytes_sent += plan.total * int64_t(sizeof(T));
    }
    if (s + 1 < N) {
      nxt.from_comm(plans[size_t(next_owner)].total);
      cur.swap(nxt);
    }
    st.steps.push_back(ss);
  }

  // Our own chunks' gradients come home from the previous rank (after N hops).
  if (N == 1) return g.gpart;
  const int64_t n = plans[size_t(me)].total;
  std::vector<Request> fin;
  fin.push_back(comm.irecv(g.gin.comm_data(), size_t(n), prev, ring_tag(kTagGrad, N)));
  fin.push_back(std::move(send_req));
  st.steps.back().wait_s += timed_wait(comm, fin);
  st.steps.back().bytes_received += n * int64_t(sizeof(T));
  g.gin.from_comm(n);
  return g.gin;
}

template <class T>
int lane_width(const std::vector<LocalChunk<T>>& chunks) {
  return int(chunks.front().p.sdpa.k.extent(3));
}

}  // namespace lcr::ring_detail
