#pragma once
// Device building blocks of the CUDA SDPA kernels (sdpa_forward.cu, sdpa_backward.cu):
// PTX wrappers for the Ampere/Hopper warp-level tensor-core path (mma.sync m16n8k16 bf16
// -> fp32, ldmatrix, cp.async) and the swizzled shared-memory tile layout they share.
//
// Fragment layouts of mma.m16n8k16 (lane = 4*g + t, g = lane / 4 in 0..7, t = lane % 4):
//   A 16x16 (4 regs of bf16x2): a0 (row g, cols 2t..2t+1), a1 (row g+8, same cols),
//                               a2 (row g, cols 2t+8..2t+9), a3 (row g+8, cols 2t+8..)
//   B 16x8  (2 regs):           b0 (k rows 2t..2t+1, col g), b1 (k rows 2t+8..2t+9, col g)
//   C 16x8  (4 fp32):           c0,c1 (row g, cols 2t, 2t+1), c2,c3 (row g+8, same cols)
// Two C tiles side by side (16x16) hold exactly an A fragment's elements, so a softmax
// probability tile goes from accumulator to the next matmul's A operand in registers.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/attention/cuda/device/mma.cuh"

// The device layer (simt.cuh, mma.cuh) supplies thread and block indices, barriers, shuffles,
// atomics, mma.sync, pack_bf16, fast_exp2 and cp.async groups, for the GPU and for the SIMT
// emulator alike; this file adds the SDPA's forms that address shared memory by its 32-bit
// shared-window address (one register per tile, offsets folded as immediates).
namespace lcr::cuda::LCR_SDPAMMA {

using namespace ::lcr::cuda::LCR_PATHK;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

#if defined(LCR_CUDA_EMU)
LCR_DEV int imin(int a, int b) { return a < b ? a : b; }
// The kernel's dynamic shared memory as an array `name` (an extern __shared__ array on the GPU).
#define LCR_SDPA_SMEM(name) unsigned char* name = ::lcr::emu::shared_base()
// The emulator's shared-window address: the offset from the block's shared memory.
LCR_DEV uint32_t smem_addr(const void* p) {
  return uint32_t(static_cast<const unsigned char*>(p) - emu::shared_base());
}
LCR_DEV void cp_async16(uint32_t dst, const void* src, bool pred) {
  emu::cp_async16(emu::shared_base() + dst, src, pred);
}
LCR_DEV void cp_async4(uint32_t dst, const void* src, bool pred) {
  emu::cp_async4(emu::shared_base() + dst, src, pred);
}
LCR_DEV void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  emu_detail::ldmatrix(r, reinterpret_cast<const bf16*>(emu::shared_base() + addr), false);
}
LCR_DEV void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  emu_detail::ldmatrix(r, reinterpret_cast<const bf16*>(emu::shared_base() + addr), true);
}
#else
LCR_DEV int imin(int a, int b) { return ::min(a, b); }
#define LCR_SDPA_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
LCR_DEV uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16-byte global -> shared copy that bypasses L1; pred = false writes 16 zero bytes
// (rows past the sequence end, columns past the real head width).
LCR_DEV void cp_async16(uint32_t dst, const void* src, bool pred) {
  const int bytes = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
// 4-byte global -> shared copy through L1 (per-row option terms such as a key bias lane,
// strided in global memory); pred = false writes 4 zero bytes.
LCR_DEV void cp_async4(uint32_t dst, const void* src, bool pred) {
  const int bytes = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
LCR_DEV void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
LCR_DEV void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
#endif

// Sum over the 8 row groups g = lane / 4 of an mma fragment (the lanes with the same t):
// one value per fragment column, in every lane, in a fixed order.
LCR_DEV float sum_over_rows(float v) {
  v += shfl_xor(v, 4);
  v += shfl_xor(v, 8);
  return v + shfl_xor(v, 16);
}

// c += a * b on the tensor cores, bf16 inputs, fp32 accumulators.
LCR_DEV void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(LCR_CUDA_EMU)
  const uint32_t b[2] = {b0, b1};
  mma_bf16(c, a, b);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Zeroes mma accumulators: N tiles of 4, or M rows of N tiles.
template <int N>
LCR_DEV void zero_acc(float (&c)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) c[n][e] = 0.f;
}
template <int M, int N>
LCR_DEV void zero_acc(float (&c)[M][N][4]) {
#pragma unroll
  for (int m = 0; m < M; ++m) zero_acc(c[m]);
}

// Shared-memory tile of bf16 rows W elements wide (W a multiple of 32). Rows are stored
// in 16-byte chunks whose index is XORed with the row (mod up to 8), so the 8 row
// addresses of one ldmatrix 8x8 block, and the 16-byte cp.async writes of 8 consecutive
// rows, fall into 8 different bank groups instead of one.
template <int W>
struct Swz {
  static constexpr int kChunks = W / 8;
  static constexpr int kMask = (kChunks >= 8 ? 8 : kChunks) - 1;
  LCR_DEV static int offset(int row, int chunk) { return row * W + ((chunk ^ (row & kMask)) << 3); }
  // ldmatrix addressing without a register per (row block, chunk) pair: a thread's rows
  // differ only by multiples of 8 (row & kMask is fixed) and its chunks are 2*pair + c
  // (c in {0,1}), so chunk ^ (row & kMask) = 2*pair ^ (c ^ (row & kMask)). The thread's
  // byte offset for pair 0 is computed once; pair p XORs in p*32 bytes (one LOP per pair,
  // the row block is an immediate).
  LCR_DEV static uint32_t thread_off(int row, int c) {
    return uint32_t(row * W * 2 + ((c ^ (row & kMask)) << 4));
  }
  LCR_DEV static uint32_t at(uint32_t base, uint32_t toff, int pair, int row_blk) {
    return base + (toff ^ uint32_t(pair << 5)) + uint32_t(row_blk * W * 2);
  }
};

// Copies rows [0, R) x chunks [0, W/8) of a global [rows, ld] bf16 matrix starting at
// `base` into a Swz<W> tile with NT threads. Rows >= nrows and columns >= width (the real
// head width, <= W) are zero-filled, so padded lanes add nothing to a dot product.
// When NT covers whole rows a multiple of 8 at a time (every tiling here but the 4-warp
// 256-wide ones), a thread keeps one chunk column and one swizzle for all its rows: the
// shared-memory offsets of its later copies are immediates and the global address steps
// by a fixed stride, instead of ~20 integer instructions per 16-byte copy.
template <int R, int W, int NT>
LCR_DEV void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* base, int64_t ld, int nrows,
                       int width, int tid) {
  constexpr int kChunks = W / 8;
  constexpr int kTotal = R * kChunks;
  constexpr int kRowsPerPass = NT / kChunks;
  if constexpr (NT % kChunks == 0 && kRowsPerPass % 8 == 0) {
    const int ch = tid % kChunks, r0 = tid / kChunks;
    const bool col_ok = ch * 8 < width;
    const uint32_t dst = smem_addr(tile + Swz<W>::offset(r0, ch));  // row & 7 is fixed
    const __nv_bfloat16* src = base + r0 * ld + ch * 8;
    const int64_t stride = int64_t(kRowsPerPass) * ld;
#pragma unroll
    for (int k = 0; k * kRowsPerPass < R; ++k) {
      const int row = r0 + k * kRowsPerPass;
      if (R % kRowsPerPass == 0 || row < R) {
        const bool pred = col_ok && row < nrows;
        cp_async16(dst + uint32_t(k * kRowsPerPass * W * 2), pred ? src : base, pred);
      }
      src += stride;
    }
  } else {
#pragma unroll
    for (int c0 = 0; c0 < kTotal; c0 += NT) {
      const int c = c0 + tid;
      if (kTotal % NT == 0 || c < kTotal) {
        const int row = c / kChunks, ch = c % kChunks;
        const bool pred = row < nrows && ch * 8 < width;
        const __nv_bfloat16* src = pred ? base + row * ld + ch * 8 : base;
        cp_async16(smem_addr(tile + Swz<W>::offset(row, ch)), src, pred);
      }
    }
  }
}

}  // namespace lcr::cuda::LCR_SDPAMMA
