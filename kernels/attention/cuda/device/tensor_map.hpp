#pragma once
// Tensor maps of the TMA engine (sm_90) for lcr's kernels, in both builds of device/simt.cuh:
// a kernel takes a TensorMap by value as a __grid_constant__ parameter and hands its address
// to the tensor instructions (wgmma.cuh, bulk_tensor_add_f32_4d). On the GPU its 128 bytes are
// the driver's CUtensorMap (cuda_tensor_map, tensor_map.cpp); in the emulator build they hold
// the TensorMapF32Desc itself (emu_tensor_map), which device/emu.cpp reads back.
#include <cstdint>
#include <cstring>

namespace lcr::cuda {

// A 4-D fp32 tensor in global memory, dimension 0 contiguous (the driver's order: dim[0] is the
// innermost), and the box one tensor instruction moves: box[0] x box[1] x box[2] x box[3]
// elements, dense in shared memory in the same order; swizzle128: the smem box is stored with
// the 128-byte swizzle (16-byte chunk k of each 128-byte row r at chunk k ^ (r % 8); box[0] * 4
// must then be 128 and the smem box 1024-byte aligned). Elements outside dim are skipped.
struct TensorMapF32Desc {
  float* base = nullptr;    // 16-byte aligned
  uint64_t dim[4] = {};     // extents, elements
  uint64_t stride[4] = {};  // bytes; stride[0] = 4, the others multiples of 16
  uint32_t box[4] = {};     // <= 256 each
  bool swizzle128 = false;
};

struct alignas(128) TensorMap {  // CUtensorMap's size and alignment
  unsigned char bytes[128];
};
static_assert(sizeof(TensorMapF32Desc) <= sizeof(TensorMap), "the emulator's map fits");

inline TensorMap emu_tensor_map(const TensorMapF32Desc& d) {
  TensorMap m{};
  std::memcpy(m.bytes, &d, sizeof d);
  return m;
}
inline TensorMapF32Desc emu_tensor_desc(const void* map) {
  TensorMapF32Desc d;
  std::memcpy(&d, map, sizeof d);
  return d;
}

// The driver's encoding of d into *m (cuTensorMapEncodeTiled, found through the runtime's
// driver entry points, so nothing links libcuda). False, with *m untouched, when the driver
// has no such entry point or refuses the description (the callers then take another path).
bool cuda_tensor_map(TensorMap* m, const TensorMapF32Desc& d);

}  // namespace lcr::cuda
