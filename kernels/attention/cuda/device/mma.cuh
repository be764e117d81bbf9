#pragma once
// Warp-level tensor-core primitives: mma.sync m16n8k16 (bf16 in, fp32 accumulate),
// ldmatrix (x4, plain and transposed) and cp.async, with the PTX ISA's fragment layouts.
// Lane l has groupID g = l / 4 and thread-in-group t = l % 4:
//   A (16 x 16, row): a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
//   B (16 x 8, col):  b0 (k = 2t..2t+1, n = g), b1 (k = 2t+8.., n = g)
//   C (16 x 8, fp32): c0, c1 (g, 2t..2t+1), c2, c3 (g+8, 2t..2t+1)
// Two adjacent C tiles (16 columns) converted to bf16 pairs are exactly an A fragment over
// those 16 columns (FlashAttention's trick to feed P = softmax(S) to P V from registers).
#include "kernels/attention/cuda/device/simt.cuh"

namespace lcr::cuda::LCR_PATHK {

LCR_DEV uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
#if defined(LCR_CUDA_EMU)
  std::memcpy(&u, &p, 4);
#else
  u = *reinterpret_cast<uint32_t*>(&p);
#endif
  return u;
}

// A tile of bf16 in shared memory: logical element (r, c) is p[r * ld + c], or, when
// trans, p[c * ld + r] (the stored matrix is the transpose of the logical one).
struct Operand {
  const bf16* p;
  int ld;
  bool trans;
};
LCR_DEV Operand op(const bf16* p, int ld, bool trans = false) { return Operand{p, ld, trans}; }

#if defined(LCR_CUDA_EMU)
namespace emu_detail {
LCR_DEV float bf16_half(uint32_t u, int hi) {
  const uint32_t bits = hi ? (u & 0xffff0000u) : (u << 16);  // bf16 = high half of an fp32
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
LCR_DEV void check_row_address(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  if (c < emu::shared_base() || c + 16 > emu::shared_base() + emu::shared_bytes())
    emu::fail("emu: ldmatrix row address outside shared memory");
  if (reinterpret_cast<std::uintptr_t>(p) & 15) emu::fail("emu: ldmatrix row not 16-byte aligned");
}
LCR_DEV void ldmatrix(uint32_t r[4], const bf16* p, bool trans) {
  check_row_address(p);
  const unsigned char* all = emu::warp_exchange(&p, sizeof p);
  auto row = [&](int i) {
    const bf16* q;
    std::memcpy(&q, all + i * emu::kExchangeStride, sizeof q);
    return q;
  };
  const int l = lane();
  for (int m = 0; m < 4; ++m) {
    bf16 e0, e1;
    if (!trans) {  // lane l: row l/4, columns 2(l%4), 2(l%4)+1 of matrix m
      const bf16* q = row(8 * m + l / 4);
      e0 = q[2 * (l % 4)];
      e1 = q[2 * (l % 4) + 1];
    } else {  // transposed: rows 2(l%4), 2(l%4)+1 at column l/4
      e0 = row(8 * m + 2 * (l % 4))[l / 4];
      e1 = row(8 * m + 2 * (l % 4) + 1)[l / 4];
    }
    r[m] = pack_bf16(__bfloat162float(e0), __bfloat162float(e1));
  }
}

// Element (r, k) of a warp's 16 x 16 A fragment (the layout in this file's header) from the
// lanes' operands: lane_ops(l).a is lane l's a[4].
template <class LaneOps>
LCR_DEV float a_frag_elem(LaneOps lane_ops, int r, int k) {
  return bf16_half(lane_ops((r % 8) * 4 + (k % 8) / 2).a[(r / 8) + 2 * (k / 8)], k % 2);
}
}  // namespace emu_detail
#endif

// D = A B + D for one 16 x 8 tile.
LCR_DEV void mma_bf16(float c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(LCR_CUDA_EMU)
  struct Ops {
    uint32_t a[4], b[2];
  } mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
  const unsigned char* all = emu::warp_exchange(&mine, sizeof mine);
  auto ops = [&](int l) {
    Ops o;
    std::memcpy(&o, all + l * emu::kExchangeStride, sizeof o);
    return o;
  };
  const int g = lane() / 4, t = lane() % 4;
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
    double s = c[i];
    for (int k = 0; k < 16; ++k) {
      const float av = emu_detail::a_frag_elem(ops, r, k);
      const float bv = emu_detail::bf16_half(ops(n * 4 + (k % 8) / 2).b[k / 8], k % 2);
      s += double(av) * double(bv);
    }
    c[i] = float(s);
  }
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// ldmatrix .x4: lanes 8m..8m+7 give the 8 row addresses (16 bytes each) of matrix m.
LCR_DEV void ldsm_x4(uint32_t r[4], const bf16* p) {
#if defined(LCR_CUDA_EMU)
  emu_detail::ldmatrix(r, p, false);
#else
  const unsigned a = unsigned(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#endif
}
LCR_DEV void ldsm_x4_t(uint32_t r[4], const bf16* p) {
#if defined(LCR_CUDA_EMU)
  emu_detail::ldmatrix(r, p, true);
#else
  const unsigned a = unsigned(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#endif
}

// A fragment of the logical 16 x 16 block at (m0, k0) of A.
LCR_DEV void load_a(uint32_t a[4], const Operand& A, int m0, int k0) {
  const int l = lane();
  if (!A.trans) {
    ldsm_x4(a, A.p + (m0 + (l & 15)) * A.ld + k0 + (l >> 4) * 8);
  } else {  // stored K x M
    ldsm_x4_t(a, A.p + (k0 + (l & 7) + ((l >> 4) << 3)) * A.ld + m0 + ((l >> 3) & 1) * 8);
  }
}

// B fragments of the logical 16 x 16 block at (k0, n0): b[0..1] for columns n0..n0+7,
// b[2..3] for n0+8..n0+15.
LCR_DEV void load_b(uint32_t b[4], const Operand& B, int k0, int n0) {
  const int l = lane();
  if (B.trans) {  // stored N x K
    ldsm_x4(b, B.p + (n0 + (l & 7) + ((l >> 4) << 3)) * B.ld + k0 + ((l >> 3) & 1) * 8);
  } else {  // stored K x N
    ldsm_x4_t(b, B.p + (k0 + (l & 7) + ((l >> 3) & 1) * 8) * B.ld + n0 + (l >> 4) * 8);
  }
}

// Two C tiles (columns 16j..16j+15 of a row block) as an A fragment over those columns.
LCR_DEV void c_to_a(uint32_t a[4], const float c0[4], const float c1[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

// cp.async of 16 bytes global -> shared; zero fill when !valid (src is then not read).
LCR_DEV void cp_async16(void* smem, const void* src, bool valid) {
#if defined(LCR_CUDA_EMU)
  emu::cp_async16(smem, src, valid);
#else
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n));
#endif
}
LCR_DEV void cp_async_commit() {
#if defined(LCR_CUDA_EMU)
  emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most N committed groups are still in flight.
template <int N>
LCR_DEV void cp_async_wait() {
#if defined(LCR_CUDA_EMU)
  emu::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Row-wise reductions over the 4 lanes that share a row of a C fragment.
LCR_DEV float quad_max(float v) {
  v = fmaxf(v, shfl_xor(v, 1));
  return fmaxf(v, shfl_xor(v, 2));
}
LCR_DEV float quad_sum(float v) {
  v += shfl_xor(v, 1);
  return v + shfl_xor(v, 2);
}

}  // namespace lcr::cuda::LCR_PATHK
