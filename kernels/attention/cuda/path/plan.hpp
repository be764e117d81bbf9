#pragma once
// Host-side sizing of a PaTH call (shared by the GPU and the emulator builds): padded
// length, superchunk, and where each workspace array lives.
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/attention/cuda/path/path.hpp"

namespace lcr::cuda::path::detail {

struct Plan {
  int Lp = 0, nb = 0, R = 0, nS = 0;
  int mt = 1;  // rows per warp / 16 of the backward's carry kernel
  float scale = 1.f;
  int64_t zrows = 0;
  // Byte offsets of the workspace arrays (params.cuh names them); SIZE_MAX = not used.
  std::size_t qf, kf, ks, pf, ps, o_part, m_part, l_part;
  std::size_t suf, delta, xf, gf, zc, gc, dqf, dks, dkf, dpf, dps, utg, utl, ute;
  // Span boundary folds (device/fold.cuh), only when asked for.
  int rg = 0, ng = 0;
  std::size_t fpre, fsuf, flp, fls, fgg, fgp, fgs, fdgg, fdgp, fdgs, ftot;
  std::size_t bytes = 0;
};

// Superchunk length R fine blocks: about sqrt(number of blocks), which balances the fine
// transitions (R/2 per query) against the coarse ones (nS/2), even, >= 2.
Plan make_plan(const Args& a, bool backward, bool folds = false);

// Per-kernel timing for the benchmark (GPU build): while on, every launch is bracketed by CUDA
// events; the report synchronises and lists the summed milliseconds per kernel name.
void set_profiling(bool on);
std::string profile_report();
// A host-side phase (the chunked PaTH's steps, chunked.hpp) timed like a kernel while profiling
// is on: events around everything enqueued on s between the two calls; phases may nest.
void profile_begin(const char* name, cudaStream_t s);
void profile_end(cudaStream_t s);

// The wgmma forms of the kernels on one warpgroup (device/wgmma.cuh, wgmma_probe_kernel), for
// the tests: A, B [64 x 128], P [64 x 64] bf16; c1 = A B^T [64 x 64], c2 = P B and
// c3 = bf16(c1) B [64 x 128], fp32, row-major. Device pointers (synchronises), or host
// pointers for the emulator's form; fence = false leaves out the async-proxy fence before the
// products (the emulator then aborts: its test of that check).
void wgmma_probe(const __nv_bfloat16* A, const __nv_bfloat16* B, const __nv_bfloat16* P, float* c1,
                 float* c2, float* c3);
void wgmma_probe_emu(const __nv_bfloat16* A, const __nv_bfloat16* B, const __nv_bfloat16* P,
                     float* c1, float* c2, float* c3, bool fence = true);
// The emulator's form without wgmma (each product by mma.sync, as sm_80 .. sm_89 run it).
void wgmma_probe_emu_mma(const __nv_bfloat16* A, const __nv_bfloat16* B, const __nv_bfloat16* P,
                         float* c1, float* c2, float* c3, bool fence = true);

}  // namespace lcr::cuda::path::detail
