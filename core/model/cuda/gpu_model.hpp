#pragma once
// The transformer LM of core/model/model.hpp on one GPU: same layers, same parameter
// layout (one contiguous fp32 buffer, so the host Model<float> and this one are one memcpy
// apart and share checkpoints), same loss normalisation. What differs:
//   - projections through cuBLAS (gpu_gemm.hpp; TF32 tensor cores by default),
//   - attention through the CUDA attention API (bf16 q, k, v, o; fp32 lse, gradients and
//     parameters), one lanes Workspace per layer so the backward reuses the forward's lanes,
//   - every other layer as the CUDA kernels of gpu_layers.hpp.
// The dot-product schemes (NoPE, RoPE, ALiBi, GOAT, GOAT2D, PoPE, FoX, with QK-norm, sink,
// softcap, GQA) run through the runner below. PaTH / PaTH-FoX run the model's PaTH layers
// as CUDA kernels (gpu_path.hpp: the w convolution and normalisation, beta) and the CUDA
// PaTH attention (kernels/attention/cuda/path): directly for whole sequences, through the
// runner's path_* calls for sequence shards (the GPU PaTH ring). They take softcap, GQA,
// sink (a per-row rescale after the PaTH kernels) and QK-norm (the lanes' row kernel before
// them), and need head_dim 64 or 128 and value_dim = head_dim (Errors naming the option;
// train.device = "cpu" has every width).
// How a layer runs attention is injected, like the CPU model's AttentionRunner
// (core/model/runner.hpp): LocalGpuAttention (whole sequences on this GPU, the default) or
// a ring over the context-parallel group (core/train/gpu_engine.cpp wraps
// parallel/ring/cuda/ring_attention_cuda.hpp); then the rows are this rank's shard.
//
//   GpuModel gm(cfg, {});
//   gm.upload_params(host_model.params());        // the initial or checkpointed weights
//   gm.zero_grad();
//   double loss = gm.forward(tokens, labels, B, L, global_labelled_rows);  // host int32 [B, L]
//   gm.backward();                                // grads() += dloss/dparams (device)
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/cuda/gpu_gemm.hpp"
#include "core/model/params.hpp"
#include "kernels/attention/cuda/api/attention_cuda.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/attention/cuda/path/chunked.hpp"

namespace lcr::cuda::path {
struct Args;
struct Grads;
}  // namespace lcr::cuda::path
namespace lcr::cuda::lanes {
struct RowLaneArgs;
}  // namespace lcr::cuda::lanes

