#include "core/train/gpu_engine.hpp"

#include <cuda_runtime.h>

#include <cstdlib>

#include "core/model/cuda/gpu_adamw.hpp"
#include "core/model/cuda/gpu_layers.hpp"
#include "core/model/cuda/gpu_model.hpp"
#include "kernels/attention/cuda/device_code.hpp"
#include "kernels/base/error.hpp"
#include "parallel/comm/backend.hpp"
#ifdef LCR_HAVE_GPU_RING
#include "parallel/comm/nccl/nccl_communicator.hpp"
#include "parallel/ring/cuda/ring_attention_cuda.hpp"
#endif
#if defined(LCR_HAVE_GPU_RING) && defined(LCR_HAVE_CUDA_PATH_RING)
#include "core/train/gpu_path_shards.hpp"
#define LCR_GPU_PATH_SHARDS 1
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
using cuda::DeviceBuffer;

// Attention over the context-parallel group: one cuda::RingAttention per layer (made at
// the layer's first call, collectively: every rank runs the same layers in order). Its
// backward sums dparams over the group, so only the group's rank 0 adds them (the
// trainer's all-reduce then counts them once).
class GpuRingRunner : public cuda::model::GpuAttentionRunner {
 public:
  GpuRingRunner(NcclCommunicator& comm, SeqLayout layout, int layers)
      : comm_(comm), layout_(std::move(layout)), rings_(size_t(layers)), batch_(size_t(layers)) {
#ifdef LCR_GPU_PATH_SHARDS
    path_ = std::make_unique<GpuPathShards>(comm, layout_, layers);
#endif
  }
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
#ifdef LCR_GPU_PATH_SHARDS
  // PaTH: gpu_path_shards.hpp (the convolution's rows across chunks, the GPU PaTH ring).
  bool handles_path() const override { return true; }
  void path_w_forward(int B, int L, int Hkv, int d, bool silu, const float* u, const float* conv,
                      float* w, cudaStream_t s) override {
    path_->w_forward(B, L, Hkv, d, silu, u, conv, w, s);
  }
  void path_w_backward(int B, int L, int Hkv, int d, bool silu, const float* u, const float* conv,
                       float* dw, float* du, float* dconv, cudaStream_t s) override {
    path_->w_backward(B, L, Hkv, d, silu, u, conv, dw, du, dconv, s);
  }
  void path_forward(int l, const cuda::path::Args& a, cuda::bf16* o, float* lse,
                    cudaStream_t s) override {
    path_->forward(l, a, o, lse, s);
  }
  void path_backward(int l, const cuda::path::Args& a, const cuda::bf16* o, const float* lse,
                     const cuda::bf16* dout, const cuda::path::Grads& g, cudaStream_t s) override {
    path_->backward(l, a, o, lse, dout, g, s);
  }
#endif

