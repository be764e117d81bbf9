// Spec-level GPU ring (ring_attention_cuda.hpp): scheme lanes per local chunk from the CUDA
// attention API, the K/V ring from RingSdpa, lane backward per chunk, parameter gradients
// summed over the ring.
#include "parallel/ring/cuda/ring_attention_cuda.hpp"

#include "kernels/attention/cuda/api/lane_kernels.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/params.hpp"
#include "kernels/base/error.hpp"
#include "parallel/ring/cuda/ring_state.hpp"

namespace lcr::cuda {

struct RingAttention::Impl {
  NcclCommunicator* comm = nullptr;
  SeqLayout layout;
  AttentionSpec spec;
  ParamLayout params;
  int B = 0, qd = 0;
  int64_t Lr = 0;
  std::vector<Chunk> chunks;
  bool one_chunk = true;
  std::vector<std::unique_ptr<Workspace>> ws;  // one per chunk: its lanes live there
  std::unique_ptr<RingSdpa> ring;              // made at the first call (lane width known)
  struct Tmp {                                 // a chunk's rows, gathered when B > 1
    DeviceBuffer<bf16> q, k, v;
    DeviceBuffer<float> cq, ck, dq2, dk2, dq, dk;
  };
  std::vector<Tmp> tmp;
  DeviceBuffer<bf16> q2, k2;  // the local lanes, assembled from the chunks' workspaces
  DeviceBuffer<float> dq2, dk2, dsink, dcq, dck, delta;

  Impl(NcclCommunicator& c, const SeqLayout& l, const AttentionSpec& s)
      : comm(&c), layout(l), spec(s) {}

  bool fox() const { return uses_fox(spec.scheme); }

  AttentionInputs chunk_inputs(const AttentionInputs& in, size_t i, cudaStream_t s) {
    const Chunk& ch = chunks[i];
    const int H = spec.heads, Hkv = spec.kv_heads;
    AttentionInputs c;
    c.B = B;
    c.Lq = c.Lk = int(ch.length);
    c.q_pos0 = c.k_pos0 = in.q_pos0 + ch.start;
    c.q = chunk_rows(in.q, int64_t(H) * qd, ch, one_chunk, B, Lr, tmp[i].q, s);
    c.k = chunk_rows(in.k, int64_t(Hkv) * qd, ch, one_chunk, B, Lr, tmp[i].k, s);
    c.v = chunk_rows(in.v, int64_t(Hkv) * spec.v_dim(), ch, one_chunk, B, Lr, tmp[i].v, s);
    if (in.fox_cq) c.fox_cq = chunk_rows(in.fox_cq, H, ch, one_chunk, B, Lr, tmp[i].cq, s);
    if (in.fox_ck) c.fox_ck = chunk_rows(in.fox_ck, H, ch, one_chunk, B, Lr, tmp[i].ck, s);
    return c;
  }

