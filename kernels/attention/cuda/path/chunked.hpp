#pragma once
// PaTH / PaTH-FoX on one GPU in chunks: the whole-sequence result of path::forward / backward
// (path.hpp) with most of the work on the SDPA kernel (sdpa.hpp) instead of the PaTH scan.
//
// The sequence [0, L) is cut into C = L / Lc chunks of Lc positions. For query chunk a and key
// chunk b < a, PaTH's logits factor through the chunks' boundary folds (path::Folds):
//   logit_ij = scale k~_j^T (P_{b+1} ... P_{a-1}) q~_i,
//   q~_i = H_{s_a} ... H_i q_i      (queries folded to their chunk's left end, fp32)
//   k~_j = H_{e_b} ... H_{j+1} k_j  (keys folded to their chunk's right end, bf16)
//   P_c  = H_{s_c} ... H_{e_c}      (the chunk's transition, D x D fp32)
// so every pair at chunk distance d = a - b is a plain dot product between the carried query
// y = M_d[a] q~_a, M_d[a] = P_{a-d+1} ... P_{a-1}, and k~_b, with nothing masked. Per b row of
// the batch:
//   1. one PaTH call over the C chunks as a batch of B C sequences of length Lc: each chunk's
//      own causal block (o, lse) and its folds;
//   2. for d = 1 .. C-1: y for the C - d query chunks a >= d (path::carry), one SDPA call with
//      batch C - d against k~ and v of chunks a - d, merged into (o, lse) in fp32;
// and the backward runs the same pairs through sdpa_backward, takes the query gradients back
// through the carry into dq~ and the M chains into dP, and hands (dq~, dk~, dP) to the
// chunk-local PaTH backward (path::FoldGrads). Work: the PaTH kernels see 1/C of the
// attention matrix; the other (C-1)/C runs at SDPA speed, plus about C L D^2 / 2 multiply-adds
// per head of carried queries (fp32) and the folds (about 6 (L / 64) D^3 per KV head).
//
// Chunked keeps the forward's folds for the backward (like a ring), so one object serves one
// attention call at a time (a model holds one per layer). Device memory: the folds kept, about
// B L (4 H D + 2 Hkv D) bytes plus the transitions, and scratch (the chunk-local kernels'
// workspace and a few arrays of B L H D floats), which objects that never run at the same
// time (a model's layers) may share.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "kernels/attention/cuda/path/path.hpp"

namespace lcr::cuda::path {

struct ChunkedScratch;  // opaque; grown as needed
std::shared_ptr<ChunkedScratch> make_chunked_scratch();

class Chunked {
 public:
  // chunk: Lc in positions; 0 = automatic (chunk_length says which); -1 = always the
  // whole-sequence kernels. A length L that is not a multiple of Lc, or no longer than Lc,
  // runs the whole-sequence kernels too. scratch: shared with
  // other objects that never run at the same time; null = its own.
  explicit Chunked(int chunk = 0, std::shared_ptr<ChunkedScratch> scratch = nullptr);
  ~Chunked();
  Chunked(const Chunked&) = delete;
  Chunked& operator=(const Chunked&) = delete;

  // The chunk length used for a: Lc, or a.L when the whole-sequence kernels run.
  int chunk_length(const Args& a) const;

  // path::forward's contract (o [B, L, H, D] bf16, lse [B, H, L] fp32); keeps the folds.
  void forward(const Args& a, __nv_bfloat16* o, float* lse, cudaStream_t s);

  // path::backward's contract; `a` must be the last forward's arguments (checked by pointer).
  void backward(const Args& a, const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* dout,
                const Grads& g, cudaStream_t s);

  // Device memory held now (bytes): the kept folds, and with the scratch.
  std::size_t bytes(bool with_scratch = true) const;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace lcr::cuda::path
