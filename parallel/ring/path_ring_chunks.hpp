#pragma once
// Internals shared by the PaTH ring passes (path_ring.cpp, path_ring_backward.cpp): a
// rank's chunks with their folded queries/keys and transitions, the transitions'
// allgather, the carried query, the kernel arguments per chunk pair. Not a public API.
#include <cmath>
#include <vector>

#include "kernels/attention/kokkos/sdpa.hpp"
#include "kernels/schemes/numerics/qk_norm.hpp"
#include "kernels/schemes/path/path.hpp"
#include "kernels/schemes/path/ring.hpp"
#include "kernels/schemes/path/scan.hpp"
#include "parallel/ring/ring_chunks.hpp"

namespace lcr::path_ring_detail {

using namespace ring_detail;

// One chunk this rank holds, with its PaTH quantities (shapes for n rows):
//   q, k [B, n, H|Hkv, d] after QK-RMSNorm; v [B, n, Hkv, dv]; w, beta; fox c [B, n, H];
//   q_fold [B, n, H, d] (to the chunk's left end), k_fold [B, n, Hkv, d] (to its right
//   end), p [B, Hkv, d, d] = H_s ... H_e.
template <class T>
struct PathChunk {
  Chunk ch;
  bool whole = false;
  View4<const T> q, k, v, w;
  View3<const T> beta, fox_q, fox_k;
  View4<T> q_fold, k_fold, p;
};

template <class T>
View4<const T> rms_normed(const View4<const T>& x, const View1<const T>& gain, double eps) {
  View4<T> y("lcr::path_ring_normed", x.layout());
  rms_norm_heads_forward<T>(x, gain, T(eps), y);
  return y;
}

template <class T>
std::vector<PathChunk<T>> prepare_path_chunks(const SeqLayout& layout, int me,
                                              const AttentionSpec& spec,
                                              const AttentionInputs<T>& in,
                                              const ParamSet<T>& params) {
  std::vector<PathChunk<T>> out;
  const bool whole = layout.chunks_of(me).size() == 1;
  const int B = int(in.q.extent(0)), H = spec.heads, Hkv = spec.kv_heads, d = spec.head_dim;
  const int block = spec.path.block_size;
  for (int c : layout.chunks_of(me)) {
    PathChunk<T> pc;
    pc.ch = layout.chunk(c);
    pc.whole = whole;
    const int64_t n = pc.ch.length;
    pc.q = chunk_input(in.q, 1, pc.ch, whole);
    pc.k = chunk_input(in.k, 1, pc.ch, whole);
    if (spec.numerics.qk_norm) {
      pc.q = rms_normed<T>(pc.q, params.v1("qk_norm.q_gain"), spec.numerics.qk_norm_eps);
      pc.k = rms_normed<T>(pc.k, params.v1("qk_norm.k_gain"), spec.numerics.qk_norm_eps);
    }
    pc.v = chunk_input(in.v, 1, pc.ch, whole);
    pc.w = chunk_input(in.path_w, 1, pc.ch, whole);
    pc.beta = chunk_input(in.path_beta, 1, pc.ch, whole);
    if (uses_fox(spec.scheme)) {
      pc.fox_q = chunk_input(in.fox_cq, 1, pc.ch, whole);
      pc.fox_k = chunk_input(in.fox_ck, 1, pc.ch, whole);
    }
    pc.q_fold = View4<T>("lcr::path_q_fold", B, n, H, d);
    pc.k_fold = View4<T>("lcr::path_k_fold", B, n, Hkv, d);
    pc.p = View4<T>("lcr::path_transition", B, Hkv, d, d);
    path::fold_queries_left<T>(pc.w, pc.beta, pc.q, block, pc.q_fold);
    path::fold_keys_right<T>(pc.w, pc.beta, pc.k, block, pc.k_fold);
    path::chunk_transition<T>(pc.w, pc.beta, block, pc.p);
    out.push_back(std::move(pc));
  }
  return out;
}

// Every chunk's transition on every rank: one allgather of each rank's P's (all ranks
// hold the same number of chunks, so the counts agree). Returns P per global chunk;
// `bytes` = what this rank sent (= received from the others) in the exchange.
template <class T>
std::vector<View4<const T>> gather_transitions(Communicator& comm, const SeqLayout& layout,
                                               const std::vector<PathChunk<T>>& chunks,
                                               int64_t& bytes) {
  const auto& p0 = chunks.front().p;
  const int64_t per = int64_t(p0.span()), mine = per * int64_t(chunks.size());
  CommBuffer<T> send(mine, comm.buffer_space()), recv(mine * comm.size(), comm.buffer_space());
  for (size_t i = 0; i < chunks.size(); ++i)
    Kokkos::deep_copy(View1<T>(send.data() + int64_t(i) * per, size_t(per)),
                      View1<const T>(chunks[i].p.data(), size_t(per)));
  send.to_comm(mine);
  comm.allgather(send.comm_data(), recv.comm_data(), size_t(mine));
  recv.from_comm(mine * comm.size());
  std::vector<View4<const T>> p(size_t(layout.num_chunks()));
  for (int r = 0; r < layout.ranks(); ++r) {
    const auto cs = layout.chunks_of(r);
    for (size_t i = 0; i < cs.size(); ++i) {
      View4<T> dst("lcr::path_transition", p0.layout());  // owns its copy of the values
      Kokkos::deep_copy(dst,
                        View4<T>(recv.data() + (int64_t(r) * int64_t(cs.size()) + int64_t(i)) * per,
                                 p0.extent(0), p0.extent(1), p0.extent(2), p0.extent(3)));
      p[size_t(cs[i])] = dst;
    }
  }
  bytes = mine * (comm.size() - 1) * int64_t(sizeof(T));
  return p;
}

template <class T>
void check_path_ring_inputs(const Communicator& comm, const SeqLayout& layout,
                            const AttentionSpec& spec, const AttentionInputs<T>& in,
                            const ParamSet<T>& params) {
  require(is_path(spec.scheme), "path_ring_forward / backward take scheme path or path_fox,",
          " got '", scheme_name(spec.scheme), "' (use ring_attention_forward / backward)");
  check_ring_shards(comm, layout, spec, in, params);
}

// y = P_{b+1} ... P_{a-1} q~_a, multiplied right to left (P_{a-1} first); tmp is scratch
// of y's shape. Returns the view holding the result (q~_a itself when b = a-1).
template <class T>
View4<const T> carry_query(const PathChunk<T>& a, int b, const std::vector<View4<const T>>& p,
                           const View4<T>& y, const View4<T>& tmp) {
  View4<const T> x = a.q_fold;
  View4<T> dst = y, other = tmp;
  for (int m = a.ch.index - 1; m > b; --m) {
    path::apply_transition<T>(p[size_t(m)], x, dst);
    x = dst;
    std::swap(dst, other);
  }
  return x;
}

// The same product keeping every intermediate, for the backward: xs[0] = q~_a (the input
// to P_{a-1}), xs[t] = P_{a-t} xs[t-1], ..., xs.back() = y (the input to the dot product).
template <class T>
std::vector<View4<const T>> carry_chain(const PathChunk<T>& a, int b,
                                        const std::vector<View4<const T>>& p) {
  std::vector<View4<const T>> xs{a.q_fold};
  for (int m = a.ch.index - 1; m > b; --m) {
    View4<T> y("lcr::path_carried_q", a.q_fold.layout());
    path::apply_transition<T>(p[size_t(m)], xs.back(), y);
    xs.push_back(y);
  }
  return xs;
}

template <class T>
path::PathArgs<T> diagonal_args(const AttentionSpec& spec, const PathChunk<T>& a) {
  path::PathArgs<T> pa;
  pa.q = a.q;
  pa.k = a.k;
  pa.v = a.v;
  pa.w = a.w;
  pa.beta = a.beta;
  pa.fox_q = a.fox_q;
  pa.fox_k = a.fox_k;
  pa.scale = T(1.0 / std::sqrt(double(spec.head_dim)));
  pa.softcap = T(spec.numerics.softcap);
  pa.block = spec.path.block_size;
  return pa;
}

// SDPA arguments for visiting key chunk b and local query chunk a > b, given a's carried
// query y: every key precedes every query, so nothing is masked.
template <class T>
SdpaArgs<T> cross_args(const AttentionSpec& spec, const PathChunk<T>& a, const View4<const T>& y,
                       const ChunkFields<const T>& b, int64_t pos_base) {
  SdpaArgs<T> s;
  s.q = y;
  s.k = b.k;
  s.v = b.v;
  s.q_pos0 = pos_base + a.ch.start;
  s.k_pos0 = b.pos0;
  s.scale = T(1.0 / std::sqrt(double(spec.head_dim)));
  s.softcap = T(spec.numerics.softcap);
  if (b.fox.extent(0) > 0) {
    s.bias_q = a.fox_q;
    s.bias_k = b.fox;
  }
  return s;
}

}  // namespace lcr::path_ring_detail