  // Lanes of every local chunk (global positions), assembled into local [B, Lr, ...] q', k'.
  RingSdpaArgs lanes(const DeviceParams& p, const AttentionInputs& in, cudaStream_t s) {
    check_inputs(spec, in, p);
    require(in.B == B && in.Lq == Lr && in.Lk == Lr, "GPU ring: rank ", comm->rank(), " holds ", Lr,
            " positions of ", layout.describe(), " (B=", B, ") but its inputs have B=", in.B,
            " Lq=", in.Lq, " Lk=", in.Lk, "; shard the sequence with the same layout");
    require(in.q_pos0 == in.k_pos0,
            "GPU ring: q_pos0 must equal k_pos0 (the global position of "
            "the whole sequence's row 0), got ",
            in.q_pos0, " and ", in.k_pos0);
    std::vector<PreparedAttention> P;
    for (size_t i = 0; i < chunks.size(); ++i)
      P.push_back(prepare_attention(spec, p, chunk_inputs(in, i, s), *ws[i], s));
    const SdpaArgs& f = P[0].sdpa;
    const int H = spec.heads, Hkv = spec.kv_heads, D2 = f.D;
    if (!ring)
      ring = std::make_unique<RingSdpa>(*comm, layout, B, H, Hkv, D2, spec.v_dim(), fox(),
                                        spec.numerics.has_sink());
    RingSdpaArgs a;
    a.B = B, a.H = H, a.Hkv = Hkv, a.D = D2, a.Dv = spec.v_dim();
    a.q = f.q, a.k = f.k, a.v = in.v;
    if (!one_chunk) {
      const size_t nq = size_t(B) * size_t(Lr) * H * D2, nk = size_t(B) * size_t(Lr) * Hkv * D2;
      if (q2.size() < nq) q2 = DeviceBuffer<bf16>(nq);
      if (k2.size() < nk) k2 = DeviceBuffer<bf16>(nk);
      for (size_t i = 0; i < chunks.size(); ++i) {
        const Chunk& ch = chunks[i];
        partials::copy_rows(P[i].sdpa.q, ch.length, 0, q2.data(), Lr, ch.local_offset, B, ch.length,
                            int64_t(H) * D2 * 2, s);
        partials::copy_rows(P[i].sdpa.k, ch.length, 0, k2.data(), Lr, ch.local_offset, B, ch.length,
                            int64_t(Hkv) * D2 * 2, s);
      }
      a.q = q2.data(), a.k = k2.data();
    }
    a.pos0 = in.q_pos0;
    a.scale = f.scale, a.softcap = f.softcap, a.alibi_slopes = f.alibi_slopes;
    if (fox()) a.bias_q = in.fox_cq, a.bias_k = in.fox_ck;
    if (spec.numerics.has_sink()) a.sink = p.data + params.at("sink").offset;
    return a;
  }
};

RingAttention::RingAttention(NcclCommunicator& comm, const SeqLayout& layout,
                             const AttentionSpec& spec, int B)
    : impl_(std::make_unique<Impl>(comm, layout, spec)) {
  require(!is_path(spec.scheme),
          "GPU ring: PaTH / PaTH-FoX have their own ring (kernels/attention/cuda/path); "
          "this ring covers the dot-product family");
  require(layout.ranks() == comm.size(), "GPU ring: the sequence layout is for ", layout.ranks(),
          " ranks but the communicator has ", comm.size());
  validate(spec);
  Impl& m = *impl_;
  m.params = attention_param_layout(spec);
  m.B = B;
  m.qd = input_qk_dim(spec);
  m.Lr = layout.local_length(comm.rank());
  for (int c : layout.chunks_of(comm.rank())) m.chunks.push_back(layout.chunk(c));
  m.one_chunk = m.chunks.size() == 1;
  m.tmp.resize(m.chunks.size());
  for (size_t i = 0; i < m.chunks.size(); ++i) m.ws.push_back(std::make_unique<Workspace>());
}

RingAttention::~RingAttention() = default;

RingStats RingAttention::forward(const DeviceParams& params, const AttentionInputs& in,
                                 const AttentionOutputs& out, cudaStream_t stream) {
  require(out.o && out.lse, "GPU ring forward: o and lse must be device buffers");
  LCR_CUDA_CHECK(cudaSetDevice(impl_->comm->device()));
  const RingSdpaArgs a = impl_->lanes(params, in, stream);
  return impl_->ring->forward(a, out.o, out.lse, stream);
}

RingStats RingAttention::backward(const DeviceParams& params, const AttentionInputs& in,
                                  const AttentionOutputs& out, const bf16* dout,
                                  const AttentionGrads& g, cudaStream_t stream) {
  Impl& m = *impl_;
  const int64_t total = m.params.total();
  require(out.o && out.lse && dout && g.dq && g.dk && g.dv && (total == 0 || g.dparams),
          "GPU ring backward: needs the forward's o and lse, dout, and dq, dk, dv (and dparams "
          "when the scheme has parameters) as device buffers");
  LCR_CUDA_CHECK(cudaSetDevice(m.comm->device()));
  const RingSdpaArgs a = m.lanes(params, in, stream);
  const int H = m.spec.heads, Hkv = m.spec.kv_heads, B = m.B;
  const size_t nq = size_t(B) * size_t(m.Lr) * H * a.D, nk = size_t(B) * size_t(m.Lr) * Hkv * a.D;
  if (m.dq2.size() < nq) m.dq2 = DeviceBuffer<float>(nq);
  if (m.dk2.size() < nk) m.dk2 = DeviceBuffer<float>(nk);
  RingSdpaGrads rg;
  rg.dq = m.dq2.data(), rg.dk = m.dk2.data(), rg.dv = g.dv;
  // FoX without softcap: the query lane's gradient over all keys has a closed form
  // (lanes::fox_query_grad, as the single-GPU API), so the ring does not sum it and its pairs
  // take the SDPA's fast bias-lane kernels; with softcap the ring sums it.
  const bool fox_total = m.fox() && m.spec.numerics.softcap == 0;
  const size_t nb = size_t(B) * size_t(m.Lr) * H;
  if (m.fox()) {  // the FoX lanes' gradients are dfox_cq / dfox_ck (scratch when not asked)
    if (!fox_total && !g.dfox_cq && m.dcq.size() < nb) m.dcq = DeviceBuffer<float>(nb);
    if (!g.dfox_ck && m.dck.size() < nb) m.dck = DeviceBuffer<float>(nb);
    rg.dbias_q = fox_total ? nullptr : (g.dfox_cq ? g.dfox_cq : m.dcq.data());
    rg.dbias_k = g.dfox_ck ? g.dfox_ck : m.dck.data();
  }
  if (m.spec.numerics.has_sink()) {
    if (m.dsink.size() < size_t(H)) m.dsink = DeviceBuffer<float>(size_t(H));
    rg.dsink = m.dsink.data();
  }
  RingStats st = m.ring->backward(a, out.o, out.lse, dout, rg, stream);
  if (fox_total && g.dfox_cq) {
    if (m.delta.size() < nb) m.delta = DeviceBuffer<float>(nb);
    sdpa_row_delta(B, int(m.Lr), H, m.spec.v_dim(), out.o, dout, m.delta.data(), stream);
    const float* sink =
        m.spec.numerics.has_sink() ? params.data + m.params.at("sink").offset : nullptr;
    lanes::fox_query_grad(B, int(m.Lr), H, m.delta.data(), out.lse, sink, g.dfox_cq, stream);
  }

  // Lane gradients -> dq, dk and the lane / QK-norm parameter gradients, chunk by chunk.
  const auto t0 = Clock::now();
  if (total > 0) LCR_CUDA_CHECK(cudaMemsetAsync(g.dparams, 0, sizeof(float) * total, stream));
  const bool alias = m.one_chunk || B == 1;
  for (size_t i = 0; i < m.chunks.size(); ++i) {
    const Chunk& ch = m.chunks[i];
    auto& t = m.tmp[i];
    const AttentionInputs ci = m.chunk_inputs(in, i, stream);
    const float* dq2 = chunk_rows<const float>(m.dq2.data(), int64_t(H) * a.D, ch, m.one_chunk, B,
                                               m.Lr, t.dq2, stream);
    const float* dk2 = chunk_rows<const float>(m.dk2.data(), int64_t(Hkv) * a.D, ch, m.one_chunk, B,
                                               m.Lr, t.dk2, stream);
    const int64_t wq = int64_t(H) * m.qd, wk = int64_t(Hkv) * m.qd;
    const size_t rq = size_t(B) * size_t(ch.length) * size_t(wq),
                 rk = size_t(B) * size_t(ch.length) * size_t(wk);
    if (!alias && t.dq.size() < rq) t.dq = DeviceBuffer<float>(rq);
    if (!alias && t.dk.size() < rk) t.dk = DeviceBuffer<float>(rk);
    const int64_t off = m.one_chunk ? 0 : ch.local_offset;
    float* dq = alias ? g.dq + off * wq : t.dq.data();
    float* dk = alias ? g.dk + off * wk : t.dk.data();
    prepared_backward(m.spec, params, ci, dq2, dk2, dq, dk, g.dparams, *m.ws[i], stream);
    if (!alias) {
      partials::copy_rows(dq, ch.length, 0, g.dq, m.Lr, ch.local_offset, B, ch.length, wq * 4,
                          stream);
      partials::copy_rows(dk, ch.length, 0, g.dk, m.Lr, ch.local_offset, B, ch.length, wk * 4,
                          stream);
    }
  }
  // Parameters are replicated: their gradient sums every rank's share. The sink's share
  // was summed by the ring already, so it joins after the sum.
  if (total > 0 && m.comm->size() > 1) {
    m.comm->after(stream);
    m.comm->allreduce_sum_async(g.dparams, size_t(total), DType::F32);
    m.comm->join(stream);
  }
  if (m.spec.numerics.has_sink())
    LCR_CUDA_CHECK(cudaMemcpyAsync(g.dparams + m.params.at("sink").offset, m.dsink.data(),
                                   sizeof(float) * H, cudaMemcpyDeviceToDevice, stream));
  LCR_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double dt = seconds_since(t0);
  st.reduce_s += dt;
  st.total_s += dt;
  return st;
}

}  // namespace lcr::cuda
