#pragma once
// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a) for lcr's kernels (PaTH's, the SDPA's wgmma
// forward), and the shared-memory
// tile layout it reads. A warpgroup (4 consecutive warps, 128 threads, starting at a warp index
// divisible by 4) computes D (64 x 64, fp32) (+)= A (64 x 16) B (16 x 64), bf16 operands:
//   A from shared memory (descriptor) or from registers (the mma.sync A fragment of mma.cuh,
//     warp w of the group holding rows 16w .. 16w+15);
//   B from shared memory, K-major (B^T stored row by row) or MN-major (B stored row by row);
//   D in registers: warp w holds rows 16w + g and 16w + g + 8, and for each 8-column chunk j,
//     d[4j + 0, 1] = (16w + g, 8j + 2t + 0, 1), d[4j + 2, 3] = (16w + g + 8, ...), i.e. the
//     mma.sync C fragments of mma.cuh side by side (so c_to_a turns 16 columns into an A).
// The operations are asynchronous: wgmma_fence before the first, wgmma_commit after a batch,
// wgmma_wait<N> before the accumulators (or the A registers, or the shared operands) are
// touched again, then fence_regs on the accumulators read next (the compiler does not know that
// the wait is what makes them ready).
//
// Tiles (Swz): a [rows][C] bf16 tile (C a multiple of 64) as C / 64 panels of [rows][64], each
// row 128 bytes; 16-byte chunk c of row r sits at chunk c ^ (r % 8) of its row (the 128-byte
// swizzle: no bank conflicts for the tensor cores or for cp.async). Tiles start on a 1024-byte
// boundary of the shared address space (SmemCarver::take_1k).
//
// Emulator build (LCR_CUDA_EMU): each thread queues its share of the product and performs it at
// wgmma_wait (emu.hpp), reading shared memory through the descriptor the way the PTX ISA
// defines it (canonical layouts, 128-byte swizzle on address bits 4-6 by bits 7-9), so a kernel
// and this model must agree on every address for the emulator tests to pass; the GPU tests
// (tests/cuda/path, WgmmaProbe) check the model against the hardware.
#include <array>

#include "kernels/attention/cuda/device/mma.cuh"
#include "kernels/attention/cuda/device/tensor_map.hpp"

// Without wgmma (sm_80 .. sm_89, sm_90 without its "a" features, and the emulator's mma.sync
// build, LCR_CUDA_EMU_MMA_SYNC) each wgmma below is performed at issue by mma.sync, every warp
// of the group computing its own 16 rows with operands read through the same descriptors (so
// one kernel source serves both; wgmma_fence / commit / wait become no-ops). An operand is
// stable from the issue to the wait in every kernel, so the product at issue is one the
// hardware's asynchronous one could have been. The TMA bulk reductions have no such form: the
// kernels that use them (the SDPA's wgmma backward) are chosen only where wgmma runs
// (sdpa_arch.hpp).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "lcr's CUDA kernels use bf16 mma.sync: build for sm_80 or newer (CMAKE_CUDA_ARCHITECTURES)"
#endif
#if (defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)) || \
    defined(LCR_CUDA_EMU_MMA_SYNC)
#define LCR_WGMMA_BY_MMA_SYNC 1
#endif

