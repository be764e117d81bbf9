// GPU ring forward: K/V (+ bias_k) travel the ring on the communicator's stream; each
// step's blocks run on the compute stream while the next chunk is in flight; partial
// (o, lse) merge in fp32 (ring_cuda.hpp).
#include <utility>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "parallel/ring/cuda/ring_state.hpp"

namespace lcr::cuda {

RingStats RingSdpa::forward(const RingSdpaArgs& a, __nv_bfloat16* o, float* lse,
                            cudaStream_t stream, RingPairHook* hook) {
  const auto t0 = Clock::now();
  State& S = *st_;
  S.check(a, hook != nullptr);
  require(o && lse, "GPU ring forward: o and lse must be device pointers, one is null");
  NcclCommunicator& comm = *S.comm;
  const int N = S.N, me = S.me, next = (me + 1) % N, prev = (me - 1 + N) % N;
  LCR_CUDA_CHECK(cudaSetDevice(comm.device()));
  LCR_CUDA_CHECK(cudaEventRecord(S.ev_pass[0], stream));

  // Query side of each local chunk: dense q / bias_q rows (gathered only for B > 1).
  std::vector<const __nv_bfloat16*> qp;
  std::vector<const float*> bqp;
  for (auto& q : S.qc) {
    qp.push_back(
        hook ? nullptr
             : chunk_rows(a.q, int64_t(S.H) * S.D, q.ch, S.one_chunk, S.B, S.Lr, q.q, stream));
    bqp.push_back(a.bias_q
                      ? chunk_rows(a.bias_q, S.H, q.ch, S.one_chunk, S.B, S.Lr, q.bias_q, stream)
                      : nullptr);
  }
  S.pack_own(a, stream);
  std::vector<bool> started(S.qc.size(), false);
  std::vector<RingStepStats> steps(static_cast<size_t>(N));

  for (int s = 0; s < N; ++s) {
    RingStepStats& ss = steps[size_t(s)];
    ss.step = s;
    const int owner = (me - s + N) % N, next_owner = (me - s - 1 + N) % N;
    Request send, recv;
    if (s + 1 < N) {
      // Post the next hop BEFORE this step's blocks so it overlaps them. It starts once
      // the compute stream has packed cur (step 0) and stopped reading nxt (last step).
      comm.after(stream);
      send = comm.isend(S.kv_cur.data(), size_t(S.kv.bytes[size_t(owner)]), DType::U8, next,
                        kv_tag(s));
      recv = comm.irecv(S.kv_nxt.data(), size_t(S.kv.bytes[size_t(next_owner)]), DType::U8, prev,
                        kv_tag(s));
      comm.flush();
      ss.bytes_sent = S.kv.bytes[size_t(owner)];
      ss.bytes_received = S.kv.bytes[size_t(next_owner)];
    }
    const auto& e = S.ev[size_t(s)];
    LCR_CUDA_CHECK(cudaEventRecord(e[0], stream));
    for (const auto& slot : S.kv.slots[size_t(owner)]) {
      for (size_t i = 0; i < S.qc.size(); ++i) {
        auto& q = S.qc[i];
        if (masked(q.ch.index, slot.chunk)) {
          ++ss.blocks_skipped;
          continue;
        }
        // The chunk's first block goes straight into the accumulator.
        float* o_out = started[i] ? q.o_blk.data() : q.o_acc.data();
        float* lse_out = started[i] ? q.lse_blk.data() : q.lse_acc.data();
        if (hook && q.ch.index == slot.chunk) {
          hook->own_block(int(i), o_out, lse_out, stream);
        } else {
          const __nv_bfloat16* qq = hook ? hook->query(int(i), slot.chunk, stream) : qp[i];
          sdpa_forward(S.pair_args(a, q, qq, bqp[i], slot, S.kv_cur.data()), nullptr, o_out,
                       lse_out, stream);
        }
        if (!started[i]) {
          started[i] = true;
        } else {
          partials::merge_partial(q.o_acc.data(), q.lse_acc.data(), q.o_blk.data(),
                                  q.lse_blk.data(), S.B, q.ch.length, S.H, S.Dv, stream);
        }
        ++ss.blocks_computed;
      }
    }
    for (int k = 1; k < 4; ++k) LCR_CUDA_CHECK(cudaEventRecord(e[size_t(k)], stream));
    if (s + 1 < N) {
      comm.wait_on(recv, stream);  // the next step reads nxt
      comm.wait_on(send, stream);
      std::swap(S.kv_cur, S.kv_nxt);
    }
  }
  LCR_CUDA_CHECK(cudaEventRecord(S.ev_pass[1], stream));
  LCR_CUDA_CHECK(cudaEventRecord(S.ev_pass[2], stream));
  // Every chunk sees at least its own diagonal block, so every accumulator started.
  for (size_t i = 0; i < S.qc.size(); ++i) {
    auto& q = S.qc[i];
    partials::finish_forward(q.o_acc.data(), q.lse_acc.data(), a.sink, S.B, q.ch.length, S.H, S.Dv,
                             o, lse, S.Lr, q.ch.local_offset, stream);
  }
  LCR_CUDA_CHECK(cudaEventRecord(S.ev_pass[3], stream));
  return S.collect("forward", std::move(steps), t0);
}

}  // namespace lcr::cuda
