// The driver's tensor maps for device/tensor_map.hpp (GPU builds).
#include "kernels/attention/cuda/device/tensor_map.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <mutex>

namespace lcr::cuda {

static_assert(sizeof(CUtensorMap) == sizeof(TensorMap) &&
                  alignof(CUtensorMap) <= alignof(TensorMap),
              "TensorMap holds a CUtensorMap");

namespace {
PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    else
      (void)cudaGetLastError();  // leave no sticky error for the caller's next check
  });
  return fn;
}
}  // namespace

bool cuda_tensor_map(TensorMap* m, const TensorMapF32Desc& d) {
  const auto fn = encode_fn();
  if (!fn) return false;
  CUtensorMap out;
  cuuint64_t dim[4], stride[3];
  cuuint32_t box[4], estride[4] = {1, 1, 1, 1};
  for (int i = 0; i < 4; ++i) dim[i] = d.dim[i], box[i] = d.box[i];
  for (int i = 0; i < 3; ++i) stride[i] = d.stride[i + 1];  // the driver omits dim 0's
  const CUresult r = fn(&out, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, d.base, dim, stride, box, estride,
                        CU_TENSOR_MAP_INTERLEAVE_NONE,
                        d.swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return false;
  std::memcpy(m->bytes, &out, sizeof out);
  return true;
}

}  // namespace lcr::cuda