namespace lcr::cuda::LCR_PATHK {

// Element offset of (r, c) in a Swz tile of `rows` rows.
LCR_HD int swz(int rows, int r, int c) {
  return (c >> 6) * rows * 64 + r * 64 + ((((c & 63) >> 3) ^ (r & 7)) << 3) + (c & 7);
}

// ROWS x C bf16 rows from global memory (row stride `stride` elements, 16-byte aligned) into a
// Swz tile with cp.async, NT threads; rows >= valid and columns >= width (a multiple of 8: the
// real head width of a padded tile) are zero-filled. The caller commits, waits.
template <int ROWS, int C, int NT>
LCR_DEV void async_swz(bf16* dst, const bf16* src, int64_t stride, int valid, int width = C) {
  constexpr int kChunks = C / 8, kStep = NT / kChunks;
  static_assert(NT % kChunks == 0 && ROWS % kStep == 0, "rows per pass must divide the tile");
  const int c = (tid() % kChunks) * 8, r0 = tid() / kChunks;
  const bf16* g = src + r0 * stride + c;
  LCR_UNROLL
  for (int j = 0; j < ROWS / kStep; ++j) {
    const int r = r0 + j * kStep;
    const bool ok = r < valid && c < width;
    cp_async16(dst + swz(ROWS, r, c), ok ? g + j * kStep * stride : src, ok);
  }
}

LCR_DEV uint32_t smem_addr(const void* p) {
#if defined(LCR_CUDA_EMU)
  return uint32_t(static_cast<const unsigned char*>(p) - emu::shared_base());
#else
  return unsigned(__cvta_generic_to_shared(p));
#endif
}

// Swz tiles are carved on 1024-byte offsets from the dynamic shared memory's base, which the
// hardware places on a 1024-byte boundary; a kernel that relies on it checks once.
LCR_DEV void check_smem_base() {
#if !defined(LCR_CUDA_EMU)
  if (smem_addr(smem_base()) & 1023) __trap();  // (no printf: a call serialises wgmma)
#endif
}

// Matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address, leading and stride
// byte offsets (all >> 4), 128-byte swizzle (mode 1), base offset 0 (atoms 1024-aligned).
LCR_DEV uint64_t smem_desc(const bf16* p, uint32_t lbo, uint32_t sbo) {
  return uint64_t((smem_addr(p) & 0x3FFFF) >> 4) | uint64_t(lbo >> 4) << 16 |
         uint64_t(sbo >> 4) << 32 | uint64_t(1) << 62;
}
// K-major operand (A, or B^T) of 64 rows = rows r0 .. r0+63 of a Swz tile of `rows` rows
// (r0 % 8 == 0), columns k0 .. k0+15 (k0 % 16 == 0): rows 128 bytes apart, 8-row groups 1024
// (SBO); LBO unused.
LCR_DEV uint64_t desc_k(const bf16* tile, int rows, int k0, int r0 = 0) {
  return smem_desc(tile + (k0 >> 6) * rows * 64 + r0 * 64 + (k0 & 63), 16, 1024);
}
// MN-major B of a Swz tile holding B itself: K = rows k0 .. k0+15 (k0 % 8 == 0), N = columns
// n0 .. n0+63 (n0 % 64 == 0): 8-row groups 1024 bytes apart (SBO), panels rows * 128 (LBO).
LCR_DEV uint64_t desc_mn(const bf16* tile, int rows, int k0, int n0) {
  return smem_desc(tile + (n0 >> 6) * rows * 64 + k0 * 64, uint32_t(rows) * 128, 1024);
}

// Shared-space byte address of element (mn, k) of the 64 x 16 (A) or 16 x 64 (B) operand a
// descriptor (128-byte swizzle, base offset 0: smem_desc) names. Canonical layouts in bytes
// (T = 8 bf16 per 16 bytes):
//   K-major  ((8, m), (T, 2)) : ((8T, SBO), (1, T))       row mn, column k
//   MN-major ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO))
// The swizzle moves whole 16-byte chunks, so 8 elements along the contiguous dimension from
// a multiple of 8 stay one aligned chunk (an ldmatrix row).
LCR_DEV uint32_t desc_byte(uint64_t desc, bool mn_major, int mn, int k) {
  const uint32_t start = uint32_t(desc & 0x3FFF) << 4;
  const uint32_t lbo = uint32_t((desc >> 16) & 0x3FFF) << 4;
  const uint32_t sbo = uint32_t((desc >> 32) & 0x3FFF) << 4;
  uint32_t a = mn_major ? start + (mn % 64) * 2 + (mn / 64) * lbo + (k % 8) * 128 + (k / 8) * sbo
                        : start + (mn % 8) * 128 + (mn / 8) * sbo + k * 2;
  return a ^ (((a >> 7) & 7) << 4);
}

#if defined(LCR_CUDA_EMU)
namespace emu_detail {
// Element (mn, k) of the 64 x 16 (A) or 16 x 64 (B) operand a descriptor names.
inline float desc_elem(uint64_t desc, bool mn_major, int mn, int k) {
  if ((desc >> 62) != 1 || ((desc >> 49) & 7) != 0)
    emu::fail("emu: wgmma descriptor: only the 128-byte swizzle with base offset 0 is modelled");
  const uint32_t a = desc_byte(desc, mn_major, mn, k);
  if (a + 2 > emu::shared_bytes()) emu::fail("emu: wgmma operand outside shared memory");
  // What the hardware may read: the async proxy's view (emu.hpp) must hold the current bytes,
  // else a fence is missing before the last barrier, or the operand was overwritten before
  // the wait.
  if (std::memcmp(emu::shared_base() + a, emu::async_view() + a, 2) != 0)
    emu::fail(
        "emu: wgmma operand differs from the async proxy's view of shared memory: "
        "fence_async_smem() and a barrier are missing after it was written, or it was "
        "overwritten before wgmma_wait");
  bf16 v;
  std::memcpy(&v, emu::shared_base() + a, 2);
  return __bfloat162float(v);
}
// This thread's share of one m64nNk16: A(r, k) from `a_of`, B(k, n) from the descriptor.
template <int N = 64, class AOf>
void wgmma_thread(float* d, AOf a_of, uint64_t db, bool trans_b, bool acc, int w, int l) {
  const int g = l / 4, t = l % 4;
  for (int j = 0; j < N / 8; ++j)
    for (int i = 0; i < 4; ++i) {
      const int r = 16 * w + g + (i >= 2 ? 8 : 0), n = 8 * j + 2 * t + (i & 1);
      double s = acc ? d[4 * j + i] : 0.0;
      for (int k = 0; k < 16; ++k)
        s += double(a_of(r, k)) *
             double(trans_b ? desc_elem(db, true, n, k) : desc_elem(db, false, n, k));
      d[4 * j + i] = float(s);
    }
}
}  // namespace emu_detail
#endif

// Two floats to shared memory (8-byte aligned p) as st.shared.v2.f32: a pointer carved from
// the dynamic shared memory is generic to the compiler, whose plain stores through it are
// ST.E through the LG queue (a visible share of the bulk-dq backward's stall samples at QK
// 256).
LCR_DEV void store_shared_f32x2(float* p, float a, float b) {
#if defined(LCR_CUDA_EMU)
  store_f32x2(p, a, b);
#else
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(smem_addr(p)), "f"(a), "f"(b) : "memory");
#endif
}

