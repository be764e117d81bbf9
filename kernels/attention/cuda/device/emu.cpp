// The SIMT emulator of emu.hpp: fibers switched by hand-written x86-64 assembly (about
// 10 ns a switch, against ~1 us for swapcontext's signal-mask system calls: the kernels
// meet a warp barrier at every mma, so switch cost is what bounds the emulator's speed).
#include "kernels/attention/cuda/device/emu.hpp"

#include <sys/mman.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/attention/cuda/device/tensor_map.hpp"

#if !defined(__x86_64__)
#error "the lcr SIMT emulator switches fibers with x86-64 assembly"
#endif

extern "C" void lcr_emu_switch(void** save_sp, void* new_sp);
extern "C" void lcr_emu_trampoline();
extern "C" void lcr_emu_fiber_main(void* fiber);

// lcr_emu_switch(save, next): pushes the callee-saved registers, stores the stack pointer in
// *save, loads `next` and pops the other fiber's registers. A new fiber's stack is built so
// that its first switch "returns" into lcr_emu_trampoline with the Fiber* in r12.
asm(R"(
  .text
  .globl lcr_emu_switch
  .type lcr_emu_switch,@function
lcr_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size lcr_emu_switch, .-lcr_emu_switch
  .globl lcr_emu_trampoline
  .type lcr_emu_trampoline,@function
lcr_emu_trampoline:
  movq %r12, %rdi
  andq $-16, %rsp
  call lcr_emu_fiber_main@PLT
  ud2
  .size lcr_emu_trampoline, .-lcr_emu_trampoline
)");

