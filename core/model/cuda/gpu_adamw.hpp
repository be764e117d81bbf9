#pragma once
// AdamW on the GPU: core/model/optimizer.hpp's AdamW<float> with the parameters, gradients
// and both moments in device memory. Same ranges (decay groups, clamps), same schedule,
// same update order, same deterministic gradient norm (8192-value chunks in double, summed
// on the host in chunk order), same refusal of a non-finite gradient (parameters and
// moments untouched). Checkpoints go through the host AdamW<float>: download_state /
// upload_state copy the moments and the update count.
#include <cuda_runtime.h>

#include <vector>

#include "core/model/optimizer.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"

namespace lcr::cuda::model {

class GpuAdamW {
 public:
  using StepInfo = AdamW<float>::StepInfo;

  GpuAdamW(const AdamWConfig& cfg, std::vector<ParamRange> ranges, int64_t n, cudaStream_t s);

  // One update of params from grads (device, n floats each); synchronises the stream once
  // (the norm decides the clip scale on the host).
  StepInfo step(float* params, const float* grads);
  // sqrt(sum g^2) in double, the CPU optimizer's order.
  double grad_norm(const float* grads);

  int64_t steps_taken() const { return t_; }
  const std::vector<ParamRange>& ranges() const { return ranges_; }
  void download_state(AdamW<float>& host) const;  // m, v, update count -> host
  void upload_state(const AdamW<float>& host);    // host -> m, v, update count

 private:
  AdamWConfig cfg_;
  std::vector<ParamRange> ranges_;
  int64_t n_;
  cudaStream_t stream_;
  DeviceBuffer<float> m_, v_;
  DeviceBuffer<uint8_t> decay_;
  DeviceBuffer<double> parts_;
  int64_t t_ = 0;
};

}  // namespace lcr::cuda::model
