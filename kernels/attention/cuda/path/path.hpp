#pragma once
// lcr's CUDA PaTH and PaTH-FoX attention (bf16 storage, fp32 accumulation on tensor cores),
// forward and backward, with the math of kernels/schemes/path (docs/path.md):
//
//   logit_ij = scale k_j^T H_{j+1} ... H_i q_i  [+ fox_q_i - fox_k_j],  H_t = I - beta_t w_t w_t^T
//   s_ij = softcap > 0 ? softcap tanh(logit / softcap) : logit,  causal (j <= i), softmax,
//   o_i = sum_j p_ij v_j,  lse_i = log sum_j exp(s_ij)
//
// Transitions are per KV head (the query heads of a GQA group share their KV head's w, beta,
// keys and values). Self-attention over one span: q_pos0 must equal k_pos0 (PaTH's logits do
// not depend on absolute positions; FoX's cumulative gates carry them). The algorithm and its
// cost are in docs/cuda.md (PaTH section). Host functions check their arguments (lcr::Error),
// then enqueue work on the stream; nothing synchronises.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace lcr::cuda::path {

struct Args {
  int B = 0, L = 0, H = 0, Hkv = 0, D = 0;  // D: head width of q, k, v and w; 64 or 128
  const __nv_bfloat16* q = nullptr;         // [B, L, H, D]    device
  const __nv_bfloat16* k = nullptr;         // [B, L, Hkv, D]
  const __nv_bfloat16* v = nullptr;         // [B, L, Hkv, D]
  const float* w = nullptr;                 // [B, L, Hkv, D]  unit rows
  const float* beta = nullptr;              // [B, L, Hkv]     in [0, 2)
  const float* fox_q = nullptr;             // [B, L, H] PaTH-FoX cumulative log gates c_i, or null
  const float* fox_k = nullptr;             // [B, L, H] c_j (null exactly when fox_q is)
  int64_t q_pos0 = 0, k_pos0 = 0;
  float scale = 0.f;    // 0: 1 / sqrt(D)
  float softcap = 0.f;  // 0: off
  // Tuning (0 = automatic; bench_cuda_path times the choices): superchunk length in positions
  // (a multiple of 128); query rows per warp in the backward's carry kernel (16 or 32; the
  // forward scan, dq and dkv are one wgmma warpgroup per 64-row block, with no choice).
  int superchunk = 0;
  int warp_rows = 0;
};

// Gradients, fp32, each shaped like its input; all overwritten. dfox_q / dfox_k are needed
// exactly when the forward had FoX gates.
struct Grads {
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  float* dw = nullptr;  // with respect to w as a free vector (as the Kokkos path)
  float* dbeta = nullptr;
  float* dfox_q = nullptr;
  float* dfox_k = nullptr;
};

// Context parallelism (parallel/ring/cuda/path_ring.hpp): a span's boundary quantities,
// computed by forward when asked for, over the span's own positions s..e (definitions in
// kernels/schemes/path/ring.hpp):
//   q [B, L, H, D] fp32     q_fold_i = H_s ... H_i q_i       queries folded to the left end
//   k [B, L, Hkv, D] bf16   k_fold_j = H_e ... H_{j+1} k_j   keys folded to the right end
//   p [B, Hkv, D, D] fp32   P = H_s ... H_e                  the span's transition
// and backward takes their gradients (fp32, shaped alike; null = zero) and adds what they
// contribute to dq, dk, dw, dbeta. Products with fp32-like accuracy on the tensor cores (three
// bf16 MMAs each, device/fold.cuh), about 6 nb D^3 flops
// per KV head forward (nb = L / 64 blocks); docs/cuda.md, PaTH section.
struct Folds {
  float* q = nullptr;
  __nv_bfloat16* k = nullptr;
  float* p = nullptr;
};
struct FoldGrads {
  const float* dq = nullptr;
  const float* dk = nullptr;
  const float* dp = nullptr;
};

// The ring's carried query and its product chain (parallel/ring/cuda/path_ring.hpp), D = 64
// or 128 (carry: bf16 tensor cores; mat_products: fp32-like on the tensor cores, fold.cuh):
//   carry:          y = M q per query head (M [B, Hkv, D, D], q [B, L, H, D] fp32, y bf16)
//   carry_backward: dq += M^T dy, dM += sum over rows and the group's heads of dy q^T
//   mat_products:   C_i (+)= op(A_i) op(B_i) for a batch of dense D x D matrices
void carry(int B, int L, int H, int Hkv, int D, const float* M, const float* q, __nv_bfloat16* y,
           cudaStream_t stream);
void carry_backward(int B, int L, int H, int Hkv, int D, const float* M, const float* q,
                    const float* dy, float* dq, float* dM, cudaStream_t stream);
void mat_products(int batch, int D, const float* A, bool transpose_a, const float* B,
                  bool transpose_b, float* C, bool accumulate, cudaStream_t stream);

// lcr::Error naming the first problem: dimensions, head width (64 or 128), H % Hkv, null or
// misaligned tensors, q_pos0 != k_pos0, negative softcap, a bad superchunk or warp_rows.
void check(const Args& a);

// Device workspace the calls need (bytes); pass at least this much.
// (with_folds: room for the Folds / FoldGrads work as well).
std::size_t forward_workspace_bytes(const Args& a, bool with_folds = false);
std::size_t backward_workspace_bytes(const Args& a, bool with_folds = false);

// o [B, L, H, D] bf16, lse [B, H, L] fp32.
void forward(const Args& a, __nv_bfloat16* o, float* lse, void* workspace,
             std::size_t workspace_bytes, cudaStream_t stream, const Folds* folds = nullptr);

// Given the forward's o and its FINAL lse (after a sink, if any) and dout [B, L, H, D] bf16.
void backward(const Args& a, const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* dout,
              const Grads& g, void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
              const FoldGrads* fold_grads = nullptr);

// Value checks that need a look at the data (a device reduction and a synchronisation, so
// not part of forward): every input finite, beta in [0, 2), w of unit norm (|<w,w> - 1| <=
// 1e-3). lcr::Error names the tensor and index of the first bad value.
void check_values(const Args& a, cudaStream_t stream);

// The same kernels run by the SIMT emulator on the CPU (pointers are host memory): for tests
// on machines without a GPU. Exact same arithmetic, about a million times slower.
namespace emu {
#include "kernels/attention/cuda/path/emu/path_emu_api.inl"
}  // namespace emu
// The same in the form the GPU builds compile for sm_80 .. sm_89, each wgmma product by
// mma.sync (device/wgmma.cuh): the emulator's check of that form.
namespace emu_mma {
#include "kernels/attention/cuda/path/emu/path_emu_api.inl"
}  // namespace emu_mma

}  // namespace lcr::cuda::path
