#pragma once
// The device facilities lcr's hand-written Hopper kernels use (PaTH's kernels, the SDPA's wgmma
// forward), for two builds of the same source:
//  - nvcc (the GPU): CUDA built-ins and inline PTX;
//  - a host C++ compiler with LCR_CUDA_EMU defined: the SIMT emulator of emu.hpp, so the
//    kernels run (slowly, exactly) on a machine without a GPU and their tests check the
//    fragment layouts, indexing and barriers there.
// Kernels call only what is declared here, in mma.cuh and in wgmma.cuh. Their namespace is
// lcr::cuda::LCR_PATHK (pathk, or pathk_emu in the emulator build), named after its first user;
// the SDPA's wgmma kernels have theirs, lcr::cuda::LCR_SDPAWG (sdpawg / sdpawg_emu), and its
// mma.sync kernels lcr::cuda::LCR_SDPAMMA (sdpamma / sdpamma_emu).
#include <cuda_bf16.h>
#include <vector_types.h>

#include <cmath>
#include <cstdint>

#if defined(LCR_CUDA_EMU)
#include <cstring>
// The emulator builds live in their own namespaces, so every build can link into one binary:
// pathk_emu models Hopper (wgmma), pathk_emu_mma the form without wgmma (wgmma.cuh).
#if defined(LCR_CUDA_EMU_MMA_SYNC)
#define LCR_PATHK pathk_emu_mma
#define LCR_SDPAWG sdpawg_emu_mma
#define LCR_SDPAMMA sdpamma_emu_mma
#else
#define LCR_PATHK pathk_emu
#define LCR_SDPAWG sdpawg_emu
#define LCR_SDPAMMA sdpamma_emu
#endif

#include "kernels/attention/cuda/device/emu.hpp"
#define LCR_DEV inline
#define LCR_HD inline
#define LCR_KERNEL inline
#define LCR_KERNEL_BOUNDS(threads, blocks) inline
#define LCR_KERNEL_THREADS(threads) inline
#define LCR_GRID_CONSTANT
#define LCR_UNROLL
#define LCR_UNROLL4
#define LCR_NO_UNROLL
#else
#include <cuda_runtime.h>
#define LCR_PATHK pathk
#define LCR_SDPAWG sdpawg
#define LCR_SDPAMMA sdpamma
#define LCR_DEV __device__ __forceinline__
#define LCR_HD __host__ __device__ __forceinline__
#define LCR_KERNEL __global__
#define LCR_KERNEL_BOUNDS(threads, blocks) __global__ __launch_bounds__(threads, blocks)
#define LCR_KERNEL_THREADS(threads) __global__ __launch_bounds__(threads)
// A kernel parameter whose address the kernel takes (a TensorMap for the TMA engine).
#define LCR_GRID_CONSTANT __grid_constant__
#define LCR_UNROLL _Pragma("unroll")
#define LCR_UNROLL4 _Pragma("unroll 4")
#define LCR_NO_UNROLL _Pragma("unroll 1")
#endif

