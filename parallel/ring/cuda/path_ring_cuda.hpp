#pragma once
// Context-parallel ring attention for PaTH and PaTH-FoX on GPUs over NCCL: the GPU twin of
// parallel/ring/path_ring.hpp (DESIGN.md section 5, docs/cuda.md "PaTH on the ring"); the
// same result as one GPU's cuda::path::forward / backward on the whole sequence up to bf16
// rounding.
//
// Per local chunk a (this rank's chunks in `layout`, global positions s_a..e_a):
//   - the chunk-local PaTH kernel gives a's own block (o, lse) and, in the same call, its
//     boundary folds (kernels/attention/cuda/path/path.hpp, Folds): q~ (queries folded to the
//     chunk's left end, fp32), k~ (keys folded to its right end, bf16) and P_a = H_s ... H_e;
//   - every chunk's P reaches every rank through one all-reduce of a zero-padded array;
//   - (k~, v [, FoX c_j]) travel the ring like ordinary K/V (RingSdpa, with a pair hook): a
//     visiting chunk b < a meets the carried query y = P_{b+1} ... P_{a-1} q~_a in the SDPA
//     kernel, nothing masked (every key precedes every query), and the partial (o, lse) merge
//     as for every scheme.
// Backward: each pair's query gradient runs back through the carry (into dq~_a and dM_ab),
// dk~ / dv / dc_j come home on the ring, the M chains give every chunk's dP (summed over ranks
// by one all-reduce), and the chunk-local PaTH backward takes dout with (dq~, dk~, dP_a) and
// returns dq, dk, dv, dw, dbeta and the FoX lanes.
//
// Tensors are this rank's LOCAL rows (Lr = layout.local_length(rank)), device memory.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <memory>

#include "kernels/attention/cuda/device_buffer.hpp"
#include "parallel/comm/nccl/nccl_communicator.hpp"
#include "parallel/ring/layout.hpp"
#include "parallel/ring/stats.hpp"

namespace lcr::cuda {

struct PathRingArgs {
  int B = 0, H = 0, Hkv = 0, D = 0;  // D = 64 or 128 (the CUDA PaTH kernels)
  const __nv_bfloat16* q = nullptr;  // [B, Lr, H, D]
  const __nv_bfloat16* k = nullptr;  // [B, Lr, Hkv, D]
  const __nv_bfloat16* v = nullptr;  // [B, Lr, Hkv, D]
  const float* w = nullptr;          // [B, Lr, Hkv, D] unit rows
  const float* beta = nullptr;       // [B, Lr, Hkv] in [0, 2)
  const float* fox_q = nullptr;      // [B, Lr, H] GLOBAL cumulative log gates (PaTH-FoX) or null
  const float* fox_k = nullptr;      // [B, Lr, H]; both or neither
  float scale = 0.f;                 // 0: 1 / sqrt(D)
  float softcap = 0.f;
};

// fp32 gradients of the local rows, OVERWRITTEN; dfox_q / dfox_k exactly for PaTH-FoX.
struct PathRingGrads {
  float *dq = nullptr, *dk = nullptr, *dv = nullptr, *dw = nullptr, *dbeta = nullptr;
  float *dfox_q = nullptr, *dfox_k = nullptr;
};

// The split (parallel/ring/layout.hpp) for the PaTH ring over `layout`'s chunks at head
// width D: pieces of about 8192 positions at D = 64 and 16384 at D = 128 (at least one per
// chunk), so more of the work runs as plain dot products on the SDPA kernel. The sizes are
// the fastest of 1, 2 and 4 pieces per chunk on two GPUs at 128K tokens (32K chunks,
// docs/cuda.md "PaTH on the GPU ring"): 4 at D = 64, 2 at D = 128.
int path_ring_split(const SeqLayout& layout, int D);

class PathRing {
 public:
  // Collective over comm. Errors: a layout for another rank count, D not 64 or 128.
  // `workspace`: the chunk-local PaTH kernels' scratch, shareable between rings that never
  // run at the same time (a model's layers); grown as needed. Null: the ring's own.
  PathRing(NcclCommunicator& comm, const SeqLayout& layout, int B, int H, int Hkv, int D, bool fox,
           std::shared_ptr<DeviceBuffer<unsigned char>> workspace = nullptr);
  ~PathRing();
  PathRing(const PathRing&) = delete;
  PathRing& operator=(const PathRing&) = delete;

  // o [B, Lr, H, D] bf16, lse [B, H, Lr] fp32. Work ordered after `stream`, returns when done.
  RingStats forward(const PathRingArgs& a, __nv_bfloat16* o, float* lse, cudaStream_t stream);

  // Uses the folds of the last forward(), which must have had the same inputs (checked by
  // pointer); o, lse: that forward's outputs; dout [B, Lr, H, D] bf16.
  RingStats backward(const PathRingArgs& a, const __nv_bfloat16* o, const float* lse,
                     const __nv_bfloat16* dout, const PathRingGrads& g, cudaStream_t stream);

  struct State;

 private:
  std::unique_ptr<State> st_;
};

}  // namespace lcr::cuda