namespace lcr::emu {
namespace {

constexpr std::size_t kStackBytes = 256 * 1024;
constexpr std::size_t kPage = 4096;

struct Copy {
  void* dst;
  const void* src;
  bool valid;
  long group;
  int bytes;  // 16 or 4
};

// A queued wgmma: its commit group, the operation, and the async proxy's view of shared memory
// when it was issued (what the hardware may read from then on).
struct MmaOp {
  long group;
  std::function<void()> op;
  std::shared_ptr<const std::vector<unsigned char>> view;
};

// A queued tensor bulk reduction: source offset in shared memory, bytes, its bulk group, the
// async proxy's view when it was issued, the map and the box coordinates.
struct BulkOp {
  std::size_t src, bytes;
  long group;
  std::shared_ptr<const std::vector<unsigned char>> view;
  lcr::cuda::TensorMapF32Desc map{};
  int coord[4] = {};
};

// Its additions: box element e (dim 0 fastest) from the source's byte offset
// (128-byte swizzle: address bits 4-6 ^= bits 7-9, the source 1024-byte aligned) into global
// memory, skipping elements outside the tensor.
void perform_tensor_add(const BulkOp& b, const unsigned char* seen) {
  const auto& m = b.map;
  std::size_t e = 0;
  for (uint32_t x3 = 0; x3 < m.box[3]; ++x3)
    for (uint32_t x2 = 0; x2 < m.box[2]; ++x2)
      for (uint32_t x1 = 0; x1 < m.box[1]; ++x1)
        for (uint32_t x0 = 0; x0 < m.box[0]; ++x0, ++e) {
          const int64_t c[4] = {int64_t(b.coord[0]) + x0, int64_t(b.coord[1]) + x1,
                                int64_t(b.coord[2]) + x2, int64_t(b.coord[3]) + x3};
          bool inside = true;
          std::size_t off = 0;
          for (int i = 0; i < 4; ++i) {
            inside = inside && c[i] >= 0 && uint64_t(c[i]) < m.dim[i];
            off += std::size_t(c[i]) * m.stride[i];
          }
          if (!inside) continue;
          std::size_t o = 4 * e;
          if (m.swizzle128) o ^= ((o >> 7) & 7) << 4;
          float x;
          std::memcpy(&x, seen + o, 4);
          *reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(m.base) + off) += x;
        }
}

struct Fiber {
  void* sp = nullptr;
  unsigned char* stack = nullptr;  // mmap'ed, lowest page is a guard page
  unsigned tid = 0;
  bool done = false;
  long warp_ops = 0;   // parity of the warp exchange buffer
  long committed = 0;  // cp.async groups committed
  std::vector<Copy> copies;
  bool fenced = false;     // fence.proxy.async since the last block barrier
  long mma_committed = 0;  // wgmma groups committed
  std::vector<MmaOp> mma_ops;
  long bulk_committed = 0;  // bulk groups committed
  std::vector<BulkOp> bulk_ops;
};

struct Barrier {
  int arrived = 0, expected = 0;
  long gen = 0;
};

struct Block {
  Dim3 bid, bdim, gdim;
  unsigned char* smem = nullptr;
  std::size_t smem_bytes = 0;
  Barrier bar;
  std::vector<Barrier> warp_bar;
  std::vector<std::array<unsigned char, 2 * 32 * kExchangeStride>> exch;
  int alive = 0;
  int fenced = 0;  // threads that fenced since the last block barrier
  // Shared memory as the async proxy (wgmma) sees it: a new snapshot at each publishing
  // barrier, so an operation queued before it keeps the view it was issued against.
  std::shared_ptr<const std::vector<unsigned char>> async_view;
};

std::vector<Fiber> g_fibers;
Fiber* g_cur = nullptr;
void* g_sched_sp = nullptr;
Block g_block;
long g_progress = 0;
const std::function<void()>* g_body = nullptr;
std::vector<unsigned char> g_smem_storage;

void yield() { lcr_emu_switch(&g_cur->sp, g_sched_sp); }

void wait(Barrier& b, void (*on_release)() = nullptr) {
  const long gen = b.gen;
  ++g_progress;
  if (++b.arrived >= b.expected) {
    b.arrived = 0;
    ++b.gen;
    if (on_release) on_release();
    return;
  }
  while (b.gen == gen) yield();
}

// A thread that exits no longer counts at barriers (as on the hardware since Volta).
void leave(Barrier& b) {
  --b.expected;
  if (b.arrived > 0 && b.arrived >= b.expected) {
    b.arrived = 0;
    ++b.gen;
  }
}

void perform(const Copy& c) {
  if (c.valid)
    std::memcpy(c.dst, c.src, std::size_t(c.bytes));
  else
    std::memset(c.dst, 0, std::size_t(c.bytes));
}

void prepare_stack(Fiber& f) {
  if (!f.stack) {
    void* p = mmap(nullptr, kStackBytes + kPage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("emu: cannot map a fiber stack");
    mprotect(p, kPage, PROT_NONE);  // overflow faults instead of corrupting memory
    f.stack = static_cast<unsigned char*>(p);
  }
  // Initial frame, lowest address first: r15 r14 r13 r12 rbx rbp, return -> trampoline.
  auto* top = reinterpret_cast<std::uintptr_t*>(f.stack + kPage + kStackBytes);
  top -= 8;  // keep 64 bytes of headroom above the frame
  std::uintptr_t* sp = top - 7;
  for (int i = 0; i < 6; ++i) sp[i] = 0;
  sp[3] = reinterpret_cast<std::uintptr_t>(&f);  // r12
  sp[6] = reinterpret_cast<std::uintptr_t>(&lcr_emu_trampoline);
  f.sp = sp;
}

}  // namespace
}  // namespace lcr::emu

extern "C" void lcr_emu_fiber_main(void* p) {
  using namespace lcr::emu;
  auto* f = static_cast<Fiber*>(p);
  (*g_body)();
  for (const Copy& c : f->copies) perform(c);  // copies outlive a thread on the hardware too
  f->copies.clear();
  if (!f->mma_ops.empty()) fail("emu: thread exits with wgmma operations in flight (no wait)");
  if (!f->bulk_ops.empty())
    fail(
        "emu: thread exits with bulk reductions in flight (no bulk_wait: their shared source "
        "is freed with the block)");
  f->done = true;
  --g_block.alive;
  ++g_progress;
  leave(g_block.bar);
  leave(g_block.warp_bar[f->tid / 32]);
  lcr_emu_switch(&f->sp, g_sched_sp);
  __builtin_trap();  // a finished fiber is never resumed
}

