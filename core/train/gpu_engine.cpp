#include "core/train/gpu_engine.hpp"

#include <cuda_runtime.h>

#include <cstdlib>

#include "core/error.hpp"
#include "core/model/cuda/gpu_adamw.hpp"
#include "core/model/cuda/gpu_model.hpp"
#include "parallel/comm/backend.hpp"
#ifdef LCR_HAVE_GPU_RING
#include "parallel/comm/nccl/nccl_communicator.hpp"
#include "parallel/ring/cuda/ring_attention_cuda.hpp"
#endif

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

#ifdef LCR_HAVE_GPU_RING
// Attention over the context-parallel group: one cuda::RingAttention per layer (made at
// the layer's first call, collectively: every rank runs the same layers in order). Its
// backward sums dparams over the group, so only the group's rank 0 adds them (the
// trainer's all-reduce then counts them once).
class GpuRingRunner : public cuda::model::GpuAttentionRunner {
 public:
  GpuRingRunner(NcclCommunicator& comm, SeqLayout layout, int layers)
      : comm_(comm), layout_(std::move(layout)), rings_(size_t(layers)), batch_(size_t(layers)) {}
  void forward(int l, const AttentionSpec& spec, const cuda::DeviceParams& params,
               const cuda::AttentionInputs& in, const cuda::AttentionOutputs& out, cuda::Workspace&,
               cudaStream_t s) override {
    ring(l, spec, in.B).forward(params, in, out, s);
  }
  void backward(int l, const AttentionSpec& spec, const cuda::DeviceParams& params,
                const cuda::AttentionInputs& in, const cuda::AttentionOutputs& out,
                const cuda::bf16* dout, const cuda::AttentionGrads& grads, cuda::Workspace&,
                cudaStream_t s) override {
    ring(l, spec, in.B).backward(params, in, out, dout, grads, s);
  }
  bool adds_dparams() const override { return comm_.rank() == 0; }
  bool whole_sequences() const override { return false; }

 private:
  cuda::RingAttention& ring(int l, const AttentionSpec& spec, int B) {
    auto& r = rings_[size_t(l)];
    if (!r || batch_[size_t(l)] != B) {
      r = std::make_unique<cuda::RingAttention>(comm_, layout_, spec, B);
      batch_[size_t(l)] = B;
    }
    return *r;
  }
  NcclCommunicator& comm_;
  SeqLayout layout_;
  std::vector<std::unique_ptr<cuda::RingAttention>> rings_;
  std::vector<int> batch_;
};
#endif

}  // namespace

struct GpuEngine::Impl {
  Communicator& world;
  std::unique_ptr<Communicator> nccl;     // gradient sums on device buffers (world)
  std::unique_ptr<Communicator> cp_nccl;  // this replica's context-parallel ranks
  int device = 0;
  std::unique_ptr<GpuModel> model;
  std::unique_ptr<GpuAdamW> opt;
  std::vector<float> host_grads;  // staging when the sums go through MPI
  Impl(Communicator& w) : world(w) {}
};

GpuEngine::GpuEngine(const TrainConfig& cfg, const AdamWConfig& opt_cfg, const ProcessGrid& grid)
    : impl_(std::make_unique<Impl>(grid.world())) {
  Impl& m = *impl_;
  Communicator& world = grid.world();
  m.device = pick_device();
  LCR_CUDA_CHECK(cudaSetDevice(m.device));
  if (world.size() > 1 && world.buffer_space() == BufferSpace::Host && nccl_available())
    m.nccl = make_world_communicator("nccl");  // sets the same device (its local rank)
  const int cp = grid.cp_size();
#ifdef LCR_HAVE_GPU_RING
  if (cp > 1) {
    Communicator& w = m.nccl ? *m.nccl : world;
    // The ring's ranks in chunk order: key = cp rank (process_grid.hpp's numbering).
    m.cp_nccl = w.split(grid.dp_rank(), grid.cp_rank());
  }
#endif
  require(cp == 1 || m.cp_nccl, "train.device = \"cuda\" with parallel.cp = ", cp,
          " needs the GPU ring: a build with ", "-DLCR_ENABLE_NCCL=ON (or parallel.cp = 1)");
  LCR_CUDA_CHECK(cudaGetDevice(&m.device));
  cuda::model::GpuModelOptions o;
  o.gemm =
      cfg.train.gemm_tf32 ? cuda::model::GemmPrecision::Tf32 : cuda::model::GemmPrecision::Fp32;
  o.device = m.device;
  m.model = std::make_unique<GpuModel>(cfg.model, o);
#ifdef LCR_HAVE_GPU_RING
  if (m.cp_nccl) {
    auto* comm = dynamic_cast<NcclCommunicator*>(m.cp_nccl.get());
    require(comm != nullptr, "the context-parallel communicator is not an NCCL one");
    m.model->set_runner(std::make_unique<GpuRingRunner>(
        *comm, SeqLayout(cfg.parallel.layout, cfg.train.seq_len, cp), cfg.model.n_layers));
  }
#endif
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
  if (impl_->cp_nccl)
    s += ", GPU ring over " + std::to_string(impl_->cp_nccl->size()) + " context-parallel ranks";
  return s;
}

}  // namespace lcr::train
