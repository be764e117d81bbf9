#pragma once
// Context-parallel ring attention on GPUs for the dot-product family (NoPE, ALiBi,
// softcap, GQA, FoX bias lanes, sink; RoPE/GOAT/PoPE once their lanes have been applied),
// over the NCCL communicator, with the CUDA SDPA kernel (kernels/attention/cuda/sdpa.hpp)
// computing every (query chunk, key chunk) block. docs/cuda.md, section "NCCL ring".
//
// Each rank holds its chunks of the sequence in `layout` (parallel/ring/layout.hpp: rank
// r's chunks concatenated in chunk order). The scheme lanes are computed locally per rank
// with GLOBAL positions BEFORE the ring, so the ring only sees (q', k', v, bias lanes):
//
//   forward:  K/V (+ bias_k) of the chunks travel the ring on the communicator's stream
//             while the blocks of the chunk in hand run on the compute stream (the next
//             transfer is posted before the current block is computed; events order
//             them). Partial (o, lse) of each block merge in fp32 with a stable
//             log-sum-exp merge; blocks that causality masks entirely are skipped.
//   backward: K/V travel again; their fp32 gradients (dK, dV, dbias_k) follow one step
//             behind, summing every rank's share, and arrive home after N hops. dQ stays.
//
// The result equals the single-GPU sdpa_forward / sdpa_backward on the whole sequence up
// to the order of fp32 accumulation and the bf16 rounding of the softmax weights
// (tests/cuda/nccl documents the tolerance).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <memory>

#include "parallel/comm/nccl/nccl_communicator.hpp"
#include "parallel/ring/layout.hpp"
#include "parallel/ring/stats.hpp"

namespace lcr::cuda {

// One rank's LOCAL tensors (Lr = layout.local_length(rank) rows), all device memory.
struct RingSdpaArgs {
  int B = 0, H = 0, Hkv = 0, D = 0, Dv = 0;
  const __nv_bfloat16* q = nullptr;  // [B, Lr, H, D]    query lanes (global positions)
  const __nv_bfloat16* k = nullptr;  // [B, Lr, Hkv, D]  key lanes
  const __nv_bfloat16* v = nullptr;  // [B, Lr, Hkv, Dv]
  int64_t pos0 = 0;                  // global position of the whole sequence's row 0
  float scale = 1.f, softcap = 0.f;
  const float* alibi_slopes = nullptr;  // [H] or null
  const float* bias_q = nullptr;        // [B, Lr, H] or null (FoX: global cumulative log gates)
  const float* bias_k = nullptr;        // [B, Lr, H] or null; both or neither
  const float* sink = nullptr;          // [H] learned sink logits or null
};

// Gradients of one rank's local tensors; fp32, device memory, OVERWRITTEN.
struct RingSdpaGrads {
  float* dq = nullptr;       // [B, Lr, H, D]
  float* dk = nullptr;       // [B, Lr, Hkv, D]
  float* dv = nullptr;       // [B, Lr, Hkv, Dv]
  float* dbias_q = nullptr;  // [B, Lr, H] or null: then not computed (FoX without softcap:
                             // the caller's closed form, lanes::fox_query_grad)
  float* dbias_k = nullptr;  // [B, Lr, H], required iff bias_k is given
  float* dsink = nullptr;    // [H], required iff sink is given; summed over the ring's ranks
};

// For a scheme whose blocks across chunks are plain dot products with a query that depends
// on the (query chunk, key chunk) pair, and whose own-chunk block is another kernel (PaTH:
// path_ring_cuda.hpp). RingSdpa calls it on the compute stream, in ring order; `slot` is the
// local chunk's index among this rank's chunks, `key_chunk` the visiting chunk's global
// index (never the slot's own chunk for query / query_grad).
class RingPairHook {
 public:
  virtual ~RingPairHook() = default;
  // The query lanes [B, rows, H, D] bf16 of the pair (forward and backward).
  virtual const __nv_bfloat16* query(int slot, int key_chunk, cudaStream_t s) = 0;
  // Forward: the own block's partial result, o [B, rows, H, Dv] fp32 and lse [B, H, rows].
  virtual void own_block(int slot, float* o, float* lse, cudaStream_t s) = 0;
  // Backward: the gradient [B, rows, H, D] fp32 of the pair's query (valid during the call).
  virtual void query_grad(int slot, int key_chunk, const float* dq, cudaStream_t s) = 0;
};

// A ring for one problem shape: owns the message buffers, per-chunk accumulators, and the
// timing events, so repeated calls (training steps, benchmark iterations) allocate nothing.
class RingSdpa {
 public:
  // Collective over comm. Errors: a layout for another rank count, bad dimensions.
  RingSdpa(NcclCommunicator& comm, const SeqLayout& layout, int B, int H, int Hkv, int D, int Dv,
           bool bias, bool sink);
  ~RingSdpa();
  RingSdpa(const RingSdpa&) = delete;
  RingSdpa& operator=(const RingSdpa&) = delete;

  // o [B, Lr, H, Dv] bf16, lse [B, H, Lr] fp32 (sink included). The work runs after what
  // is queued on `stream` and on it (transfers on the communicator's stream); the call
  // returns once it has finished, with the per-step compute / wait times of the GPU.
  // With a hook, a.q is not read (may be null) and own blocks come from the hook.
  RingStats forward(const RingSdpaArgs& a, __nv_bfloat16* o, float* lse, cudaStream_t stream,
                    RingPairHook* hook = nullptr);

  // Given this rank's forward o, lse and the output gradient dout [B, Lr, H, Dv] bf16. With a
  // hook, own blocks are skipped (the hook's owner differentiates them), the queries'
  // gradients go to hook->query_grad and g.dq is not written (may be null).
  RingStats backward(const RingSdpaArgs& a, const __nv_bfloat16* o, const float* lse,
                     const __nv_bfloat16* dout, const RingSdpaGrads& g, cudaStream_t stream,
                     RingPairHook* hook = nullptr);

  struct State;  // buffers and plans (ring_cuda.cpp)

 private:
  std::unique_ptr<State> st_;
};

}  // namespace lcr::cuda
