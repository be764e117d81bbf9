#pragma once
// Internals of the GPU ring shared by ring_forward.cpp and ring_backward.cpp: message
// packing, per-chunk query-side buffers, step timing with CUDA events. Not a public API.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/attention/cuda/partials.hpp"
#include "kernels/attention/cuda/sdpa.hpp"
#include "kernels/base/timer.hpp"
#include "parallel/ring/cuda/ring_cuda.hpp"

namespace lcr::cuda {

// Where each field of each chunk sits in one rank's packed ring message (bytes). A
// message holds all chunks one rank owns (zigzag: two), chunk-major; each field is a
// dense [B, rows, ...] block starting on a 256-byte boundary, so a field is a ready
// kernel operand (the SDPA kernel wants 16-byte aligned rows).
struct Packing {
  struct Slot {
    int chunk = 0;
    int64_t rows = 0;
    std::vector<int64_t> off;  // per field
  };
  std::vector<int64_t> row_bytes;        // per field: bytes of one (b, row)
  std::vector<std::vector<Slot>> slots;  // [owner rank][slot]
  std::vector<int64_t> bytes;            // [owner rank]: message size
  int64_t capacity = 0;                  // largest message
};
Packing make_packing(const SeqLayout& layout, int B, const std::vector<int64_t>& row_bytes);

// Rows of local chunk `slot` of a [B, Lr, W] tensor as a dense [B, rows, W] array: the
// tensor itself (one chunk), an offset into it (B == 1), or a copy gathered into tmp.
template <class T>
T* chunk_rows(T* x, int64_t W, const Chunk& ch, bool one_chunk, int B, int64_t Lr,
              DeviceBuffer<std::remove_const_t<T>>& tmp, cudaStream_t s);

struct RingSdpa::State {
  NcclCommunicator* comm = nullptr;
  SeqLayout layout;
  int B = 0, H = 0, Hkv = 0, D = 0, Dv = 0, N = 1, me = 0;
  bool bias = false, sink = false;
  int64_t Lr = 0;
  Packing kv, grad;
  DeviceBuffer<uint8_t> kv_cur, kv_nxt, g_part[2], g_in;

  // Per local query chunk: gathered inputs (B > 1 with two chunks) and accumulators.
  struct QChunk {
    Chunk ch;
    DeviceBuffer<__nv_bfloat16> q, o, dout;
    DeviceBuffer<float> bias_q, lse, o_acc, lse_acc, o_blk, lse_blk, delta, dq, dbq;
  };
  std::vector<QChunk> qc;
  bool one_chunk = true;

  // Per step: [start, after blocks, after incoming-gradient wait, after its sum]; plus
  // begin / before-final-wait / after-final-wait / finish of the whole pass.
  std::vector<std::array<cudaEvent_t, 4>> ev;
  std::array<cudaEvent_t, 4> ev_pass{};

  State(NcclCommunicator& c, const SeqLayout& l) : comm(&c), layout(l) {}
  void check(const RingSdpaArgs& a, bool hook) const;
  SdpaArgs pair_args(const RingSdpaArgs& a, const QChunk& q, const __nv_bfloat16* qp,
                     const float* bq, const Packing::Slot& b, const uint8_t* msg) const;
  void pack_own(const RingSdpaArgs& a, cudaStream_t s);
  // Step timings from the events (ev_pass[1] -> ev_pass[2], the backward's wait for its
  // gradients' last hop home, counts as the last step's wait).
  RingStats collect(const char* pass, std::vector<RingStepStats> steps, Clock::time_point t0) const;
};

// Tags: message kind and the step it is consumed at (checked by the NCCL backend).
inline int kv_tag(int step) { return 1 * 4096 + step % 4096; }
inline int grad_tag(int step) { return 2 * 4096 + step % 4096; }
// Causality masks the pair entirely when the key chunk comes after the query chunk.
inline bool masked(int query_chunk, int key_chunk) { return key_chunk > query_chunk; }

}  // namespace lcr::cuda
