// GPU ring backward: K/V travel as in the forward; their fp32 gradients (dK, dV,
// dbias_k, packed like the K/V message) follow one step behind, each rank adding its
// share, and arrive home after N hops. dQ and dbias_q accumulate locally (ring_cuda.hpp).
#include <utility>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "parallel/ring/cuda/ring_state.hpp"

namespace lcr::cuda {
namespace {

// Scatters a chunk's dense [B, rows, W] fp32 rows into rows of a [B, Lr, W] tensor.
void put_rows(const float* src, int64_t W, const Chunk& ch, int B, int64_t Lr, float* dst,
              cudaStream_t s) {
  partials::copy_rows(src, ch.length, 0, dst, Lr, ch.local_offset, B, ch.length,
                      W * int64_t(sizeof(float)), s);
}

}  // namespace

RingStats RingSdpa::backward(const RingSdpaArgs& a, const __nv_bfloat16* o, const float* lse,
                             const __nv_bfloat16* dout, const RingSdpaGrads& g, cudaStream_t stream,
                             RingPairHook* hook) {
  const auto t0 = Clock::now();
  State& S = *st_;
  S.check(a, hook != nullptr);
  require(o && lse && dout, "GPU ring backward: o, lse and dout must be device pointers");
  require((g.dq || hook) && g.dk && g.dv && (!S.bias || g.dbias_k) && (!S.sink || g.dsink),
          "GPU ring backward: dq, dk, dv are required, and dbias_k with bias lanes, dsink with a "
          "sink");
  const bool dbq = S.bias && g.dbias_q;  // the query lane's gradient, when asked for
  NcclCommunicator& comm = *S.comm;
  const int N = S.N, me = S.me, next = (me + 1) % N, prev = (me - 1 + N) % N;
  const int B = S.B, H = S.H;
  const bool alias = S.one_chunk || B == 1;  // a chunk's [B, rows, ...] rows are in place
  // With a hook each pair's dq goes to a scratch buffer that the hook consumes.
  const bool dq_alias = alias && !hook;
  LCR_CUDA_CHECK(cudaSetDevice(comm.device()));
  if (S.g_part[0].size() < size_t(S.grad.capacity)) {
    for (auto& b : S.g_part) b = DeviceBuffer<uint8_t>(size_t(S.grad.capacity));
    if (N > 1) S.g_in = DeviceBuffer<uint8_t>(size_t(S.grad.capacity));
  }
  LCR_CUDA_CHECK(cudaEventRecord(S.ev_pass[0], stream));

  // Query side: dense rows, delta = <dO, O> (exact with the final lse), zeroed dq / dbq.
  struct Side {
    const __nv_bfloat16 *q, *dout;
    const float *bq, *lse;
    float *dq, *dbq;
  };
  std::vector<Side> qs;
  for (auto& q : S.qc) {
    Side x{};
    const int64_t rows = q.ch.length;
    x.q =
        hook ? nullptr : chunk_rows(a.q, int64_t(H) * S.D, q.ch, S.one_chunk, B, S.Lr, q.q, stream);
    x.bq =
        a.bias_q ? chunk_rows(a.bias_q, H, q.ch, S.one_chunk, B, S.Lr, q.bias_q, stream) : nullptr;
    x.dout = chunk_rows(dout, int64_t(H) * S.Dv, q.ch, S.one_chunk, B, S.Lr, q.dout, stream);
    const __nv_bfloat16* op =
        chunk_rows(o, int64_t(H) * S.Dv, q.ch, S.one_chunk, B, S.Lr, q.o, stream);
    // lse [B, H, Lr]: the sequence axis is the last one (outer B H, one float per row).
    x.lse = S.one_chunk ? lse : chunk_rows(lse, 1, q.ch, false, B * H, S.Lr, q.lse, stream);
    if (q.delta.size() < size_t(B) * H * rows) q.delta = DeviceBuffer<float>(size_t(B) * H * rows);
    sdpa_row_delta(B, int(rows), H, S.Dv, op, x.dout, q.delta.data(), stream);
    const size_t nq = size_t(B) * rows * H * S.D, nb = size_t(B) * rows * H;
    if (!dq_alias && q.dq.size() < nq) q.dq = DeviceBuffer<float>(nq);
    if (!alias && dbq && q.dbq.size() < nb) q.dbq = DeviceBuffer<float>(nb);
    x.dq = dq_alias ? g.dq + (S.one_chunk ? 0 : q.ch.local_offset * H * S.D) : q.dq.data();
    x.dbq = !dbq    ? nullptr
            : alias ? g.dbias_q + (S.one_chunk ? 0 : q.ch.local_offset * H)
                    : q.dbq.data();
    LCR_CUDA_CHECK(cudaMemsetAsync(x.dq, 0, nq * sizeof(float), stream));
    if (x.dbq) LCR_CUDA_CHECK(cudaMemsetAsync(x.dbq, 0, nb * sizeof(float), stream));
    qs.push_back(x);
  }
  S.pack_own(a, stream);
  std::vector<RingStepStats> steps(static_cast<size_t>(N));
  Request grad_send, grad_send_old;  // the last two gradient sends (double-buffered)
  uint8_t* home = S.g_part[0].data();

  for (int s = 0; s < N; ++s) {
    RingStepStats& ss = steps[size_t(s)];
    ss.step = s;
    const int owner = (me - s + N) % N, next_owner = (me - s - 1 + N) % N;
    const int64_t gbytes = S.grad.bytes[size_t(owner)];
    Request grad_recv, send, recv;
    // Posting order per channel matches the peer's: its gradient send (end of its last
    // step) comes before its K/V send, so the gradient receive is posted first.
    if (s > 0) {
      grad_recv = comm.irecv(S.g_in.data(), size_t(gbytes), DType::U8, prev, grad_tag(s));
      ss.bytes_received += gbytes;
    }
    if (s + 1 < N) {
      send = comm.isend(S.kv_cur.data(), size_t(S.kv.bytes[size_t(owner)]), DType::U8, next,
                        kv_tag(s));
      recv = comm.irecv(S.kv_nxt.data(), size_t(S.kv.bytes[size_t(next_owner)]), DType::U8, prev,
                        kv_tag(s));
      ss.bytes_sent += S.kv.bytes[size_t(owner)];
      ss.bytes_received += S.kv.bytes[size_t(next_owner)];
    }
    comm.after(stream);  // packed K/V, last step's gradient sum, and nxt / g_in free again
    comm.flush();

    const auto& e = S.ev[size_t(s)];
    LCR_CUDA_CHECK(cudaEventRecord(e[0], stream));
    // This step's gradient buffer was sent two steps ago: that send must be done.
    if (grad_send_old.pending()) comm.wait_on(grad_send_old, stream);
    uint8_t* gp = S.g_part[s % 2].data();
    LCR_CUDA_CHECK(cudaMemsetAsync(gp, 0, size_t(gbytes), stream));
    for (const auto& slot : S.kv.slots[size_t(owner)]) {
      const auto& gs = S.grad.slots[size_t(owner)][&slot - S.kv.slots[size_t(owner)].data()];
      for (size_t i = 0; i < S.qc.size(); ++i) {
        const auto& q = S.qc[i];
        if (masked(q.ch.index, slot.chunk) || (hook && q.ch.index == slot.chunk)) {
          ++ss.blocks_skipped;  // (own blocks under a hook: its owner's job)
          continue;
        }
        const __nv_bfloat16* qq = hook ? hook->query(int(i), slot.chunk, stream) : qs[i].q;
        if (hook)
          LCR_CUDA_CHECK(cudaMemsetAsync(
              qs[i].dq, 0, size_t(B) * q.ch.length * H * S.D * sizeof(float), stream));
        const SdpaArgs args = S.pair_args(a, q, qq, qs[i].bq, slot, S.kv_cur.data());
        sdpa_backward(args, qs[i].lse, q.delta.data(), qs[i].dout, qs[i].dq,
                      reinterpret_cast<float*>(gp + gs.off[0]),
                      reinterpret_cast<float*>(gp + gs.off[1]), qs[i].dbq,
                      S.bias ? reinterpret_cast<float*>(gp + gs.off[2]) : nullptr,
                      /*accumulate=*/true, stream);
        if (hook) hook->query_grad(int(i), slot.chunk, qs[i].dq, stream);
        ++ss.blocks_computed;
      }
    }
    LCR_CUDA_CHECK(cudaEventRecord(e[1], stream));
    if (s > 0) comm.wait_on(grad_recv, stream);  // what the ranks before us added
    LCR_CUDA_CHECK(cudaEventRecord(e[2], stream));
    if (s > 0)
      partials::add_inplace(reinterpret_cast<float*>(gp),
                            reinterpret_cast<const float*>(S.g_in.data()),
                            gbytes / int64_t(sizeof(float)), stream);
    LCR_CUDA_CHECK(cudaEventRecord(e[3], stream));
    home = gp;
    if (N > 1) {  // pass the sum on (issued with the next step's group, after this step)
      grad_send_old = std::move(grad_send);
      grad_send = comm.isend(gp, size_t(gbytes), DType::U8, next, grad_tag(s + 1));
      ss.bytes_sent += gbytes;
    }
    if (s + 1 < N) {
      comm.wait_on(recv, stream);
      comm.wait_on(send, stream);
      std::swap(S.kv_cur, S.kv_nxt);
    }
  }

  LCR_CUDA_CHECK(cudaEventRecord(S.ev_pass[1], stream));
  if (N > 1) {  // our own chunks' gradients come home from the previous rank
    const int64_t n = S.grad.bytes[size_t(me)];
    Request r = comm.irecv(S.g_in.data(), size_t(n), DType::U8, prev, grad_tag(N));
    steps.back().bytes_received += n;
    comm.after(stream);
    comm.flush();
    comm.wait_on(r, stream);
    comm.wait_on(grad_send, stream);
    if (grad_send_old.pending()) comm.wait_on(grad_send_old, stream);
    home = S.g_in.data();
  }
  LCR_CUDA_CHECK(cudaEventRecord(S.ev_pass[2], stream));

  const auto& own = S.grad.slots[size_t(me)];
  for (size_t i = 0; i < S.qc.size(); ++i) {
    const Chunk& ch = S.qc[i].ch;
    put_rows(reinterpret_cast<const float*>(home + own[i].off[0]), int64_t(S.Hkv) * S.D, ch, B,
             S.Lr, g.dk, stream);
    put_rows(reinterpret_cast<const float*>(home + own[i].off[1]), int64_t(S.Hkv) * S.Dv, ch, B,
             S.Lr, g.dv, stream);
    if (S.bias) {
      put_rows(reinterpret_cast<const float*>(home + own[i].off[2]), H, ch, B, S.Lr, g.dbias_k,
               stream);
      if (!alias && dbq) put_rows(qs[i].dbq, H, ch, B, S.Lr, g.dbias_q, stream);
    }
    if (!dq_alias && !hook) put_rows(qs[i].dq, int64_t(H) * S.D, ch, B, S.Lr, g.dq, stream);
    if (S.sink)
      partials::sink_backward(a.sink, qs[i].lse, S.qc[i].delta.data(), B, H, ch.length, g.dsink,
                              /*accumulate=*/i > 0, stream);
  }
  if (S.sink && N > 1) {  // the sink is replicated: its gradient sums every rank's rows
    comm.after(stream);
    comm.allreduce_sum_async(g.dsink, size_t(H), DType::F32);
    comm.join(stream);
  }
  LCR_CUDA_CHECK(cudaEventRecord(S.ev_pass[3], stream));
  return S.collect("backward", std::move(steps), t0);
}

}  // namespace lcr::cuda
