#pragma once
// PaTH on the GPU with context parallelism (the GPU ring runner's PaTH calls, gpu_engine.cpp;
// GpuAttentionRunner in core/model/cuda/gpu_model.hpp):
//  - the w convolution (width 3, causal over GLOBAL positions) reads u at the two positions
//    before each chunk: every rank puts its chunks' last two rows [B, 2, Hkv d] into their
//    slots of a zero-padded [chunks, B, 2, Hkv d] array, one all-reduce gives every rank every
//    chunk's pair (core/model/ring_conv_prefix.hpp does the same on the CPU), and each chunk
//    runs gpu_path.hpp's convolution on [its prefix rows; its rows]. The backward sends the
//    prefix rows' gradients back through the same array;
//  - the attention: one cuda::PathRing per layer (it keeps its folds from the layer's forward
//    for the backward).
#include <memory>
#include <vector>

#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/attention/cuda/path/path.hpp"
#include "parallel/comm/nccl/nccl_communicator.hpp"
#include "parallel/ring/cuda/path_ring_cuda.hpp"
#include "parallel/ring/layout.hpp"

namespace lcr::train {

class GpuPathShards {
 public:
  GpuPathShards(NcclCommunicator& comm, SeqLayout layout, int layers);
  ~GpuPathShards();

  // u, w [B, L, Hkv, d] this rank's rows (L local), conv [Hkv, d, 3].
  void w_forward(int B, int L, int Hkv, int d, bool silu, const float* u, const float* conv,
                 float* w, cudaStream_t s);
  // dw is scratch (as gpu_path.hpp's); du overwritten, dconv ADDED.
  void w_backward(int B, int L, int Hkv, int d, bool silu, const float* u, const float* conv,
                  float* dw, float* du, float* dconv, cudaStream_t s);
  void forward(int layer, const cuda::path::Args& a, __nv_bfloat16* o, float* lse, cudaStream_t s);
  void backward(int layer, const cuda::path::Args& a, const __nv_bfloat16* o, const float* lse,
                const __nv_bfloat16* dout, const cuda::path::Grads& g, cudaStream_t s);

 private:
  cuda::PathRing& ring(int layer, const cuda::path::Args& a);
  // Every chunk's last two rows of x [B, L, C] into slots_ (summed over the group).
  void exchange_tails(int B, int L, int64_t C, const float* x, cudaStream_t s);
  // Row of u at global position start - back (back = 1, 2) before own chunk c, in slots_.
  const float* prefix_row(int c, int back, int B, int b, int64_t C) const;
  // ext_u_ = [u at the e = min(2, start) positions before chunk c; the chunk's rows of u],
  // [B, e + length, C]; returns e.
  int64_t extend(int c, int B, int L, int64_t C, const float* u, cudaStream_t s);

  NcclCommunicator& comm_;
  SeqLayout layout_;
  std::vector<std::unique_ptr<cuda::PathRing>> rings_;
  std::vector<int> batch_;
  cuda::DeviceBuffer<float> slots_, dslots_, ext_u_, ext_w_, ext_du_, partial_;
  // The PaTH kernels' scratch, one for every layer's ring (layers run one at a time).
  std::shared_ptr<cuda::DeviceBuffer<unsigned char>> ws_ =
      std::make_shared<cuda::DeviceBuffer<unsigned char>>();
};

}  // namespace lcr::train
