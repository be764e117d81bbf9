#include "core/model/cuda/gpu_adamw.hpp"

#include <cmath>

#include "core/model/cuda/gpu_layers.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda::model {

GpuAdamW::GpuAdamW(const AdamWConfig& cfg, std::vector<ParamRange> ranges, int64_t n,
                   cudaStream_t s)
    : cfg_(cfg), ranges_(std::move(ranges)), n_(n), stream_(s) {
  // The host optimizer validates the config and that the ranges tile [0, n).
  AdamW<float> check(cfg_, ranges_, n_);
  std::vector<uint8_t> decay(size_t(n_), 0);
  for (const auto& r : ranges_)
    for (int64_t i = 0; i < r.size; ++i) decay[size_t(r.offset + i)] = r.decay ? 1 : 0;
  m_ = DeviceBuffer<float>(size_t(n_));
  v_ = DeviceBuffer<float>(size_t(n_));
  m_.fill_bytes(0);
  v_.fill_bytes(0);
  decay_ = DeviceBuffer<uint8_t>(decay);
  parts_ = DeviceBuffer<double>(size_t(norm_chunks(n_)));
}

double GpuAdamW::grad_norm(const float* g) {
  if (n_ == 0) return 0.0;
  sumsq_chunks(n_, g, parts_.data(), stream_);
  LCR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const std::vector<double> h = parts_.download();
  double s = 0;
  for (double x : h) s += x;
  return std::sqrt(s);
}

GpuAdamW::StepInfo GpuAdamW::step(float* p, const float* g) {
  StepInfo info;
  info.step = t_;
  info.lr = learning_rate(cfg_, t_);
  info.grad_norm = grad_norm(g);
  require(std::isfinite(info.grad_norm), "gradient norm is ", info.grad_norm, " at step ", t_,
          "; parameters left unchanged");
  if (cfg_.grad_clip > 0 && info.grad_norm > cfg_.grad_clip)
    info.clip_scale = cfg_.grad_clip / (info.grad_norm + 1e-6);
  const int64_t t = t_ + 1;
  AdamWStep a;
  a.lr = float(info.lr);
  a.beta1 = float(cfg_.beta1);
  a.beta2 = float(cfg_.beta2);
  a.eps = float(cfg_.eps);
  a.wd_factor = float(1.0 - info.lr * cfg_.weight_decay);
  a.scale = float(info.clip_scale);
  a.bc1 = float(1.0 - std::pow(cfg_.beta1, double(t)));
  a.bc2 = float(1.0 - std::pow(cfg_.beta2, double(t)));
  adamw_update(n_, p, g, m_.data(), v_.data(), decay_.data(), a, stream_);
  for (const auto& r : ranges_)
    if (r.clamp && r.size > 0)
      clamp_values(r.size, p + r.offset, float(r.lo), float(r.hi), stream_);
  t_ = t;
  return info;
}

void GpuAdamW::download_state(AdamW<float>& host) const {
  require(int64_t(host.m().extent(0)) == n_, "optimizer state sizes differ: host ",
          host.m().extent(0), ", device ", n_);
  LCR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  LCR_CUDA_CHECK(cudaMemcpy(host.m().data(), m_.data(), m_.bytes(), cudaMemcpyDeviceToHost));
  LCR_CUDA_CHECK(cudaMemcpy(host.v().data(), v_.data(), v_.bytes(), cudaMemcpyDeviceToHost));
  host.set_steps_taken(t_);
}

void GpuAdamW::upload_state(const AdamW<float>& host) {
  require(int64_t(host.m().extent(0)) == n_, "optimizer state sizes differ: host ",
          host.m().extent(0), ", device ", n_);
  LCR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  LCR_CUDA_CHECK(cudaMemcpy(m_.data(), host.m().data(), m_.bytes(), cudaMemcpyHostToDevice));
  LCR_CUDA_CHECK(cudaMemcpy(v_.data(), host.v().data(), v_.bytes(), cudaMemcpyHostToDevice));
  t_ = host.steps_taken();
}

}  // namespace lcr::cuda::model
