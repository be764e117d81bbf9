#pragma once
// Workspace::Impl (attention_cuda.hpp): named device scratch buffers that grow on demand,
// the cache of position tables, and the key of the lanes the last forward left behind.
// Internal to lcr_cuda_attention.
#include <array>
#include <cstring>
#include <string>

#include "kernels/attention/cuda/api/attention_cuda.hpp"
#include "kernels/attention/cuda/api/lane_kernels.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"

namespace lcr::cuda {

enum class Slot : int {
  Q2,            // q' [B, Lq, H, dp] bf16
  K2,            // k' [B, Lk, Hkv, dp] bf16
  OF32,          // o before the sink [B, Lq, H, dv] fp32
  Delta,         // <dO, O> [B, H, Lq]
  DQ2,           // d q' [B, Lq, H, dp] fp32
  DK2,           // d k' [B, Lk, Hkv, dp] fp32
  TrigQ,         // position table of the queries [Lq, M] float2
  TrigK,         // position table of the keys [Lk, M] float2
  DeltaTrig,     // PoPE (cos, sin)(clamp(delta)) [Hkv, d] float2
  U,             // GOAT u(j) [Lk, Hkv] double
  PriorQ,        // GOAT prior lanes of the queries [Lq, H, 2R+2] bf16 (lanes_forward scratch)
  PriorK,        // GOAT prior lanes of the keys [Lk, Hkv, 2R+2] bf16
  Phi,           // GOAT key features phi(j) [Lk, 2F+2] double
  KeySums,       // GOAT key-bias parameter gradients [Hkv, cols] before the scatter
  DU,            // GOAT d u(j) [Lk, Hkv] fp32
  DUSums,        // GOAT goat_du_project's per-slice sums (double)
  GainQ,         // QK-norm gain partials, queries
  GainK,         // QK-norm gain partials, keys
  ModePart,      // GOAT alpha/beta partials
  DeltaPart,     // PoPE delta partials
  KeyPart,       // GOAT key-bias parameter partials
  Alibi,         // ALiBi slopes [H]
  FoxScratch,    // FoX segment sums (double)
  FoxRowSums,    // FoX query lane under softcap: the SDPA's row sums A, C, D [3, B, Lq, H]
  GoatLane,      // GOAT recipe "authors": the lane parameters mapped from theirs (fp32)
  GoatLaneGrad,  // ... and their gradients before the map back
  GateDZ,        // GOAT query gate: d q' with the gate's share [B, Lq, H, dp] fp32
  GateRows,      // GOAT query gate: (d pre, |q_c|) per query row [B, Lq, H, 2]
  GateValues,    // GOAT query gate under a sink: g per query row [B, Lq, H]
  GateTotal,     // ... and du's gated total per head [H] (goat_du_project)
  Count
};

struct Workspace::Impl {
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
    uint64_t generation = 0;  // bumped on every reallocation (invalidates cached contents)
  };
  std::array<Buffer, size_t(Slot::Count)> buffers;

  template <class T>
  T* get(Slot s, int64_t count) {
    Buffer& b = buffers[size_t(s)];
    const size_t need = size_t(count > 0 ? count : 1) * sizeof(T);
    if (need > b.bytes) {
      if (b.ptr) LCR_CUDA_CHECK(cudaFree(b.ptr));  // cudaFree waits for work using it
      b.ptr = nullptr;
      b.bytes = 0;
      LCR_CUDA_CHECK(cudaMalloc(&b.ptr, need + need / 4));  // headroom for growing shapes
      b.bytes = need + need / 4;
      ++b.generation;
    }
    return static_cast<T*>(b.ptr);
  }
  uint64_t generation(Slot s) const { return buffers[size_t(s)].generation; }

  // A cached position table: valid while spec, span and buffer generation match.
  struct TableKey {
    bool valid = false;
    lanes::TrigSpec spec;
    int64_t pos0 = 0;
    int L = 0;
    uint64_t generation = 0;
    bool matches(const lanes::TrigSpec& s, int64_t p0, int len, uint64_t gen) const {
      if (!valid || s.M != spec.M || s.grid_w != spec.grid_w || p0 != pos0 || len != L ||
          gen != generation)
        return false;
      return std::memcmp(s.freq, spec.freq, sizeof(double) * s.M) == 0 &&
             std::memcmp(s.axis, spec.axis, sizeof(int) * s.M) == 0;
    }
  };
  TableKey trig_q, trig_k;

  std::string phi_key;  // the key span and options of the cached GOAT features

  // Identify the forward whose lanes sit in Q2/K2 and whose fp32 output sits in OF32
  // (empty: none saved). A prepare_attention overwrites the lanes but not the output.
  std::string saved_lanes_key, saved_out_key;

  // A second stream for work that may run beside the caller's: GOAT's key side (the key bias
  // u, the keys' lanes; in the backward the key-bias parameter chain, a row of small
  // latency-bound kernels) beside the queries' bandwidth-bound lane passes. fork(st) returns
  // it after everything queued on st so far; join(st) makes st wait for everything queued on
  // it. Events only, so it also works inside a CUDA graph capture of st.
  cudaStream_t side = nullptr;
  cudaEvent_t fork_done = nullptr, side_done = nullptr;
  cudaStream_t fork(cudaStream_t st) {
    if (!side) {
      LCR_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
      LCR_CUDA_CHECK(cudaEventCreateWithFlags(&fork_done, cudaEventDisableTiming));
      LCR_CUDA_CHECK(cudaEventCreateWithFlags(&side_done, cudaEventDisableTiming));
    }
    LCR_CUDA_CHECK(cudaEventRecord(fork_done, st));
    LCR_CUDA_CHECK(cudaStreamWaitEvent(side, fork_done, 0));
    return side;
  }
  void join(cudaStream_t st) {
    LCR_CUDA_CHECK(cudaEventRecord(side_done, side));
    LCR_CUDA_CHECK(cudaStreamWaitEvent(st, side_done, 0));
  }

  void forget() {
    trig_q.valid = trig_k.valid = false;
    phi_key.clear();
    saved_lanes_key.clear();
    saved_out_key.clear();
  }
  void release() {
    for (auto& b : buffers) {
      if (b.ptr) cudaFree(b.ptr);  // destructor path: no throw
      b = Buffer{};
    }
    if (side) {
      cudaEventDestroy(fork_done);
      cudaEventDestroy(side_done);
      cudaStreamDestroy(side);
      side = nullptr;
    }
    forget();
  }
};

}  // namespace lcr::cuda
