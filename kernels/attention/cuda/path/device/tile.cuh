#pragma once
// Block-level building blocks for the PaTH block kernels (the UT transform and its
// backward, the chain of block transitions): small products of shared-memory tiles on the
// tensor cores with a per-element epilogue, and tile loads from global memory.
//
// Shared-memory bf16 tiles use a leading dimension of cols + 8 (pad()): the 8 row addresses
// of one ldmatrix are then 16 bytes apart modulo 128, i.e. in distinct banks.
#include <type_traits>

#include "kernels/attention/cuda/device/mma.cuh"

namespace lcr::cuda::LCR_PATHK {

LCR_HD constexpr int pad(int cols) { return cols + 8; }

struct Term {
  Operand a, b;
  int k;        // inner dimension (multiple of 16)
  float alpha;  // this product's weight
};

// C[M x N] = sum_t alpha_t op(A_t) op(B_t), M a multiple of 16, N of 32, every inner
// dimension of 64, accumulated in fp32. epi(r, c, v) is called once for every element, by the
// thread that owns it (a function of M and N only), or epi(r, c, v, v') for the pair (r, c),
// (r, c + 1) (c even) where epi takes four arguments: one 4- or 8-byte store or reduction
// instead of two (prep's and block_backward's epilogues write global memory, where the store
// queue showed in ncu, lg_throttle); each warp takes 16 x 32 output blocks in
// turn: four independent accumulator chains per k step, one A fragment for four products
// (16 x 16 blocks give prep and block_backward the same time, whose stalls are the barriers
// between these products and fixed-latency dependencies, not the products themselves). Ends with a
// block barrier, so results can be read at once. The epilogue must not write any operand of the
// same call.
template <int NT, class Epi>
LCR_DEV void cta_gemm(int M, int N, const Term (&terms)[NT], Epi&& epi) {
  const int nw = nthreads() / 32, blocks_n = N / 32, blocks = (M / 16) * blocks_n;
  const int g = lane() >> 2, tq = lane() & 3;
  for (int blk = warp(); blk < blocks; blk += nw) {
    const int m0 = (blk / blocks_n) * 16, n0 = (blk % blocks_n) * 32;
    float out[4][4] = {};
    LCR_UNROLL
    for (int t = 0; t < NT; ++t) {
      float acc[4][4] = {};
      LCR_UNROLL4
      for (int k0 = 0; k0 < terms[t].k; k0 += 16) {
        uint32_t a[4], b0[4], b1[4];
        load_a(a, terms[t].a, m0, k0);
        load_b(b0, terms[t].b, k0, n0);
        load_b(b1, terms[t].b, k0, n0 + 16);
        mma_bf16(acc[0], a, b0);
        mma_bf16(acc[1], a, b0 + 2);
        mma_bf16(acc[2], a, b1);
        mma_bf16(acc[3], a, b1 + 2);
      }
      LCR_UNROLL
      for (int j = 0; j < 4; ++j) LCR_UNROLL
      for (int i = 0; i < 4; ++i) out[j][i] += terms[t].alpha * acc[j][i];
    }
    LCR_UNROLL
    for (int j = 0; j < 4; ++j) LCR_UNROLL
    for (int hh = 0; hh < 2; ++hh) {
      const int r = m0 + g + hh * 8, c = n0 + j * 8 + 2 * tq;
      if constexpr (std::is_invocable_v<Epi&, int, int, float, float>) {
        epi(r, c, out[j][2 * hh], out[j][2 * hh + 1]);
      } else {
        epi(r, c, out[j][2 * hh]);
        epi(r, c + 1, out[j][2 * hh + 1]);
      }
    }
  }
  sync_cta();
}

template <class Epi>
LCR_DEV void cta_gemm(int M, int N, int K, Operand A, Operand B, Epi&& epi) {
  const Term t[1] = {{A, B, K, 1.f}};
  cta_gemm(M, N, t, epi);
}

// The pair (x, y) into bf16 dst[0..1], 4-byte aligned (store_f32x2: simt.cuh).
LCR_DEV void store_bf16x2(bf16* dst, float x, float y) {
  *reinterpret_cast<uint32_t*>(dst) = pack_bf16(x, y);
}

// Epilogue helper: store into a bf16 shared tile (the pair form: c even, ld even).
struct StoreBf16 {
  bf16* p;
  int ld;
  LCR_DEV void operator()(int r, int c, float v) const { p[r * ld + c] = __float2bfloat16(v); }
  LCR_DEV void operator()(int r, int c, float v0, float v1) const {
    store_bf16x2(p + r * ld + c, v0, v1);
  }
};

// rows x cols bf16 tile from global memory (row stride `stride` elements) into shared memory
// (leading dimension ld) with cp.async; rows >= valid are zero-filled. cols % 8 == 0, the
// source rows 16-byte aligned. The caller commits and waits.
LCR_DEV void async_tile(bf16* dst, int ld, const bf16* src, int64_t stride, int rows, int cols,
                        int valid) {
  const int chunks = cols / 8;
  for (int i = tid(); i < rows * chunks; i += nthreads()) {
    const int r = i / chunks, c = (i % chunks) * 8;
    const bool ok = r < valid;
    cp_async16(dst + r * ld + c, ok ? src + r * stride + c : src, ok);
  }
}

// The same for a ROWS x D tile with every size known at compile time (NT threads): each
// thread keeps one 16-byte column and walks rows NT / (D / 8) apart, so its copies after the
// first are fixed strides on both sides. The generic loop above spends ~20 instructions per
// copy on the index split and 64-bit address arithmetic: about a fifth of the forward scan's
// instructions at D = 128 (ncu source counters).
template <int ROWS, int D, int NT>
LCR_DEV void async_rows(bf16* dst, int ld, const bf16* src, int64_t stride, int valid) {
  constexpr int kChunks = D / 8, kStep = NT / kChunks;
  static_assert(NT % kChunks == 0 && ROWS % kStep == 0, "rows per pass must divide the tile");
  const int c = (tid() % kChunks) * 8, r0 = tid() / kChunks;
  bf16* d = dst + r0 * ld + c;
  const bf16* g = src + r0 * stride + c;
  LCR_UNROLL
  for (int j = 0; j < ROWS / kStep; ++j) {
    const bool ok = r0 + j * kStep < valid;
    cp_async16(d + j * kStep * ld, ok ? g + j * kStep * stride : src, ok);
  }
}

// rows x cols fp32 tile from global memory, scaled and rounded to bf16 into shared memory;
// rows >= valid are zero. Synchronous, with 16-byte read-only loads, four per thread issued
// before the first shared store (the source is never written by the kernel that reads it, so
// nothing orders the loads behind the stores; one 4-byte load per element, each waited for,
// left the per-block kernels stalled on global memory). cols % 4 == 0, src and stride
// 16-byte aligned (every caller's D, kBlk and row strides are multiples of 4 floats).
LCR_DEV void convert_tile(bf16* dst, int ld, const float* src, int64_t stride, int rows, int cols,
                          int valid, float scale = 1.f) {
  constexpr int kU = 8;  // 8 x 16 bytes in flight per thread (4 left the per-block kernels waiting)
  const int quads = cols / 4, n = rows * quads, nt = nthreads();
  for (int i0 = tid(); i0 < n; i0 += kU * nt) {
    F4 x[kU];
    LCR_UNROLL
    for (int u = 0; u < kU; ++u) {
      const int i = i0 + u * nt, r = i / quads, c = (i % quads) * 4;
      x[u] = i < n && r < valid ? load_ro4(src + r * stride + c) : F4{0.f, 0.f, 0.f, 0.f};
    }
    LCR_UNROLL
    for (int u = 0; u < kU; ++u) {
      const int i = i0 + u * nt, r = i / quads, c = (i % quads) * 4;
      if (i < n) {
        uint32_t* d = reinterpret_cast<uint32_t*>(dst + r * ld + c);
        d[0] = pack_bf16(x[u].x * scale, x[u].y * scale);
        d[1] = pack_bf16(x[u].z * scale, x[u].w * scale);
      }
    }
  }
}

// The same from a bf16 source (synchronous), for tiles that are also read as fp32 values.
LCR_DEV void copy_tile(bf16* dst, int ld, const bf16* src, int64_t stride, int rows, int cols,
                       int valid) {
  const int pairs = cols / 2;
  for (int i = tid(); i < rows * pairs; i += nthreads()) {
    const int r = i / pairs, c = (i % pairs) * 2;
    uint32_t v = 0;
    if (r < valid) v = *reinterpret_cast<const uint32_t*>(src + r * stride + c);
    *reinterpret_cast<uint32_t*>(dst + r * ld + c) = v;
  }
}

LCR_DEV float to_f(bf16 x) { return __bfloat162float(x); }

}  // namespace lcr::cuda::LCR_PATHK