namespace lcr::emu {

unsigned thread_x() { return g_cur->tid; }
unsigned block_x() { return g_block.bid.x; }
unsigned block_y() { return g_block.bid.y; }
unsigned block_z() { return g_block.bid.z; }
unsigned block_dim_x() { return g_block.bdim.x; }
unsigned grid_dim_x() { return g_block.gdim.x; }
unsigned grid_dim_y() { return g_block.gdim.y; }
unsigned char* shared_base() { return g_block.smem; }
std::size_t shared_bytes() { return g_block.smem_bytes; }

// A block barrier that every live thread reached after fence_async publishes shared memory to
// the async proxy's view (wgmma reads compare the two: wgmma.cuh).
void publish_async_view() {
  if (g_block.fenced >= g_block.alive)
    g_block.async_view = std::make_shared<const std::vector<unsigned char>>(
        g_block.smem, g_block.smem + g_block.smem_bytes);
  g_block.fenced = 0;
  for (unsigned t = 0; t < g_block.bdim.x; ++t) g_fibers[t].fenced = false;
}

void sync_block() { wait(g_block.bar, publish_async_view); }

void fence_async() {
  if (!g_cur->fenced) g_cur->fenced = true, ++g_block.fenced;
}

// The view of the operation being performed (async_wait), else the current one.
const std::vector<unsigned char>* g_op_view = nullptr;
const unsigned char* async_view() { return (g_op_view ? *g_op_view : *g_block.async_view).data(); }

void sync_warp() {
  Barrier& b = g_block.warp_bar[g_cur->tid / 32];
  if (b.expected != 32) fail("emu: __syncwarp with exited lanes");
  wait(b);
}

const unsigned char* warp_exchange(const void* mine, std::size_t bytes) {
  if (bytes > kExchangeStride) fail("emu: warp exchange of more than 64 bytes");
  const unsigned w = g_cur->tid / 32, lane = g_cur->tid % 32;
  Barrier& b = g_block.warp_bar[w];
  if (b.expected != 32) fail("emu: warp-collective operation with exited lanes");
  // Two buffers used alternately: a lane can only write this parity again after every
  // lane has passed the next operation's barrier, i.e. finished reading this one.
  unsigned char* buf = g_block.exch[w].data() + (g_cur->warp_ops & 1) * 32 * kExchangeStride;
  std::memcpy(buf + lane * kExchangeStride, mine, bytes);
  ++g_cur->warp_ops;
  wait(b);
  return buf;
}

namespace {
void cp_async(void* dst, const void* src, bool valid, int bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  if (d < g_block.smem || d + bytes > g_block.smem + g_block.smem_bytes)
    fail("emu: cp.async destination outside the block's shared memory");
  const auto misaligned = [&](const void* q) {
    return (reinterpret_cast<std::uintptr_t>(q) & std::uintptr_t(bytes - 1)) != 0;
  };
  if (misaligned(dst) || (valid && misaligned(src)))
    fail(bytes == 16 ? "emu: cp.async address not 16-byte aligned"
                     : "emu: cp.async address not 4-byte aligned");
  g_cur->copies.push_back({dst, src, valid, g_cur->committed, bytes});
}
}  // namespace

void cp_async16(void* dst, const void* src, bool valid) { cp_async(dst, src, valid, 16); }
void cp_async4(void* dst, const void* src, bool valid) { cp_async(dst, src, valid, 4); }

void cp_async_commit() { ++g_cur->committed; }

namespace {
// Performs (in issue order) the queued items of the groups before `limit`, keeps the rest.
template <class Item, class Group, class Perform>
void drain(std::vector<Item>& items, long limit, Group group_of, Perform perform) {
  std::size_t keep = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (group_of(items[i]) < limit)
      perform(items[i]);
    else
      items[keep++] = std::move(items[i]);
  }
  items.resize(keep);
}
}  // namespace

void cp_async_wait(int pending) {
  drain(
      g_cur->copies, g_cur->committed - pending, [](const Copy& c) { return c.group; },
      [](const Copy& c) { perform(c); });
}

void async_op(std::function<void()> op) {
  g_cur->mma_ops.push_back(MmaOp{g_cur->mma_committed, std::move(op), g_block.async_view});
}

void async_commit() { ++g_cur->mma_committed; }

void async_wait(int pending) {
  drain(
      g_cur->mma_ops, g_cur->mma_committed - pending, [](const MmaOp& m) { return m.group; },
      [](MmaOp& m) {
        g_op_view = m.view.get();
        m.op();
        g_op_view = nullptr;
      });
}