namespace lcr::cuda::model {

// One layer's attention call on the GPU (same contract as cuda::attention_forward /
// attention_backward on this rank's local rows; positions start at 0).
class GpuAttentionRunner {
 public:
  virtual ~GpuAttentionRunner() = default;
  virtual void forward(int layer, const AttentionSpec& spec, const DeviceParams& params,
                       const AttentionInputs& in, const AttentionOutputs& out, Workspace& ws,
                       cudaStream_t s) = 0;
  virtual void backward(int layer, const AttentionSpec& spec, const DeviceParams& params,
                        const AttentionInputs& in, const AttentionOutputs& out, const bf16* dout,
                        const AttentionGrads& grads, Workspace& ws, cudaStream_t s) = 0;
  // Whether this rank adds backward's dparams into the model's gradients. The trainer sums
  // the gradients over every rank afterwards; a ring whose backward already summed dparams
  // over its group answers true on the group's rank 0 only, so the sum counts them once.
  virtual bool adds_dparams() const = 0;
  // False for a runner of sequence shards: then PaTH's w convolution and attention go through
  // the path_* calls below (they need the other chunks' rows), which such a runner provides
  // when handles_path() (the GPU PaTH ring, parallel/ring/cuda/path_ring_cuda.hpp).
  virtual bool whole_sequences() const = 0;
  virtual bool handles_path() const { return false; }
  // gpu_path.hpp's path_w_forward / path_w_backward over GLOBAL positions of this rank's
  // rows (L = local rows), and the PaTH attention of path.hpp over the sequence; the
  // backward follows its layer's forward with the same tensors.
  virtual void path_w_forward(int B, int L, int Hkv, int d, bool silu, const float* u,
                              const float* conv, float* w, cudaStream_t s);
  virtual void path_w_backward(int B, int L, int Hkv, int d, bool silu, const float* u,
                               const float* conv, float* dw, float* du, float* dconv,
                               cudaStream_t s);
  virtual void path_forward(int layer, const lcr::cuda::path::Args& a, bf16* o, float* lse,
                            cudaStream_t s);
  virtual void path_backward(int layer, const lcr::cuda::path::Args& a, const bf16* o,
                             const float* lse, const bf16* dout, const lcr::cuda::path::Grads& g,
                             cudaStream_t s);
  // FoX: c [B, L, H] = running sum over GLOBAL positions of log sigmoid(z) (z [B, L, H] this
  // rank's rows), and its backward (dz overwritten). A ring adds the other chunks' totals.
  virtual void fox_gates(int B, int L, int H, const float* z, float* c, Workspace& ws,
                         cudaStream_t s) {
    fox_cumulative_log_gates(B, L, H, z, nullptr, c, ws, s);
  }
  virtual void fox_gates_backward(int B, int L, int H, const float* z, const float* dc, float* dz,
                                  Workspace& ws, cudaStream_t s) {
    fox_cumulative_log_gates_backward(B, L, H, z, dc, dz, nullptr, ws, s);
  }
};

// Whole sequences on this GPU: the CUDA attention API.
class LocalGpuAttention : public GpuAttentionRunner {
 public:
  void forward(int, const AttentionSpec& spec, const DeviceParams& params,
               const AttentionInputs& in, const AttentionOutputs& out, Workspace& ws,
               cudaStream_t s) override {
    attention_forward(spec, params, in, out, ws, s);
  }
  void backward(int, const AttentionSpec& spec, const DeviceParams& params,
                const AttentionInputs& in, const AttentionOutputs& out, const bf16* dout,
                const AttentionGrads& grads, Workspace& ws, cudaStream_t s) override {
    attention_backward(spec, params, in, out, dout, grads, ws, s);
  }
  bool adds_dparams() const override { return true; }
  bool whole_sequences() const override { return true; }
};

struct GpuModelOptions {
  GemmPrecision gemm = GemmPrecision::Tf32;
  int device = -1;  // CUDA device to use; -1 = the current one
  // PaTH on whole sequences: chunk length of cuda::path::Chunked (0 = automatic, -1 = the
  // whole-sequence kernels).
  int path_chunk = 0;
  // Which SDPA implementation the layers' attention asks for (sdpa.hpp, SdpaImpl; from
  // train.cuda_attention): cuDNN serves the bf16-output schemes (NoPE, RoPE) with auto/cudnn.
  SdpaImpl attention = SdpaImpl::Lcr;
};

class GpuModel {
 public:
  const GpuModelOptions& options() const { return opt_; }
  // Validates cfg (Error naming the field, or the unsupported scheme); allocates
  // parameters (uninitialised: upload_params before the first forward) and gradients.
  GpuModel(const ModelConfig& cfg, const GpuModelOptions& opt);
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  // Replaces the attention runner (default LocalGpuAttention). Error: PaTH or PaTH-FoX with
  // a runner of sequence shards that does not handle PaTH (handles_path()). FoX's gates and
  // PaTH's convolution rows cross ranks through the runner.
  void set_runner(std::unique_ptr<GpuAttentionRunner> runner);

  const ModelLayout& layout() const { return layout_; }
  cudaStream_t stream() const { return stream_; }
  float* params() { return params_.data(); }  // device [layout().total()]
  float* grads() { return grads_.data(); }    // device, same layout
  void upload_params(const View1<const float, HostSpace>& host);
  void download_params(const View1<float, HostSpace>& host) const;
  void download_grads(const View1<float, HostSpace>& host) const;
  void zero_grad();

