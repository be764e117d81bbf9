#pragma once
// A small SIMT emulator that runs lcr's CUDA kernels written against device/simt.cuh (PaTH's,
// the SDPA's wgmma forward) on the CPU, for machines without
// a GPU (the development machine, CI). Kernels are compiled as host C++ with LCR_CUDA_EMU
// defined (device/simt.cuh maps the few device facilities they use onto this API):
//
//  - every CUDA thread of a block is a fiber (its own stack, switched by a few lines of
//    assembly); the blocks of a grid run one after the other;
//  - __syncthreads is a barrier over the block's fibers; warp-collective operations
//    (mma.sync, ldmatrix, shuffles, wgmma's register operand) deposit each lane's
//    operands, meet at a warp barrier and compute each lane's result exactly as the PTX ISA
//    lays the fragments out;
//  - wgmma's products are queued per thread and performed at wgmma.wait_group (async_op),
//    reading shared memory through the matrix descriptors (device/wgmma.cuh);
//  - cp.async copies are queued per thread and performed only at cp.async.wait_group, so
//    a kernel that reads a tile before waiting for it reads stale data and fails its test;
//  - shared memory is poisoned (all bytes 0xFF: NaN in bf16 and fp32) at every block start,
//    and the fibers of odd blocks run in reverse order, so a missing barrier between a
//    writer and a reader shows up in one order or the other.
//
// What it cannot show: speed, register pressure, and races that need true concurrency.
// Deadlocks (a barrier not reached by every thread) abort with a message.
#include <cstddef>
#include <cstdint>
#include <functional>

namespace lcr::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// Identity of the running fiber.
unsigned thread_x();
unsigned block_x();
unsigned block_y();
unsigned block_z();
unsigned block_dim_x();
unsigned grid_dim_x();
unsigned grid_dim_y();

// Dynamic shared memory of the running block (1024-byte aligned, as the 128-byte swizzle
// atoms of wgmma operands need; device/wgmma.cuh counts shared addresses from it).
unsigned char* shared_base();
std::size_t shared_bytes();

void sync_block();  // __syncthreads
void sync_warp();   // __syncwarp

// Warp collective: every lane of the calling warp deposits `bytes` (<= 64) bytes; returns
// the base of a [32][64]-byte array holding all lanes' deposits of this operation.
const unsigned char* warp_exchange(const void* mine, std::size_t bytes);
constexpr std::size_t kExchangeStride = 64;

// cp.async emulation (16- and 4-byte copies, zero fill when !valid).
void cp_async16(void* smem_dst, const void* gmem_src, bool valid);
void cp_async4(void* smem_dst, const void* gmem_src, bool valid);
void cp_async_commit();
void cp_async_wait(int pending_groups);

// Hopper's asynchronous warpgroup MMA (wgmma.mma_async) emulation: an operation the running
// thread queues is performed only at async_wait, when at most `pending_groups` committed
// groups remain, so a kernel that reads its accumulators (or overwrites the operands in shared
// memory) before waiting computes stale or wrong values and fails its test. A thread that
// exits with operations in flight aborts.
void async_op(std::function<void()> op);
// fence.proxy.async by the running thread. The async proxy's view of shared memory
// (async_view(), the block's shared_bytes()) is refreshed from the generic one at a block
// barrier that every live thread reached after such a fence, a stricter rule than the PTX
// ISA's (each writing thread fences, then a barrier) that lcr's kernels follow: every thread
// fences before the barriers that precede a wgmma. An operation reads the view of its issue
// (async_view() while it is performed): an operand published only by a barrier after the
// issue is a race on the hardware and differs from it here.
void fence_async();
const unsigned char* async_view();
void async_commit();
void async_wait(int pending_groups);

// Tensor bulk reductions from shared to global memory (cp.reduce.async.bulk.tensor .add, fp32,
// bulk groups): the box of the map (the bytes of an emu_tensor_map, device/tensor_map.hpp) at
// element coordinates coord[0..3] += the dense (or 128-byte swizzled) box at smem_src, elements
// outside the tensor skipped. Queued per thread and performed at bulk_wait, reading the async
// proxy's view of the issue (published by fence_async and a barrier, as for wgmma), so a source
// written but not published reads stale data; one whose shared bytes changed before the wait
// (the engine may read them any time until then) aborts, as does a thread that exits with one
// in flight.
void bulk_tensor_add_f32(const void* map, const float* smem_src, const int coord[4]);
void bulk_commit();
void bulk_wait(int pending_groups);

// Runs body() on every thread of every block; returns when the grid is done.
void launch(Dim3 grid, Dim3 block, std::size_t smem_bytes, const std::function<void()>& body);

// Aborts with a message naming the block and thread (for device-side assertions).
[[noreturn]] void fail(const char* what);

}  // namespace lcr::emu