// The same at a shared-space byte address (smem_addr): 32-bit address arithmetic, one
// register per address where a generic pointer takes two.
LCR_DEV void store_shared_f32x2(uint32_t saddr, float a, float b) {
#if defined(LCR_CUDA_EMU)
  store_f32x2(reinterpret_cast<float*>(emu::shared_base() + saddr), a, b);
#else
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(saddr), "f"(a), "f"(b) : "memory");
#endif
}

// wgmma reads shared memory through the async proxy: shared-memory writes of this thread
// (st.shared, and cp.async data once waited for) are ordered before such reads only by an
// async-proxy fence (PTX ISA, the memory consistency rules of wgmma.mma_async). Every thread
// that wrote an operand fences, then the CTA barrier, then the wgmma.
LCR_DEV void fence_async_smem() {
#if defined(LCR_WGMMA_BY_MMA_SYNC)
  // ldmatrix reads through the generic proxy: the barrier after this suffices.
#elif defined(LCR_CUDA_EMU)
  emu::fence_async();
#else
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Tensor bulk reduction by the TMA engine (cp.reduce.async.bulk.tensor.4d .add, sm_90; fp32 by
// the map): the box of `map` at element coordinates (c0, c1, c2, c3) += the box in shared
// memory at src (dense, or 128-byte swizzled as the map says: 1024-byte aligned then), elements
// outside the tensor skipped, asynchronously; map is a __grid_constant__ kernel parameter
// (device/tensor_map.hpp). The engine reads src through the async proxy: the writing threads
// fence (fence_async_smem) and meet at a barrier before the issue. bulk_commit closes the
// thread's group; bulk_wait_read<N> before src is written again (the engine has read it),
// bulk_wait<N> before the thread exits.
#if defined(LCR_WGMMA_BY_MMA_SYNC)
// A kernel with bulk reductions launched where the TMA engine is absent: the host's choice is
// wrong (sdpa_arch.hpp), so stop rather than drop the sums.
LCR_DEV void no_bulk_engine() {
#if defined(LCR_CUDA_EMU)
  emu::fail("emu: TMA bulk reduction in the mma.sync build (no TMA engine before sm_90)");
#else
  __trap();
#endif
}
#endif
LCR_DEV void bulk_tensor_add_f32_4d(const TensorMap& map, const float* src, int c0, int c1, int c2,
                                    int c3) {
#if defined(LCR_WGMMA_BY_MMA_SYNC)
  (void)map, (void)src, (void)c0, (void)c1, (void)c2, (void)c3;
  no_bulk_engine();
#elif defined(LCR_CUDA_EMU)
  const int c[4] = {c0, c1, c2, c3};
  emu::bulk_tensor_add_f32(map.bytes, src, c);
#else
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group"
      " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(reinterpret_cast<uint64_t>(&map)),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}
LCR_DEV void bulk_commit() {
#if defined(LCR_WGMMA_BY_MMA_SYNC)
  no_bulk_engine();
#elif defined(LCR_CUDA_EMU)
  emu::bulk_commit();
#else
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int N>
LCR_DEV void bulk_wait_read() {
#if defined(LCR_WGMMA_BY_MMA_SYNC)
  no_bulk_engine();
#elif defined(LCR_CUDA_EMU)
  emu::bulk_wait(N);  // (performed here: the strictest order the hardware allows)
#else
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
template <int N>
LCR_DEV void bulk_wait() {
#if defined(LCR_WGMMA_BY_MMA_SYNC)
  no_bulk_engine();
#elif defined(LCR_CUDA_EMU)
  emu::bulk_wait(N);
#else
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

LCR_DEV void wgmma_fence() {
#if !defined(LCR_CUDA_EMU) && !defined(LCR_WGMMA_BY_MMA_SYNC)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
LCR_DEV void wgmma_commit() {
#if defined(LCR_WGMMA_BY_MMA_SYNC)
#elif defined(LCR_CUDA_EMU)
  emu::async_commit();
#else
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
LCR_DEV void wgmma_wait() {
#if defined(LCR_WGMMA_BY_MMA_SYNC)
#elif defined(LCR_CUDA_EMU)
  emu::async_wait(N);
#else
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// After a wait: the accumulators d[0 .. n-1] are read only from here on.
template <int n>
LCR_DEV void fence_regs(float* d) {
#if defined(LCR_CUDA_EMU)
  (void)d;
#else
  LCR_UNROLL
  for (int i = 0; i < n; ++i) asm volatile("" : "+f"(d[i])::"memory");
#endif
}

#if !defined(LCR_CUDA_EMU)
// The 32 accumulator operands of an m64n64 wgmma, %0 .. %31, shared by both asm forms below.
#define LCR_WGMMA_D_REGS                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define LCR_WGMMA_D16_OUTS(d)                                                                     \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15])
#define LCR_WGMMA_D_OUTS(d)                                                                      \
  LCR_WGMMA_D16_OUTS(d), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),        \
      "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
      "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#endif

#if defined(LCR_WGMMA_BY_MMA_SYNC)
namespace mma_sync_detail {
// ldmatrix .x4 at a shared-space byte address (desc_byte's).
LCR_DEV void ldsm_at(uint32_t r[4], uint32_t saddr, bool trans) {
#if defined(LCR_CUDA_EMU)
  emu_detail::ldmatrix(r, reinterpret_cast<const bf16*>(emu::shared_base() + saddr), trans);
#else
  if (trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr));
#endif
}
// The mma.sync A fragment (mma.cuh) of this warp's rows 16w .. 16w+15 of the 64 x 16 operand
// da names (K-major, or MN-major: read transposed). Row addresses as mma.cuh's load_a.
LCR_DEV void load_a(uint32_t a[4], uint64_t da, bool mn_major) {
  const int l = lane(), r0 = 16 * (warp() % 4);
  if (!mn_major)
    ldsm_at(a, desc_byte(da, false, r0 + (l & 15), (l >> 4) * 8), false);
  else
    ldsm_at(a, desc_byte(da, true, r0 + ((l >> 3) & 1) * 8, (l & 7) + ((l >> 4) << 3)), true);
}
// B fragments of columns n0 .. n0+15 of the 16 x N operand db names: b[0..1] columns n0 ..
// n0+7, b[2..3] n0+8 .. n0+15. Row addresses as mma.cuh's load_b.
LCR_DEV void load_b(uint32_t b[4], uint64_t db, bool mn_major, int n0) {
  const int l = lane();
  if (!mn_major)
    ldsm_at(b, desc_byte(db, false, n0 + (l & 7) + ((l >> 4) << 3), ((l >> 3) & 1) * 8), false);
  else
    ldsm_at(b, desc_byte(db, true, n0 + (l >> 4) * 8, (l & 7) + ((l >> 3) & 1) * 8), true);
}
// d[N / 2] = (acc ? d : 0) + A B over this warp's 16 rows: the m64nNk16 accumulator layout is
// the mma.sync C fragments side by side (this file's header).
template <int N>
LCR_DEV void product(float* d, const uint32_t a[4], uint64_t db, bool mn_major_b, bool acc) {
  if (!acc) {
    LCR_UNROLL
    for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  }
  LCR_UNROLL
  for (int j = 0; j < N / 16; ++j) {
    uint32_t b[4];
    load_b(b, db, mn_major_b, 16 * j);
    mma_bf16(d + 8 * j, a, b);
    mma_bf16(d + 8 * j + 4, a, b + 2);
  }
}
}  // namespace mma_sync_detail
#endif

// d[N / 2] = (acc ? d : 0) + A B (m64nNk16, N = 64 or 32), A and B from shared memory
// (descriptors da, db): A K-major (desc_k) unless kTransA, then MN-major (desc_mn of a tile
// holding A^T: the SDPA backward's dQ = dS K with dS stored as dS^T); B K-major when
// !kTransB, MN-major when kTransB (N = 64 only: desc_mn names 64 columns). With N = 32 the
// accumulators are the first four 8-column blocks of the m64n64 layout.
template <int kTransB, int kTransA = 0, int N = 64>
LCR_DEV void wgmma_ss(float* d, uint64_t da, uint64_t db, bool acc) {
  static_assert(N == 64 || (N == 32 && kTransB == 0), "wgmma_ss: m64n64, or m64n32 with K-major B");
#if defined(LCR_WGMMA_BY_MMA_SYNC)
  uint32_t a[4];
  mma_sync_detail::load_a(a, da, kTransA != 0);
  mma_sync_detail::product<N>(d, a, db, kTransB != 0, acc);
#elif defined(LCR_CUDA_EMU)
  const int w = warp() % 4, l = lane();
  emu::async_op([=] {
    emu_detail::wgmma_thread<N>(
        d, [&](int r, int k) { return emu_detail::desc_elem(da, kTransA != 0, r, k); }, db, kTransB,
        acc, w, l);
  });
#else
  if constexpr (N == 64)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " LCR_WGMMA_D_REGS
        ", %32, %33, p, 1, 1, %36, %35;\n}\n"
        : LCR_WGMMA_D_OUTS(d)
        : "l"(da), "l"(db), "r"(int(acc)), "n"(kTransB), "n"(kTransA));
  else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
        ", %16, %17, p, 1, 1, %20, %19;\n}\n"
        : LCR_WGMMA_D16_OUTS(d)
        : "l"(da), "l"(db), "r"(int(acc)), "n"(kTransB), "n"(kTransA));
#endif
}

// The same with A from registers: a[4] is the mma.sync A fragment of this warp's 16 rows.
template <int kTransB>
LCR_DEV void wgmma_rs(float* d, const uint32_t a[4], uint64_t db, bool acc) {
#if defined(LCR_WGMMA_BY_MMA_SYNC)
  mma_sync_detail::product<64>(d, a, db, kTransB != 0, acc);
#elif defined(LCR_CUDA_EMU)
  const int w = warp() % 4, l = lane();
  struct Frag {
    uint32_t a[4];
  } mine{{a[0], a[1], a[2], a[3]}};
  const unsigned char* all = emu::warp_exchange(&mine, sizeof mine);
  std::array<Frag, 32> warp_a;  // the warp's fragments, copied at issue
  for (int i = 0; i < 32; ++i)
    std::memcpy(&warp_a[i], all + i * emu::kExchangeStride, sizeof(Frag));
  emu::async_op([=] {
    auto a_of = [&](int r, int k) {  // row r of the warpgroup: row r % 16 of its warp's A
      return emu_detail::a_frag_elem([&](int ln) { return warp_a[ln]; }, r % 16, k);
    };
    emu_detail::wgmma_thread(d, a_of, db, kTransB, acc, w, l);
  });
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " LCR_WGMMA_D_REGS
      ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : LCR_WGMMA_D_OUTS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(int(acc)), "n"(kTransB));
#endif
}

// acc [64 x D] = X op(P) for a warpgroup: X a Swz [64 x D] tile, P a Swz [D x D] tile read
// MN-major (op(P) = P; kTransposeP false) or K-major (op(P) = P^T). The transitions of the
// scan (x <- P x per row: X P^T) and of dq (g P). The callers fenced X and P (fence_async_smem
// and a barrier); returns with the product complete and acc fenced.
template <int D, bool kTransposeP>
LCR_DEV void wgmma_times(float* acc, const bf16* X, const bf16* P) {
  wgmma_fence();
  LCR_UNROLL
  for (int k0 = 0; k0 < D; k0 += 16) LCR_UNROLL
  for (int hf = 0; hf < D / 64; ++hf)
    wgmma_ss<kTransposeP ? 0 : 1>(
        acc + 32 * hf, desc_k(X, 64, k0),
        kTransposeP ? desc_k(P, D, k0, 64 * hf) : desc_mn(P, D, k0, 64 * hf), k0 > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs<D / 2>(acc);
}

}  // namespace lcr::cuda::LCR_PATHK