  // FoX's gates over GLOBAL positions (the CPU ring's parallel/ring/fox_prefix.hpp on the
  // GPU): each of this rank's chunks runs its local running sum, the chunk totals [B, H] are
  // gathered over the group, and each chunk reruns with the sum of the earlier chunks'
  // totals as its offset (summed in double on the host, chunk order).
  void fox_gates(int B, int L, int H, const float* z, float* c, cuda::Workspace& ws,
                 cudaStream_t s) override {
    const auto& own = layout_.chunks_of(comm_.rank());
    for (size_t k = 0; k < own.size(); ++k) {
      const Chunk& ch = layout_.chunk(own[k]);
      gather_rows(B, L, H, ch, z, z_seg(k, B, ch, H), s);
      cuda::fox_cumulative_log_gates(B, int(ch.length), H, z_seg(k, B, ch, H), nullptr,
                                     c_seg_.data(), ws, s);
      // Total of the chunk = its last row of the running sum.
      LCR_CUDA_CHECK(cudaMemcpy2DAsync(
          mine(k, B, H), size_t(H) * 4, c_seg_.data() + (ch.length - 1) * H,
          size_t(ch.length * H) * 4, size_t(H) * 4, size_t(B), cudaMemcpyDeviceToDevice, s));
    }
    const std::vector<double> before = chunk_sums(B, H, s, /*earlier=*/true);
    for (size_t k = 0; k < own.size(); ++k) {
      const Chunk& ch = layout_.chunk(own[k]);
      upload_offset(before, own[k], B, H, s);
      cuda::fox_cumulative_log_gates(B, int(ch.length), H, z_seg(k, B, ch, H), offset_.data(),
                                     c_seg_.data(), ws, s);
      scatter_rows(B, L, H, ch, c_seg_.data(), c, s);
    }
  }
  // dz_t = sigmoid(-z_t) sum over GLOBAL t' >= t of dc_t': the chunk's local suffix sums
  // (the API), plus sigmoid(-z_t) times the later chunks' dc totals.
  void fox_gates_backward(int B, int L, int H, const float* z, const float* dc, float* dz,
                          cuda::Workspace& ws, cudaStream_t s) override {
    const auto& own = layout_.chunks_of(comm_.rank());
    for (size_t k = 0; k < own.size(); ++k) {
      const Chunk& ch = layout_.chunk(own[k]);
      gather_rows(B, L, H, ch, z, z_seg(k, B, ch, H), s);
      gather_rows(B, L, H, ch, dc, c_seg_.data(), s);
      cuda::fox_cumulative_log_gates_backward(B, int(ch.length), H, z_seg(k, B, ch, H),
                                              c_seg_.data(), dz_seg(k, B, ch, H), mine(k, B, H), ws,
                                              s);
    }
    const std::vector<double> after = chunk_sums(B, H, s, /*earlier=*/false);
    for (size_t k = 0; k < own.size(); ++k) {
      const Chunk& ch = layout_.chunk(own[k]);
      upload_offset(after, own[k], B, H, s);
      cuda::model::fox_gate_add_suffix(B, ch.length, H, z_seg(k, B, ch, H), offset_.data(),
                                       dz_seg(k, B, ch, H), s);
      scatter_rows(B, L, H, ch, dz_seg(k, B, ch, H), dz, s);
    }
  }

 private:
  // Rows of one chunk between the local [B, L, H] tensor and a contiguous [B, len, H] one.
  static void gather_rows(int B, int L, int H, const Chunk& ch, const float* from, float* to,
                          cudaStream_t s) {
    LCR_CUDA_CHECK(cudaMemcpy2DAsync(to, size_t(ch.length * H) * 4, from + ch.local_offset * H,
                                     size_t(L) * H * 4, size_t(ch.length * H) * 4, size_t(B),
                                     cudaMemcpyDeviceToDevice, s));
  }
  static void scatter_rows(int B, int L, int H, const Chunk& ch, const float* from, float* to,
                           cudaStream_t s) {
    LCR_CUDA_CHECK(cudaMemcpy2DAsync(to + ch.local_offset * H, size_t(L) * H * 4, from,
                                     size_t(ch.length * H) * 4, size_t(ch.length * H) * 4,
                                     size_t(B), cudaMemcpyDeviceToDevice, s));
  }
  // Per own chunk k: contiguous z and dz copies (kept from the chunk pass to the offset pass).
  float* z_seg(size_t k, int B, const Chunk& ch, int H) {
    return seg_buffer(z_seg_, k, int64_t(B) * ch.length * H);
  }
  float* dz_seg(size_t k, int B, const Chunk& ch, int H) {
    return seg_buffer(dz_seg_, k, int64_t(B) * ch.length * H);
  }
  float* seg_buffer(std::vector<DeviceBuffer<float>>& v, size_t k, int64_t n) {
    if (v.size() <= k) v.resize(k + 1);
    if (int64_t(v[k].size()) < n) v[k] = DeviceBuffer<float>(size_t(n));
    if (int64_t(c_seg_.size()) < n) c_seg_ = DeviceBuffer<float>(size_t(n));
    return v[k].data();
  }
  // This rank's chunk totals [chunks_per_rank, B, H], gathered over the group.
  float* mine(size_t k, int B, int H) {
    const size_t n = size_t(layout_.chunks_per_rank()) * size_t(B) * size_t(H);
    if (mine_.size() != n) mine_ = DeviceBuffer<float>(n);
    return mine_.data() + k * size_t(B) * size_t(H);
  }
  // For each global chunk: the sum (double) of the totals of the chunks before it (earlier)
  // or after it, [num_chunks, B, H], from every rank's totals.
  std::vector<double> chunk_sums(int B, int H, cudaStream_t s, bool earlier) {
    const size_t per = size_t(B) * size_t(H), cpr = size_t(layout_.chunks_per_rank());
    mine(0, B, H);
    if (all_.size() != cpr * per * size_t(comm_.size()))
      all_ = DeviceBuffer<float>(cpr * per * size_t(comm_.size()));
    LCR_CUDA_CHECK(cudaStreamSynchronize(s));  // NCCL reads what the stream wrote
    comm_.allgather(mine_.data(), all_.data(), cpr * per, DType::F32);
    const std::vector<float> all = all_.download();
    const int nc = layout_.num_chunks();
    std::vector<double> total(size_t(nc) * per, 0.0), out(size_t(nc) * per, 0.0);
    for (int r = 0; r < comm_.size(); ++r) {
      const auto& chunks = layout_.chunks_of(r);
      for (size_t k = 0; k < chunks.size(); ++k)
        for (size_t i = 0; i < per; ++i)
          total[size_t(chunks[k]) * per + i] = all[(size_t(r) * cpr + k) * per + i];
    }
    for (size_t i = 0; i < per; ++i) {
      double run = 0;
      for (int c = earlier ? 0 : nc - 1; earlier ? c < nc : c >= 0; c += earlier ? 1 : -1) {
        out[size_t(c) * per + i] = run;
        run += total[size_t(c) * per + i];
      }
    }
    return out;
  }
  void upload_offset(const std::vector<double>& sums, int chunk, int B, int H, cudaStream_t s) {
    const size_t per = size_t(B) * size_t(H);
    offset_host_.assign(sums.begin() + long(size_t(chunk) * per),
                        sums.begin() + long(size_t(chunk + 1) * per));
    if (offset_.size() != per) offset_ = DeviceBuffer<float>(per);
    LCR_CUDA_CHECK(cudaStreamSynchronize(s));  // the previous chunk's kernel read offset_
    offset_.upload(offset_host_);
  }