void bulk_tensor_add_f32(const void* map, const float* src, const int coord[4]) {
  BulkOp op{0, 0, g_cur->bulk_committed, g_block.async_view, lcr::cuda::emu_tensor_desc(map)};
  const auto& m = op.map;
  op.bytes = std::size_t(4) * m.box[0] * m.box[1] * m.box[2] * m.box[3];
  const auto* s = reinterpret_cast<const unsigned char*>(src);
  if (s < g_block.smem || s + op.bytes > g_block.smem + g_block.smem_bytes)
    fail("emu: tensor bulk reduction source outside the block's shared memory");
  op.src = std::size_t(s - g_block.smem);
  if (op.src % (m.swizzle128 ? 1024 : 128))
    fail("emu: tensor bulk reduction source not 128-byte (swizzled: 1024-byte) aligned");
  if (m.swizzle128 && m.box[0] * 4 != 128)
    fail("emu: a 128-byte swizzled box needs 128-byte rows (box[0] = 32 fp32)");
  if ((reinterpret_cast<std::uintptr_t>(m.base) & 15) || m.stride[0] != 4 || m.stride[1] % 16 ||
      m.stride[2] % 16 || m.stride[3] % 16)
    fail("emu: tensor map base or strides not 16-byte multiples (dim 0 must be contiguous)");
  for (int i = 0; i < 4; ++i) {
    if (m.box[i] == 0 || m.box[i] > 256) fail("emu: tensor map box extents must be 1 .. 256");
    op.coord[i] = coord[i];
  }
  g_cur->bulk_ops.push_back(std::move(op));
}

void bulk_commit() { ++g_cur->bulk_committed; }

void bulk_wait(int pending) {
  drain(
      g_cur->bulk_ops, g_cur->bulk_committed - pending, [](const BulkOp& b) { return b.group; },
      [](const BulkOp& b) {
        const unsigned char* seen = b.view->data() + b.src;
        if (std::memcmp(seen, g_block.smem + b.src, b.bytes) != 0)
          fail(
              "emu: a bulk reduction's shared source differs from the async proxy's view of "
              "its issue: fence_async_smem() and a barrier are missing after it was written, "
              "or it was overwritten before bulk_wait");
        perform_tensor_add(b, seen);
      });
}

void launch(Dim3 grid, Dim3 block, std::size_t smem_bytes, const std::function<void()>& body) {
  if (block.y != 1 || block.z != 1 || block.x % 32 != 0 || block.x == 0 || block.x > 1024)
    fail("emu: blocks must be one-dimensional with a multiple of 32 threads (<= 1024)");
  if (smem_bytes > 227 * 1024) fail("emu: more than 227 KiB of shared memory per block");
  const unsigned n = block.x;
  if (g_fibers.size() < n) g_fibers.resize(n);
  g_smem_storage.assign(smem_bytes + 1024, 0);
  unsigned char* smem = g_smem_storage.data();
  smem += (1024 - reinterpret_cast<std::uintptr_t>(smem) % 1024) % 1024;
  g_body = &body;
  long index = 0;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx, ++index) {
        Block& B = g_block;
        B.bid = {bx, by, bz};
        B.bdim = block;
        B.gdim = grid;
        B.smem = smem;
        B.smem_bytes = smem_bytes;
        std::memset(smem, 0xFF, smem_bytes);  // NaN in bf16 and fp32
        B.bar = Barrier{0, int(n), 0};
        B.warp_bar.assign(n / 32, Barrier{0, 32, 0});
        B.exch.resize(n / 32);
        B.alive = int(n);
        B.fenced = 0;
        // the poison, as the generic view
        B.async_view = std::make_shared<const std::vector<unsigned char>>(smem, smem + smem_bytes);
        for (unsigned t = 0; t < n; ++t) {
          Fiber& f = g_fibers[t];
          f.tid = t;
          f.done = false;
          f.warp_ops = 0;
          f.committed = 0;
          f.copies.clear();
          f.mma_committed = 0;
          f.mma_ops.clear();
          f.bulk_committed = 0;
          f.bulk_ops.clear();
          f.fenced = false;
          prepare_stack(f);
        }
        const bool reverse = index % 2 == 1;
        while (B.alive > 0) {
          const long before = g_progress;
          for (unsigned i = 0; i < n; ++i) {
            Fiber& f = g_fibers[reverse ? n - 1 - i : i];
            if (f.done) continue;
            g_cur = &f;
            lcr_emu_switch(&g_sched_sp, f.sp);
          }
          if (g_progress == before && B.alive > 0)
            fail("emu: deadlock (a barrier that not every thread of the block reaches)");
        }
        g_cur = nullptr;
      }
}

void fail(const char* what) {
  if (g_cur)
    std::fprintf(stderr, "%s [block (%u,%u,%u) thread %u]\n", what, g_block.bid.x, g_block.bid.y,
                 g_block.bid.z, g_cur->tid);
  else
    std::fprintf(stderr, "%s\n", what);
  std::abort();
}

}  // namespace lcr::emu
