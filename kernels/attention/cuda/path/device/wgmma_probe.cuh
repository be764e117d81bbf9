#pragma once
// The wgmma probe kernel (tests/cuda/path, WgmmaProbe): the wgmma forms of wgmma.cuh on one
// warpgroup, checked against the hardware and the emulator's model. Its own header: a
// non-template kernel may be defined in one translation unit only, and wgmma.cuh is included
// by the SDPA's kernels too.
#include "kernels/attention/cuda/device/wgmma.cuh"

namespace lcr::cuda::LCR_PATHK {

// The wgmma forms the PaTH kernels use, on one warpgroup, for the tests (WgmmaProbe):
//   c1 = A B^T          A, B [64 x 128] (rows of 128), both K-major from Swz tiles
//   c2 = P B2           P [64 x 64] from registers (mma.sync A fragments read from global),
//                       B2 = B read as [64 x 128] (K = its rows), MN-major
//   c3 = bf16(c1) B2    c1's accumulators turned into A fragments (c_to_a), as dkv does
// c1 [64 x 64], c2 and c3 [64 x 128], fp32 row-major.
struct WgmmaProbeSmem {
  bf16 *A, *B;
  static LCR_HD std::size_t carve(SmemCarver& c, WgmmaProbeSmem* s) {
    WgmmaProbeSmem t;
    t.A = c.take_1k<bf16>(64 * 128);
    t.B = c.take_1k<bf16>(64 * 128);
    if (s) *s = t;
    return c.off;
  }
};

LCR_KERNEL_BOUNDS(128, 1)
void wgmma_probe_kernel(const bf16* A, const bf16* B, const bf16* P, float* c1, float* c2,
                        float* c3, bool fence) {
  check_smem_base();
  WgmmaProbeSmem s;
  SmemCarver carver{smem_base()};
  WgmmaProbeSmem::carve(carver, &s);
  async_swz<64, 128, 128>(s.A, A, 128, 64);
  async_swz<64, 128, 128>(s.B, B, 128, 64);
  cp_async_commit();
  cp_async_wait<0>();
  if (fence) fence_async_smem();  // !fence: the emulator's test that a missing fence is caught
  sync_cta();
  const int w = warp(), g = lane() >> 2, t = lane() & 3;
  float d1[32], d2[2][32], d3[2][32];
  // Fragments are formed before each fence, as the kernels do (a register written after the
  // fence makes ptxas add a wait of its own).
  uint32_t a[4][4];  // P's rows 16w + g (+8), columns 16kk + 2t (+1, +8, +9)
  const auto pair = [](const bf16* q) {
    return pack_bf16(__bfloat162float(q[0]), __bfloat162float(q[1]));
  };
  LCR_UNROLL
  for (int kk = 0; kk < 4; ++kk) {
    auto at = [&](int r, int c) { return P + (16 * w + r) * 64 + 16 * kk + c; };
    a[kk][0] = pair(at(g, 2 * t)), a[kk][1] = pair(at(g + 8, 2 * t));
    a[kk][2] = pair(at(g, 2 * t + 8)), a[kk][3] = pair(at(g + 8, 2 * t + 8));
  }
  // d = a B[0:64, :] with a from registers and B read MN-major, in two 64-column halves.
  const auto a_times_b = [&](float(&d)[2][32]) {
    LCR_UNROLL
    for (int kk = 0; kk < 4; ++kk) LCR_UNROLL
    for (int hf = 0; hf < 2; ++hf)
      wgmma_rs<1>(d[hf], a[kk], desc_mn(s.B, 64, 16 * kk, 64 * hf), kk > 0);
  };
  wgmma_fence();
  LCR_UNROLL
  for (int k0 = 0; k0 < 128; k0 += 16)
    wgmma_ss<0>(d1, desc_k(s.A, 64, k0), desc_k(s.B, 64, k0), k0 > 0);
  a_times_b(d2);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs<32>(d1);
  fence_regs<32>(d2[0]);
  fence_regs<32>(d2[1]);
  LCR_UNROLL
  for (int kk = 0; kk < 4; ++kk) c_to_a(a[kk], d1 + 8 * kk, d1 + 8 * kk + 4);
  wgmma_fence();
  a_times_b(d3);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs<32>(d3[0]);
  fence_regs<32>(d3[1]);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 4; ++i) {
      const int r = 16 * w + g + (i >= 2 ? 8 : 0), n = 8 * j + 2 * t + (i & 1);
      c1[r * 64 + n] = d1[4 * j + i];
      for (int hf = 0; hf < 2; ++hf) {
        c2[r * 128 + 64 * hf + n] = d2[hf][4 * j + i];
        c3[r * 128 + 64 * hf + n] = d3[hf][4 * j + i];
      }
    }
}

}  // namespace lcr::cuda::LCR_PATHK