  // tokens, labels: host int32 row-major [B, L] (labels -1 = ignored). Returns the sum of
  // -log p over labelled rows / norm (norm = loss_norm when > 0, else this call's count).
  double forward(const int32_t* tokens, const int32_t* labels, int64_t B, int64_t L,
                 double loss_norm = 0);
  // ADDS dloss/dparams into grads(); needs the preceding forward.
  void backward();

  int64_t labelled_rows() const { return labelled_; }
  // After a non-finite loss: the first stage whose activations hold a NaN/Inf ("" if none).
  std::string locate_nonfinite();
  int64_t activation_bytes() const;  // device memory of the activation buffers

 private:
  struct Layer;
  void ensure_buffers(int64_t B, int64_t L);
  void layer_forward(int l, const float* x_in, float* x_out);
  void layer_backward(int l, const float* x_in);
  // The CUDA PaTH attention's arguments for layer a's buffers (B L rows).
  lcr::cuda::path::Args path_args(int64_t B, int64_t L, const Layer& a) const;
  // PaTH with qk_norm: the norm of q (query) or k before the PaTH kernels, and its backward.
  lcr::cuda::lanes::RowLaneArgs path_norm_args(const float* attn, bool query, const bf16* x) const;
  void path_qk_norm(const Layer& a, const float* attn, bool query, const bf16* x, bf16* y);
  void path_qk_norm_backward(const Layer& a, const float* attn, bool query, float* dx,
                             float* dgain);

  ModelLayout layout_;
  GpuModelOptions opt_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<GpuAttentionRunner> runner_;
  DeviceBuffer<float> params_, grads_;
  int64_t B_ = 0, L_ = 0;
  std::vector<Layer> layers_;
  // Whole-model buffers (R = B L rows).
  DeviceBuffer<int32_t> tokens_, labels_, emb_ids_, emb_rows_, emb_id_chunks_, emb_chunks_;
  DeviceBuffer<float> emb_partial_;  // [n_chunks, D] chunk sums of the embedding backward
  int64_t emb_n_ids_ = 0, emb_n_chunks_ = 0;
  std::vector<DeviceBuffer<float>> x_;  // n_layers + 1 residual streams [R, D]
  DeviceBuffer<float> xf_, rstdf_, logits_, lse_, row_loss_;
  // The LM head with its vocabulary padded to vocab_pad() (zero rows / columns): cuBLAS picks
  // its aligned kernels only when every row is 16-byte aligned, and GPT-2's 50257 is odd
  // (unpadded, the three LM-head products run on slower unaligned SM80 kernels, about an
  // eighth of a 125M model's step at 64K tokens). head_pad_ is the padded weight (lm_head
  // [D, Vp], or the tied embedding [Vp, D]), refreshed from params_ each forward;
  // dhead_pad_ its gradient before it is added to grads_.
  DeviceBuffer<float> head_pad_, dhead_pad_;
  int64_t vocab_pad() const { return (layout_.V() + 63) / 64 * 64; }
  // Scratch shared by the layers: projection outputs, fp32 o, backward gradients.
  DeviceBuffer<float> proj_, o32_, dres_, dxn_, dh_, dgate_, dup_, dout_, dq_, dk_, dv_;
  DeviceBuffer<__nv_bfloat16> dout16_;
  DeviceBuffer<float> dparams_, dfox_cq_, dfox_ck_, dfox_z_, partial_;
  // PaTH only: gradients w.r.t. w (then the conv pre-activation), u, beta (then z), and the
  // CUDA PaTH attention per layer (whole sequences: it keeps the chunked form's folds from
  // forward to backward; the layers share its scratch).
  DeviceBuffer<float> dpath_w_, dpath_u_, dpath_beta_;
  DeviceBuffer<float> path_dqn_, path_gain_part_, path_delta_;  // PaTH with qk_norm / sink
  std::vector<std::unique_ptr<lcr::cuda::path::Chunked>> path_attn_;
  bool path_ = false;
  int64_t labelled_ = 0;
  double norm_ = 0;
  bool have_forward_ = false;
};

}  // namespace lcr::cuda::model