namespace lcr::cuda::LCR_PATHK {

using bf16 = __nv_bfloat16;

#if defined(LCR_CUDA_EMU)
LCR_DEV int tid() { return int(emu::thread_x()); }
LCR_DEV int bid_x() { return int(emu::block_x()); }
LCR_DEV int bid_y() { return int(emu::block_y()); }
LCR_DEV int bid_z() { return int(emu::block_z()); }
LCR_DEV int nthreads() { return int(emu::block_dim_x()); }
LCR_DEV unsigned char* smem_base() { return emu::shared_base(); }
LCR_DEV void sync_cta() { emu::sync_block(); }
LCR_DEV void sync_warp() { emu::sync_warp(); }
LCR_DEV float shfl_xor(float v, int m) {
  const unsigned char* all = emu::warp_exchange(&v, sizeof v);
  float r;
  std::memcpy(&r, all + ((tid() % 32) ^ m) * emu::kExchangeStride, sizeof r);
  return r;
}
LCR_DEV void atomic_add(float* p, float v) { *p += v; }
LCR_DEV void atomic_add2(float* p, float a, float b) { p[0] += a, p[1] += b; }
LCR_DEV void store_f32x2(float* p, float a, float b) { p[0] = a, p[1] = b; }
LCR_DEV float load_ro(const float* p) { return *p; }
struct F4 {
  float x, y, z, w;
};
LCR_DEV F4 load_ro4(const float* p) { return F4{p[0], p[1], p[2], p[3]}; }
LCR_DEV float fast_exp2(float x) { return std::exp2(x); }
LCR_DEV float fast_log2(float x) { return std::log2(x); }
LCR_DEV float fast_tanh(float x) { return std::tanh(x); }
#else
LCR_DEV int tid() { return int(threadIdx.x); }
LCR_DEV int bid_x() { return int(blockIdx.x); }
LCR_DEV int bid_y() { return int(blockIdx.y); }
LCR_DEV int bid_z() { return int(blockIdx.z); }
LCR_DEV int nthreads() { return int(blockDim.x); }
LCR_DEV unsigned char* smem_base() {
  extern __shared__ __align__(16) unsigned char lcr_path_smem[];
  return lcr_path_smem;
}
LCR_DEV void sync_cta() { __syncthreads(); }
LCR_DEV void sync_warp() { __syncwarp(); }
LCR_DEV float shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
LCR_DEV void atomic_add(float* p, float v) { atomicAdd(p, v); }
// p[0] += a, p[1] += b as one 8-byte reduction (red.global.add.v2.f32, sm_90; two 4-byte
// ones before); p 8-byte aligned.
LCR_DEV void atomic_add2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#else
  atomicAdd(reinterpret_cast<float2*>(p), make_float2(a, b));
#endif
}
// p[0] = a, p[1] = b as one 8-byte store; p 8-byte aligned.
LCR_DEV void store_f32x2(float* p, float a, float b) {
  *reinterpret_cast<float2*>(p) = make_float2(a, b);
}
// A load of data no kernel of the call writes (ld.global.nc): free to be issued ahead of the
// stores around it, which a plain load is not when the stores may alias it.
LCR_DEV float load_ro(const float* p) { return __ldg(p); }
struct F4 {
  float x, y, z, w;
};
// Four floats from a 16-byte-aligned address, the same way (one 16-byte ld.global.nc).
LCR_DEV F4 load_ro4(const float* p) {
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  return F4{v.x, v.y, v.z, v.w};
}
// ex2.approx.ftz (the SDPA's): one MUFU instruction. exp2f without fast-math adds the
// denormal range fix-up around it, which the probabilities (stored as bf16) do not need.
LCR_DEV float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
LCR_DEV float fast_log2(float x) { return log2f(x); }
LCR_DEV float fast_tanh(float x) { return tanhf(x); }
#endif

LCR_DEV int lane() { return tid() & 31; }
LCR_DEV int warp() { return tid() >> 5; }

// Carves 16-byte-aligned arrays out of dynamic shared memory, in declaration order. The
// host runs the same carving with a null base to learn the total (off at the end).
struct SmemCarver {
  unsigned char* base = nullptr;
  std::size_t off = 0;
  template <class T>
  LCR_HD T* take(std::size_t count) {
    off = (off + 15) & ~std::size_t(15);
    T* p = base ? reinterpret_cast<T*>(base + off) : nullptr;
    off += count * sizeof(T);
    return p;
  }
  // The same on a 1024-byte boundary (wgmma's swizzled tiles, wgmma.cuh; the dynamic shared
  // memory base is 1024-aligned: check_smem_base).
  template <class T>
  LCR_HD T* take_1k(std::size_t count) {
    off = (off + 1023) & ~std::size_t(1023);
    return take<T>(count);
  }
};

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

}  // namespace lcr::cuda::LCR_PATHK
