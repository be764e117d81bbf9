#include "core/train/gpu_engine.hpp"

#include <cuda_runtime.h>

#include <cstdlib>

#include "core/error.hpp"
#include "core/model/cuda/gpu_adamw.hpp"
#include "core/model/cuda/gpu_model.hpp"
#include "parallel/comm/backend.hpp"

namespace lcr::train {

using cuda::model::GpuAdamW;
using cuda::model::GpuModel;

namespace {

int local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}

int pick_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  require(e == cudaSuccess && n > 0, "train.device = \"cuda\" but no CUDA device is usable (",
          e == cudaSuccess ? "0 devices" : cudaGetErrorString(e),
          "); run on a GPU machine or set train.device = \"cpu\"");
  return local_rank() % n;
}

}  // namespace

struct GpuEngine::Impl {
  Communicator& world;
  std::unique_ptr<Communicator> nccl;  // data-parallel sums on device buffers
  int device = 0;
  std::unique_ptr<GpuModel> model;
  std::unique_ptr<GpuAdamW> opt;
  std::vector<float> host_grads;  // staging when the sums go through MPI
  Impl(Communicator& w) : world(w) {}
};

GpuEngine::GpuEngine(const TrainConfig& cfg, const AdamWConfig& opt_cfg, Communicator& world)
    : impl_(std::make_unique<Impl>(world)) {
  Impl& m = *impl_;
  m.device = pick_device();
  LCR_CUDA_CHECK(cudaSetDevice(m.device));
  if (world.size() > 1 && world.buffer_space() == BufferSpace::Host && nccl_available())
    m.nccl = make_world_communicator("nccl");  // sets the same device (its local rank)
  LCR_CUDA_CHECK(cudaGetDevice(&m.device));
  cuda::model::GpuModelOptions o;
  o.gemm =
      cfg.train.gemm_tf32 ? cuda::model::GemmPrecision::Tf32 : cuda::model::GemmPrecision::Fp32;
  o.device = m.device;
  m.model = std::make_unique<GpuModel>(cfg.model, o);
  m.opt = std::make_unique<GpuAdamW>(opt_cfg, model_param_ranges(m.model->layout(), opt_cfg),
                                     m.model->layout().total(), m.model->stream());
}

GpuEngine::~GpuEngine() = default;

void GpuEngine::load(const Model<float>& host, const AdamW<float>& opt) {
  impl_->model->upload_params(host.params());
  impl_->opt->upload_state(opt);
}

void GpuEngine::upload_params(const Model<float>& host) {
  impl_->model->upload_params(host.params());
}

void GpuEngine::store(Model<float>& host, AdamW<float>* opt) {
  impl_->model->download_params(host.params());
  if (opt) impl_->opt->download_state(*opt);
}

double GpuEngine::forward_backward(const int32_t* tokens, const int32_t* labels, int64_t B,
                                   int64_t L, double norm) {
  GpuModel& g = *impl_->model;
  g.zero_grad();
  const double loss = g.forward(tokens, labels, B, L, norm);
  g.backward();
  return loss;
}

AdamW<float>::StepInfo GpuEngine::allreduce_and_step() {
  Impl& m = *impl_;
  GpuModel& g = *m.model;
  const size_t n = size_t(g.layout().total());
  if (m.world.size() > 1) {
    LCR_CUDA_CHECK(cudaStreamSynchronize(g.stream()));
    Communicator* dev = m.nccl
                            ? m.nccl.get()
                            : (m.world.buffer_space() == BufferSpace::Device ? &m.world : nullptr);
    if (dev) {
      dev->allreduce_sum(g.grads(), n);
    } else {
      m.host_grads.resize(n);
      LCR_CUDA_CHECK(cudaMemcpy(m.host_grads.data(), g.grads(), n * 4, cudaMemcpyDeviceToHost));
      m.world.allreduce_sum(m.host_grads.data(), n);
      LCR_CUDA_CHECK(cudaMemcpy(g.grads(), m.host_grads.data(), n * 4, cudaMemcpyHostToDevice));
    }
  }
  return m.opt->step(g.params(), g.grads());
}

std::string GpuEngine::locate_nonfinite() { return impl_->model->locate_nonfinite(); }

std::string GpuEngine::describe() const {
  cudaDeviceProp p{};
  LCR_CUDA_CHECK(cudaGetDeviceProperties(&p, impl_->device));
  std::string s = "cuda:" + std::to_string(impl_->device) + " (" + p.name + ")";
  if (impl_->world.size() > 1) s += impl_->nccl ? ", NCCL all-reduce" : ", MPI all-reduce";
  return s;
}

}  // namespace lcr::train