  DeviceBuffer<float> c_seg_, mine_, all_, offset_;
  std::vector<DeviceBuffer<float>> z_seg_, dz_seg_;
  std::vector<float> offset_host_;

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
#ifdef LCR_GPU_PATH_SHARDS
  std::unique_ptr<GpuPathShards> path_;
#endif
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
  o.gemm = cfg.train.gemm_bf16   ? cuda::model::GemmPrecision::Bf16
           : cfg.train.gemm_tf32 ? cuda::model::GemmPrecision::Tf32
                                 : cuda::model::GemmPrecision::Fp32;
  o.device = m.device;
  o.path_chunk = cfg.train.path_chunk;
  o.attention = cuda::parse_sdpa_impl(cfg.train.cuda_attention);
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
  for (const ParamRange& r : m.opt->ranges())  // zero_frozen_grads, on the device
    if (r.frozen && r.size > 0)
      LCR_CUDA_CHECK(cudaMemsetAsync(g.grads() + r.offset, 0, size_t(r.size) * 4, g.stream()));
  return m.opt->step(g.params(), g.grads());
}

std::string GpuEngine::locate_nonfinite() { return impl_->model->locate_nonfinite(); }

std::string GpuEngine::describe() const {
  cudaDeviceProp p{};
  LCR_CUDA_CHECK(cudaGetDeviceProperties(&p, impl_->device));
  // The kernels' code as loaded (sm_90a wgmma, or mma.sync from compute_80 PTX: a binary built
  // without the GPU's own architecture still runs, more slowly), so a run file says which.
  std::string s = "cuda:" + std::to_string(impl_->device) + " (" + p.name + ", " +
                  cuda::device_code().name() + ")";
  if (impl_->world.size() > 1) s += impl_->nccl ? ", NCCL all-reduce" : ", MPI all-reduce";
  if (impl_->cp_nccl)
    s += ", GPU ring over " + std::to_string(impl_->cp_nccl->size()) + " context-parallel ranks";
  // Which attention kernels run, so a run's log says whether cuDNN was found.
  const cuda::SdpaImpl impl = impl_->model->options().attention;
  s += std::string(", projections ") +
       cuda::model::gemm_precision_name(impl_->model->options().gemm);
  s += std::string(", attention ") + cuda::sdpa_impl_name(impl);
  if (impl != cuda::SdpaImpl::Lcr) {
    std::string why;
    s += cuda::cudnn_attention_available(&why) ? " (cuDNN loaded)"
                                               : " (cuDNN unavailable: " + why + ")";
  }
  return s;
}

}  // namespace lcr::train
