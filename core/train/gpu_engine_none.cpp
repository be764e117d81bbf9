// GpuEngine in a build without CUDA: asking for it is an Error that says how to get it.
#include "core/train/gpu_engine.hpp"
#include "kernels/base/error.hpp"

namespace lcr::train {

struct GpuEngine::Impl {};

GpuEngine::GpuEngine(const TrainConfig&, const AdamWConfig&, const ProcessGrid&) {
  throw_error(
      "train.device = \"cuda\" needs a build configured with -DLCR_ENABLE_CUDA=ON (and "
      "-DLCR_ENABLE_NCCL=ON for several GPUs); see docs/cuda.md, or set train.device = \"cpu\"");
}
GpuEngine::~GpuEngine() = default;
void GpuEngine::load(const Model<float>&, const AdamW<float>&) {}
void GpuEngine::store(Model<float>&, AdamW<float>*) {}
void GpuEngine::upload_params(const Model<float>&) {}
double GpuEngine::forward_backward(const int32_t*, const int32_t*, int64_t, int64_t, double) {
  return 0;
}
AdamW<float>::StepInfo GpuEngine::allreduce_and_step() { return {}; }
std::string GpuEngine::locate_nonfinite() { return ""; }
std::string GpuEngine::describe() const { return ""; }

}  // namespace lcr::train
