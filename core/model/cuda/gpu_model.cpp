#include "core/model/cuda/gpu_model.hpp"

#include <algorithm>

#include "core/model/cuda/gpu_layers.hpp"
#include "core/model/cuda/gpu_path.hpp"
#include "core/model/model.hpp"
#include "kernels/attention/cuda/api/lane_kernels.hpp"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/base/error.hpp"
#include "kernels/schemes/path/params.hpp"

namespace lcr::cuda::model {

using bf16 = __nv_bfloat16;

static_assert(kPathBetaMax == lcr::path::kBetaMax && kPathMinWNorm == lcr::path::kMinWNorm,
              "gpu_path.hpp's PaTH constants must be those of kernels/schemes/path/params.hpp");

// One layer's activations, kept from forward to backward ([R, ...] row-major).
struct GpuModel::Layer {
  DeviceBuffer<float> xn1, rstd1;         // [R, D], [R]
  DeviceBuffer<bf16> q, k, v, o;          // [R, H dq], [R, Hkv dq], [R, Hkv dv], [R, H dv]
  DeviceBuffer<float> lse;                // [B, H, L]
  DeviceBuffer<float> fox_z, fox_c;       // [R, H] (FoX only)
  DeviceBuffer<float> path_u, path_w;     // [R, Hkv d] (PaTH only)
  DeviceBuffer<float> path_z, path_beta;  // [R, Hkv] (PaTH only)
  DeviceBuffer<bf16> qn, kn;              // QK-RMSNormed q, k (PaTH with qk_norm only)
  DeviceBuffer<float> x_mid, xn2, rstd2;  // [R, D], [R, D], [R]
  DeviceBuffer<float> gate, up, h;        // [R, F]
  std::unique_ptr<Workspace> ws;          // lanes kept from forward to backward
};

namespace {

template <class T>
void grow(DeviceBuffer<T>& b, int64_t n) {
  if (int64_t(b.size()) != n) b = DeviceBuffer<T>(size_t(n));
}

}  // namespace

GpuModel::GpuModel(const ModelConfig& cfg, const GpuModelOptions& opt) : layout_(cfg), opt_(opt) {
  const AttentionSpec& at = cfg.attention;
  path_ = is_path(cfg.attention.scheme);
  if (path_) {
    const char* name = scheme_name(at.scheme);
    require(at.head_dim == 64 || at.head_dim == 128, "attention.scheme = ", name,
            " on the GPU needs attention.head_dim = 64 or 128 (the CUDA PaTH kernels' head ",
            "widths), got ", at.head_dim, "; use train.device = \"cpu\" for other widths");
    require(at.v_dim() == at.head_dim, "attention.scheme = ", name,
            " on the GPU needs attention.value_dim = head_dim (0), got ", at.v_dim(),
            "; use train.device = \"cpu\"");
  }
  if (opt_.device >= 0) LCR_CUDA_CHECK(cudaSetDevice(opt_.device));
  LCR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  gemm_ = std::make_unique<Gemm>(stream_, opt_.gemm);
  runner_ = std::make_unique<LocalGpuAttention>();
  params_ = DeviceBuffer<float>(size_t(layout_.total()));
  grads_ = DeviceBuffer<float>(size_t(layout_.total()));
  grads_.fill_bytes(0);
  head_pad_ = DeviceBuffer<float>(size_t(vocab_pad() * layout_.D()));
  head_pad_.fill_bytes(0);  // the padding stays zero: only the first V rows / columns are copied
  dhead_pad_ = DeviceBuffer<float>(head_pad_.size());
  const int64_t na = layout_.attention().total();
  if (na > 0) dparams_ = DeviceBuffer<float>(size_t(na));
  layers_.resize(size_t(cfg.n_layers));
  for (auto& l : layers_) {
    l.ws = std::make_unique<Workspace>();
    l.ws->set_sdpa_impl(opt.attention);
  }
  if (path_) {  // one per layer (each keeps its forward's folds), one scratch for all
    const auto scratch = lcr::cuda::path::make_chunked_scratch();
    for (int l = 0; l < cfg.n_layers; ++l)
      path_attn_.push_back(std::make_unique<lcr::cuda::path::Chunked>(opt_.path_chunk, scratch));
  }
}

GpuModel::~GpuModel() {
  layers_.clear();
  path_attn_.clear();
  gemm_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

namespace {
[[noreturn]] void no_path_ring() {
  throw_error(
      "this GPU attention runner takes sequence shards but not PaTH; PaTH with context "
      "parallelism on the GPU needs the GPU PaTH ring (a CUDA + NCCL build)");
}
}  // namespace

void GpuAttentionRunner::path_w_forward(int, int, int, int, bool, const float*, const float*,
                                        float*, cudaStream_t) {
  no_path_ring();
}
void GpuAttentionRunner::path_w_backward(int, int, int, int, bool, const float*, const float*,
                                         float*, float*, float*, cudaStream_t) {
  no_path_ring();
}
void GpuAttentionRunner::path_forward(int, const lcr::cuda::path::Args&, bf16*, float*,
                                      cudaStream_t) {
  no_path_ring();
}
void GpuAttentionRunner::path_backward(int, const lcr::cuda::path::Args&, const bf16*, const float*,
                                       const bf16*, const lcr::cuda::path::Grads&, cudaStream_t) {
  no_path_ring();
}

void GpuModel::set_runner(std::unique_ptr<GpuAttentionRunner> runner) {
  require(runner != nullptr, "GpuModel::set_runner: null runner");
  require(runner->whole_sequences() || runner->handles_path() || !path_,
          "attention.scheme = ", scheme_name(layout_.config().attention.scheme),
          " with context parallelism on the GPU needs the GPU PaTH ring, which this build "
          "lacks (build with -DLCR_ENABLE_CUDA=ON -DLCR_ENABLE_NCCL=ON); use parallel.cp = 1 or ",
          "train.device = \"cpu\"");
  runner_ = std::move(runner);
}

void GpuModel::upload_params(const View1<const float, HostSpace>& host) {
  require(int64_t(host.extent(0)) == layout_.total(), "upload_params: host buffer has ",
          host.extent(0), " values, the model ", layout_.total());
  LCR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  LCR_CUDA_CHECK(cudaMemcpy(params_.data(), host.data(), params_.bytes(), cudaMemcpyHostToDevice));
  for (auto& l : layers_) l.ws->forget();  // cached lanes depend on the parameters
}

void GpuModel::download_params(const View1<float, HostSpace>& host) const {
  require(int64_t(host.extent(0)) == layout_.total(), "download_params: host buffer has ",
          host.extent(0), " values, the model ", layout_.total());
  LCR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  LCR_CUDA_CHECK(cudaMemcpy(host.data(), params_.data(), params_.bytes(), cudaMemcpyDeviceToHost));
}

void GpuModel::download_grads(const View1<float, HostSpace>& host) const {
  require(int64_t(host.extent(0)) == layout_.total(), "download_grads: host buffer has ",
          host.extent(0), " values, the model ", layout_.total());
  LCR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  LCR_CUDA_CHECK(cudaMemcpy(host.data(), grads_.data(), grads_.bytes(), cudaMemcpyDeviceToHost));
}

void GpuModel::zero_grad() {
  LCR_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
}

void GpuModel::ensure_buffers(int64_t B, int64_t L) {
  if (B == B_ && L == L_) return;
  const int64_t R = B * L, D = layout_.D(), F = layout_.F(), H = layout_.H(), Hkv = layout_.Hkv(),
                dq = layout_.dq(), dv = layout_.dv();
  const bool fox = layout_.layer(0).fox_w >= 0;
  B_ = L_ = 0;  // until every allocation succeeded
  for (auto& a : layers_) {
    grow(a.xn1, R * D);
    grow(a.rstd1, R);
    grow(a.q, R * H * dq);
    grow(a.k, R * Hkv * dq);
    grow(a.v, R * Hkv * dv);
    grow(a.o, R * H * dv);
    grow(a.lse, R * H);
    if (fox) {
      grow(a.fox_z, R * H);
      grow(a.fox_c, R * H);
    }
    if (path_) {
      grow(a.path_u, R * Hkv * dq);
      grow(a.path_w, R * Hkv * dq);
      grow(a.path_z, R * Hkv);
      grow(a.path_beta, R * Hkv);
      if (layout_.config().attention.numerics.qk_norm) {
        grow(a.qn, R * H * dq);
        grow(a.kn, R * Hkv * dq);
      }
    }
    grow(a.x_mid, R * D);
    grow(a.xn2, R * D);
    grow(a.rstd2, R);
    grow(a.gate, R * F);
    grow(a.up, R * F);
    grow(a.h, R * F);
    a.ws->forget();
  }
  grow(tokens_, R);
  grow(labels_, R);
  x_.resize(layers_.size() + 1);
  for (auto& x : x_) grow(x, R * D);
  grow(xf_, R * D);
  grow(rstdf_, R);
  grow(logits_, R * vocab_pad());
  grow(lse_, R);
  grow(row_loss_, R);
  grow(proj_, R * std::max<int64_t>(H * dq, Hkv * dv));
  grow(o32_, R * H * dv);
  grow(dres_, R * D);
  grow(dxn_, R * D);
  grow(dh_, R * F);
  grow(dgate_, R * F);
  grow(dup_, R * F);
  grow(dout_, R * H * dv);
  grow(dout16_, R * H * dv);
  grow(dq_, R * H * dq);
  grow(dk_, R * Hkv * dq);
  grow(dv_, R * Hkv * dv);
  if (fox) {
    grow(dfox_cq_, R * H);
    grow(dfox_ck_, R * H);
    grow(dfox_z_, R * H);
  }
  int64_t partial = std::max(partial_floats(R, D), partial_floats(R, H));
  if (path_) {
    grow(dpath_w_, R * Hkv * dq);
    grow(dpath_u_, R * Hkv * dq);
    grow(dpath_beta_, R * Hkv);
    partial = std::max(partial, path_conv_partial_floats(R, Hkv, dq));
    const AttentionSpec& at = layout_.config().attention;
    if (at.numerics.qk_norm) {  // dq / dk through the norm, the gains' partials
      grow(path_dqn_, R * std::max(H, Hkv) * dq);
      grow(path_gain_part_, int64_t(lcr::cuda::lanes::position_chunks(int(L))) * H * dq);
    }
    if (at.numerics.has_sink()) grow(path_delta_, B * H * L);
  }
  grow(partial_, partial);
  B_ = B;
  L_ = L;
}

int64_t GpuModel::activation_bytes() const {
  int64_t n = 0;
  for (const auto& a : layers_)
    n +=
        int64_t(a.xn1.bytes() + a.rstd1.bytes() + a.q.bytes() + a.k.bytes() + a.v.bytes() +
                a.o.bytes() + a.lse.bytes() + a.fox_z.bytes() + a.fox_c.bytes() + a.path_u.bytes() +
                a.path_w.bytes() + a.path_z.bytes() + a.path_beta.bytes() + a.x_mid.bytes() +
                a.xn2.bytes() + a.rstd2.bytes() + a.gate.bytes() + a.up.bytes() + a.h.bytes()) +
        a.ws->bytes();
  for (const auto& x : x_) n += int64_t(x.bytes());
  for (const auto& p : path_attn_) n += int64_t(p->bytes(false));  // PaTH folds kept
  return n + int64_t(xf_.bytes() + logits_.bytes());
}

double GpuModel::forward(const int32_t* tokens, const int32_t* labels, int64_t B, int64_t L,
                         double loss_norm) {
  require(B > 0 && L > 0, "model.forward: empty batch [", B, ", ", L, "]");
  require(loss_norm >= 0, "model.forward: loss_norm must be >= 0, got ", loss_norm);
  have_forward_ = false;
  const int64_t R = B * L, D = layout_.D(), V = layout_.V();
  const int64_t labelled = check_batch(tokens, labels, R, int(V));
  ensure_buffers(B, L);
  labelled_ = labelled;
  LCR_CUDA_CHECK(
      cudaMemcpyAsync(tokens_.data(), tokens, size_t(R) * 4, cudaMemcpyHostToDevice, stream_));
  LCR_CUDA_CHECK(
      cudaMemcpyAsync(labels_.data(), labels, size_t(R) * 4, cudaMemcpyHostToDevice, stream_));
  const ModelConfig& c = layout_.config();
  const float* E = params_.data() + layout_.embed();
  embedding_forward(R, D, tokens_.data(), E, x_[0].data(), stream_);
  for (int l = 0; l < c.n_layers; ++l)
    layer_forward(l, x_[size_t(l)].data(), x_[size_t(l) + 1].data());
  rmsnorm_forward(R, D, x_.back().data(), params_.data() + layout_.final_norm(), float(c.norm_eps),
                  xf_.data(), rstdf_.data(), stream_);
  const auto N = Trans::No, Y = Trans::Yes;
  const int64_t Vp = vocab_pad();
  if (c.tie_embeddings) {  // head_pad_ = [E; 0] [Vp, D]
    LCR_CUDA_CHECK(
        cudaMemcpyAsync(head_pad_.data(), E, size_t(V * D) * 4, cudaMemcpyDeviceToDevice, stream_));
    (*gemm_)(N, Y, R, Vp, D, 1, xf_.data(), head_pad_.data(), 0, logits_.data());
  } else {  // head_pad_ = [W 0] [D, Vp]
    LCR_CUDA_CHECK(cudaMemcpy2DAsync(head_pad_.data(), size_t(Vp) * 4,
                                     params_.data() + layout_.lm_head(), size_t(V) * 4,
                                     size_t(V) * 4, size_t(D), cudaMemcpyDeviceToDevice, stream_));
    (*gemm_)(N, N, R, Vp, D, 1, xf_.data(), head_pad_.data(), 0, logits_.data());
  }
  cross_entropy_forward(R, V, Vp, logits_.data(), labels_.data(), lse_.data(), row_loss_.data(),
                        stream_);
  // The embedding backward's row grouping, from the host tokens: planned while the GPU runs
  // the forward queued above (a sort of R rows), copied behind it into grow-only buffers
  // (no cudaMalloc / cudaFree, which would wait for the device, in the step).
  const EmbeddingPlan plan = plan_embedding_backward(tokens, R);
  emb_n_ids_ = int64_t(plan.ids.size());
  emb_n_chunks_ = plan.n_chunks();
  auto upload = [&](DeviceBuffer<int32_t>& d, const std::vector<int32_t>& h, int64_t bound) {
    d.grow(size_t(std::max<int64_t>(int64_t(h.size()), bound)));  // bound: sized once
    if (!h.empty())
      LCR_CUDA_CHECK(cudaMemcpyAsync(d.data(), h.data(), h.size() * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, stream_));
  };
  upload(emb_ids_, plan.ids, R);  // at most R distinct tokens, R rows, R + 1 chunks
  upload(emb_rows_, plan.rows, R);
  upload(emb_id_chunks_, plan.id_chunks, R + 1);
  upload(emb_chunks_, plan.chunks, R + 1);
  emb_partial_.grow(size_t(std::max<int64_t>(emb_n_chunks_ * D, 1)));
  // Sum on the host in row order, like the CPU model. The sync also ends the plan's copies
  // before `plan` goes out of scope.
  std::vector<float> rl(static_cast<size_t>(R));
  LCR_CUDA_CHECK(
      cudaMemcpyAsync(rl.data(), row_loss_.data(), size_t(R) * 4, cudaMemcpyDeviceToHost, stream_));
  LCR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  double sum = 0;
  for (float x : rl) sum += double(x);
  norm_ = loss_norm > 0 ? loss_norm : double(labelled_);
  have_forward_ = true;
  return norm_ > 0 ? sum / norm_ : 0.0;
}

// The attention call's device arguments for layer a (positions start at 0: one rank holds
// whole sequences).
namespace {

AttentionInputs attn_inputs(int64_t B, int64_t L, const bf16* q, const bf16* k, const bf16* v,
                            const float* fox_c) {
  AttentionInputs in;
  in.B = int(B);
  in.Lq = in.Lk = int(L);
  in.q = q;
  in.k = k;
  in.v = v;
  in.fox_cq = in.fox_ck = fox_c;
  return in;
}

}  // namespace

// QK-RMSNorm of PaTH's q (query) or k through the lanes' row kernel (a plain copy lane with
// the gain), the same norm as the dot-product schemes' lanes and the CPU's.
lcr::cuda::lanes::RowLaneArgs GpuModel::path_norm_args(const float* attn, bool query,
                                                       const bf16* x) const {
  const AttentionSpec& at = layout_.config().attention;
  const ParamLayout& pl = layout_.attention();
  lcr::cuda::lanes::RowLaneArgs r;
  r.kind = lcr::cuda::lanes::LaneKind::Copy;
  r.is_query = query;
  r.B = int(B_), r.L = int(L_), r.Hx = query ? at.heads : at.kv_heads;
  r.d = r.dp = at.head_dim;
  r.x = x;
  r.gain = attn + pl.at(query ? "qk_norm.q_gain" : "qk_norm.k_gain").offset;
  r.eps = float(at.numerics.qk_norm_eps);
  return r;
}

void GpuModel::path_qk_norm(const Layer&, const float* attn, bool query, const bf16* x, bf16* y) {
  lcr::cuda::lanes::lanes_forward(path_norm_args(attn, query, x), y, stream_);
}

// dx (d loss / d normed rows on entry) -> d loss / d rows; d gain added to dgain.
void GpuModel::path_qk_norm_backward(const Layer& a, const float* attn, bool query, float* dx,
                                     float* dgain) {
  const auto r = path_norm_args(attn, query, query ? a.q.data() : a.k.data());
  lcr::cuda::lanes::RowLaneGrads g;
  g.dy = dx;
  g.dx = path_dqn_.data();
  g.gain_part = path_gain_part_.data();
  lcr::cuda::lanes::lanes_backward(r, g, stream_);
  lcr::cuda::lanes::reduce_partials(path_gain_part_.data(), lcr::cuda::lanes::position_chunks(r.L),
                                    r.Hx, r.d, 0, r.d, /*sum_heads=*/true, 1.0, dgain, stream_);
  LCR_CUDA_CHECK(cudaMemcpyAsync(dx, path_dqn_.data(), size_t(B_ * L_) * r.Hx * r.d * 4,
                                 cudaMemcpyDeviceToDevice, stream_));
}

lcr::cuda::path::Args GpuModel::path_args(int64_t B, int64_t L, const Layer& a) const {
  const AttentionSpec& at = layout_.config().attention;
  lcr::cuda::path::Args p;
  p.B = int(B);
  p.L = int(L);
  p.H = at.heads;
  p.Hkv = at.kv_heads;
  p.D = at.head_dim;
  p.q = at.numerics.qk_norm ? a.qn.data() : a.q.data();  // the normed rows under qk_norm
  p.k = at.numerics.qk_norm ? a.kn.data() : a.k.data();
  p.v = a.v.data();
  p.w = a.path_w.data();
  p.beta = a.path_beta.data();
  if (layout_.layer(0).fox_w >= 0) p.fox_q = p.fox_k = a.fox_c.data();
  p.softcap = float(at.numerics.softcap);  // scale 0: 1 / sqrt(head_dim), as the CPU
  return p;
}

void GpuModel::layer_forward(int l, const float* x_in, float* x_out) {
  Layer& a = layers_[size_t(l)];
  const LayerSlices& s = layout_.layer(l);
  const ModelConfig& c = layout_.config();
  const int64_t R = B_ * L_, D = layout_.D(), F = layout_.F(), H = layout_.H(), Hkv = layout_.Hkv(),
                dq = layout_.dq(), dv = layout_.dv();
  const float* P = params_.data();
  const float eps = float(c.norm_eps);
  const auto N = Trans::No;
  const Gemm& gemm = *gemm_;
  rmsnorm_forward(R, D, x_in, P + s.attn_norm, eps, a.xn1.data(), a.rstd1.data(), stream_);
  // q, k, v through one fp32 scratch, stored bf16 (what the attention kernels read).
  gemm(N, N, R, H * dq, D, 1, a.xn1.data(), P + s.wq, 0, proj_.data());
  to_bf16(R * H * dq, proj_.data(), a.q.data(), stream_);
  gemm(N, N, R, Hkv * dq, D, 1, a.xn1.data(), P + s.wk, 0, proj_.data());
  to_bf16(R * Hkv * dq, proj_.data(), a.k.data(), stream_);
  gemm(N, N, R, Hkv * dv, D, 1, a.xn1.data(), P + s.wv, 0, proj_.data());
  to_bf16(R * Hkv * dv, proj_.data(), a.v.data(), stream_);
  const float* fox_c = nullptr;
  if (s.fox_w >= 0) {
    gemm(N, N, R, H, D, 1, a.xn1.data(), P + s.fox_w, 0, a.fox_z.data());
    add_bias(R, H, P + s.fox_b, a.fox_z.data(), stream_);
    runner_->fox_gates(int(B_), int(L_), int(H), a.fox_z.data(), a.fox_c.data(), *a.ws, stream_);
    const double gs = fox_gate_scale(c.attention);  // spec.hpp: FoxGateScale
    if (gs != 1.0) scale(R * H, float(gs), a.fox_c.data(), stream_);
    fox_c = a.fox_c.data();
  }
  if (path_) {
    // u = xn1 Wu -> w (conv, act, normalise); z = xn1 Wb + b -> beta (path.hpp).
    const int64_t C = Hkv * dq;
    gemm(N, N, R, C, D, 1, a.xn1.data(), P + s.path_u, 0, a.path_u.data());
    if (runner_->whole_sequences())
      path_w_forward(B_, L_, Hkv, dq, c.path_w_silu, a.path_u.data(), P + s.path_conv,
                     a.path_w.data(), stream_);
    else
      runner_->path_w_forward(int(B_), int(L_), int(Hkv), int(dq), c.path_w_silu, a.path_u.data(),
                              P + s.path_conv, a.path_w.data(), stream_);
    gemm(N, N, R, Hkv, D, 1, a.xn1.data(), P + s.path_beta_w, 0, a.path_z.data());
    add_bias(R, Hkv, P + s.path_beta_b, a.path_z.data(), stream_);
    path_beta_forward(R * Hkv, a.path_z.data(), a.path_beta.data(), stream_);
    if (c.attention.numerics.qk_norm) {  // PaTH reads the normed q, k (kept for backward)
      path_qk_norm(a, P + s.attn, true, a.q.data(), a.qn.data());
      path_qk_norm(a, P + s.attn, false, a.k.data(), a.kn.data());
    }
    if (runner_->whole_sequences())
      path_attn_[size_t(l)]->forward(path_args(B_, L_, a), a.o.data(), a.lse.data(), stream_);
    else
      runner_->path_forward(l, path_args(B_, L_, a), a.o.data(), a.lse.data(), stream_);
    if (c.attention.numerics.has_sink()) {  // a per-row rescale: the same for whole rows or shards
      to_f32(R * H * dv, a.o.data(), o32_.data(), stream_);
      lcr::cuda::lanes::finish_output(int(B_), int(L_), int(H), int(dv),
                                      P + s.attn + layout_.attention().at("sink").offset,
                                      o32_.data(), a.lse.data(), a.o.data(), stream_);
    }
  } else {
    const DeviceParams dp{P + s.attn, layout_.attention().total()};
    runner_->forward(l, c.attention, dp,
                     attn_inputs(B_, L_, a.q.data(), a.k.data(), a.v.data(), fox_c),
                     AttentionOutputs{a.o.data(), a.lse.data()}, *a.ws, stream_);
  }
  // x_mid = x_in + o Wo
  to_f32(R * H * dv, a.o.data(), o32_.data(), stream_);
  LCR_CUDA_CHECK(
      cudaMemcpyAsync(a.x_mid.data(), x_in, size_t(R * D) * 4, cudaMemcpyDeviceToDevice, stream_));
  gemm(N, N, R, D, H * dv, 1, o32_.data(), P + s.wo, 1, a.x_mid.data());
  rmsnorm_forward(R, D, a.x_mid.data(), P + s.mlp_norm, eps, a.xn2.data(), a.rstd2.data(), stream_);
  gemm(N, N, R, F, D, 1, a.xn2.data(), P + s.w_gate, 0, a.gate.data());
  gemm(N, N, R, F, D, 1, a.xn2.data(), P + s.w_up, 0, a.up.data());
  swiglu_forward(R * F, a.gate.data(), a.up.data(), a.h.data(), stream_);
  LCR_CUDA_CHECK(
      cudaMemcpyAsync(x_out, a.x_mid.data(), size_t(R * D) * 4, cudaMemcpyDeviceToDevice, stream_));
  gemm(N, N, R, D, F, 1, a.h.data(), P + s.w_down, 1, x_out);
}

void GpuModel::backward() {
  require(have_forward_, "model.backward needs a forward pass first (and runs once per forward)");
  have_forward_ = false;
  const ModelConfig& c = layout_.config();
  const int64_t R = B_ * L_, D = layout_.D(), V = layout_.V();
  const float scale = norm_ > 0 ? float(1.0 / norm_) : 0.f;
  const int64_t Vp = vocab_pad();  // dlogits' padding columns are written as 0
  cross_entropy_backward(R, V, Vp, logits_.data(), labels_.data(), lse_.data(), scale,
                         logits_.data(), stream_);
  const float* dlogits = logits_.data();
  const auto N = Trans::No, Y = Trans::Yes;
  const Gemm& gemm = *gemm_;
  float* G = grads_.data();
  const float* P = params_.data();
  if (c.tie_embeddings) {
    gemm(N, N, R, D, Vp, 1, dlogits, head_pad_.data(), 0, dxn_.data());
    gemm(Y, N, Vp, D, R, 1, dlogits, xf_.data(), 0, dhead_pad_.data());
    axpy(V * D, 1.f, dhead_pad_.data(), G + layout_.embed(), stream_);
  } else {
    gemm(N, Y, R, D, Vp, 1, dlogits, head_pad_.data(), 0, dxn_.data());
    gemm(Y, N, D, Vp, R, 1, xf_.data(), dlogits, 0, dhead_pad_.data());
    add_rows(D, V, dhead_pad_.data(), Vp, G + layout_.lm_head(), V, stream_);
  }
  LCR_CUDA_CHECK(cudaMemsetAsync(dres_.data(), 0, dres_.bytes(), stream_));
  rmsnorm_backward(R, D, x_.back().data(), P + layout_.final_norm(), rstdf_.data(), dxn_.data(),
                   dres_.data(), G + layout_.final_norm(), partial_.data(), stream_);
  for (int l = c.n_layers - 1; l >= 0; --l) layer_backward(l, x_[size_t(l)].data());
  embedding_backward(emb_n_ids_, emb_n_chunks_, D, emb_ids_.data(), emb_id_chunks_.data(),
                     emb_chunks_.data(), emb_rows_.data(), dres_.data(), emb_partial_.data(),
                     G + layout_.embed(), stream_);
}

void GpuModel::layer_backward(int l, const float* x_in) {
  Layer& a = layers_[size_t(l)];
  const LayerSlices& s = layout_.layer(l);
  const int64_t R = B_ * L_, D = layout_.D(), F = layout_.F(), H = layout_.H(), Hkv = layout_.Hkv(),
                dq = layout_.dq(), dv = layout_.dv();
  const float* P = params_.data();
  float* G = grads_.data();
  const auto N = Trans::No, Y = Trans::Yes;
  const Gemm& gemm = *gemm_;
  float* dres = dres_.data();
  float* dxn = dxn_.data();
  // MLP branch: x_out = x_mid + h Wdown.
  gemm(N, Y, R, F, D, 1, dres, P + s.w_down, 0, dh_.data());
  gemm(Y, N, F, D, R, 1, a.h.data(), dres, 1, G + s.w_down);
  swiglu_backward(R * F, a.gate.data(), a.up.data(), dh_.data(), dgate_.data(), dup_.data(),
                  stream_);
  gemm(N, Y, R, D, F, 1, dgate_.data(), P + s.w_gate, 0, dxn);
  gemm(N, Y, R, D, F, 1, dup_.data(), P + s.w_up, 1, dxn);
  gemm(Y, N, D, F, R, 1, a.xn2.data(), dgate_.data(), 1, G + s.w_gate);
  gemm(Y, N, D, F, R, 1, a.xn2.data(), dup_.data(), 1, G + s.w_up);
  rmsnorm_backward(R, D, a.x_mid.data(), P + s.mlp_norm, a.rstd2.data(), dxn, dres, G + s.mlp_norm,
                   partial_.data(), stream_);  // dres: d x_mid
  // Attention branch: x_mid = x_in + o Wo.
  const int64_t HO = H * dv;
  gemm(N, Y, R, HO, D, 1, dres, P + s.wo, 0, dout_.data());
  to_f32(R * HO, a.o.data(), o32_.data(), stream_);
  gemm(Y, N, HO, D, R, 1, o32_.data(), dres, 1, G + s.wo);
  to_bf16(R * HO, dout_.data(), dout16_.data(), stream_);
  const bool fox = s.fox_w >= 0;
  const DeviceParams dp{P + s.attn, layout_.attention().total()};
  AttentionGrads g;
  g.dq = dq_.data();
  g.dk = dk_.data();
  g.dv = dv_.data();
  g.dparams = dp.size > 0 ? dparams_.data() : nullptr;
  g.dfox_cq = fox ? dfox_cq_.data() : nullptr;
  g.dfox_ck = fox ? dfox_ck_.data() : nullptr;
  if (path_) {
    lcr::cuda::path::Grads pg;
    pg.dq = dq_.data();
    pg.dk = dk_.data();
    pg.dv = dv_.data();
    pg.dw = dpath_w_.data();
    pg.dbeta = dpath_beta_.data();
    pg.dfox_q = g.dfox_cq;
    pg.dfox_k = g.dfox_ck;
    if (runner_->whole_sequences())
      path_attn_[size_t(l)]->backward(path_args(B_, L_, a), a.o.data(), a.lse.data(),
                                      dout16_.data(), pg, stream_);
    else
      runner_->path_backward(l, path_args(B_, L_, a), a.o.data(), a.lse.data(), dout16_.data(), pg,
                             stream_);
    // The attention parameters (sink, QK-norm gains): this rank's rows only, so every rank
    // adds its share (the trainer sums the gradients over the ranks).
    if (dp.size > 0) {
      const AttentionSpec& at = layout_.config().attention;
      const ParamLayout& pl = layout_.attention();
      LCR_CUDA_CHECK(cudaMemsetAsync(dparams_.data(), 0, size_t(dp.size) * 4, stream_));
      if (at.numerics.has_sink()) {  // dsink = -sum exp(sink - lse) <dO, O> (final lse and O)
        lcr::cuda::sdpa_row_delta(int(B_), int(L_), int(H), int(dv), a.o.data(), dout16_.data(),
                                  path_delta_.data(), stream_);
        lcr::cuda::lanes::sink_backward(int(B_), int(L_), int(H), dp.data + pl.at("sink").offset,
                                        a.lse.data(), path_delta_.data(),
                                        dparams_.data() + pl.at("sink").offset, stream_);
      }
      if (at.numerics.qk_norm) {  // dq, dk with respect to the un-normed q, k
        path_qk_norm_backward(a, dp.data, true, dq_.data(),
                              dparams_.data() + pl.at("qk_norm.q_gain").offset);
        path_qk_norm_backward(a, dp.data, false, dk_.data(),
                              dparams_.data() + pl.at("qk_norm.k_gain").offset);
      }
      axpy(dp.size, 1.f, dparams_.data(), G + s.attn, stream_);
    }
  } else {
    const AttentionInputs in =
        attn_inputs(B_, L_, a.q.data(), a.k.data(), a.v.data(), fox ? a.fox_c.data() : nullptr);
    runner_->backward(l, layout_.config().attention, dp, in,
                      AttentionOutputs{a.o.data(), a.lse.data()}, dout16_.data(), g, *a.ws,
                      stream_);
    if (dp.size > 0 && runner_->adds_dparams())
      axpy(dp.size, 1.f, dparams_.data(), G + s.attn, stream_);
  }
  const float* xn1 = a.xn1.data();
  const int64_t CQ = H * dq, CK = Hkv * dq, CV = Hkv * dv;
  gemm(N, Y, R, D, CQ, 1, dq_.data(), P + s.wq, 0, dxn);
  gemm(N, Y, R, D, CK, 1, dk_.data(), P + s.wk, 1, dxn);
  gemm(N, Y, R, D, CV, 1, dv_.data(), P + s.wv, 1, dxn);
  gemm(Y, N, D, CQ, R, 1, xn1, dq_.data(), 1, G + s.wq);
  gemm(Y, N, D, CK, R, 1, xn1, dk_.data(), 1, G + s.wk);
  gemm(Y, N, D, CV, R, 1, xn1, dv_.data(), 1, G + s.wv);
  if (fox) {
    // c feeds the query lane (+c_i) and the key lane (-c_j): dc = dcq + dck.
    axpy(R * H, 1.f, dfox_ck_.data(), dfox_cq_.data(), stream_);
    const double gs = fox_gate_scale(layout_.config().attention);  // c was scaled by gs
    if (gs != 1.0) scale(R * H, float(gs), dfox_cq_.data(), stream_);
    runner_->fox_gates_backward(int(B_), int(L_), int(H), a.fox_z.data(), dfox_cq_.data(),
                                dfox_z_.data(), *a.ws, stream_);
    gemm(N, Y, R, D, H, 1, dfox_z_.data(), P + s.fox_w, 1, dxn);
    gemm(Y, N, D, H, R, 1, xn1, dfox_z_.data(), 1, G + s.fox_w);
    bias_backward(R, H, dfox_z_.data(), G + s.fox_b, partial_.data(), stream_);
  }
  if (path_) {
    // beta branch (z = xn1 Wb + b), then the w branch (u = xn1 Wu): core/model/path.cpp's
    // path_backward for whole sequences. dpath_beta_ becomes dz, dpath_w_ d(pre-activation).
    path_beta_backward(R * Hkv, a.path_z.data(), dpath_beta_.data(), dpath_beta_.data(), stream_);
    const float* dz = dpath_beta_.data();
    gemm(N, Y, R, D, Hkv, 1, dz, P + s.path_beta_w, 1, dxn);
    gemm(Y, N, D, Hkv, R, 1, xn1, dz, 1, G + s.path_beta_w);
    bias_backward(R, Hkv, dz, G + s.path_beta_b, partial_.data(), stream_);
    if (runner_->whole_sequences())
      path_w_backward(B_, L_, Hkv, dq, layout_.config().path_w_silu, a.path_u.data(),
                      P + s.path_conv, dpath_w_.data(), dpath_u_.data(), G + s.path_conv,
                      partial_.data(), stream_);
    else
      runner_->path_w_backward(int(B_), int(L_), int(Hkv), int(dq), layout_.config().path_w_silu,
                               a.path_u.data(), P + s.path_conv, dpath_w_.data(), dpath_u_.data(),
                               G + s.path_conv, stream_);
    const int64_t C = Hkv * dq;
    gemm(N, Y, R, D, C, 1, dpath_u_.data(), P + s.path_u, 1, dxn);
    gemm(Y, N, D, C, R, 1, xn1, dpath_u_.data(), 1, G + s.path_u);
  }
  rmsnorm_backward(R, D, x_in, P + s.attn_norm, a.rstd1.data(), dxn, dres, G + s.attn_norm,
                   partial_.data(), stream_);  // dres: d x_in
}

std::string GpuModel::locate_nonfinite() {
  if (B_ == 0) return "";
  auto bad = [&](const DeviceBuffer<float>& b) {
    return b.size() > 0 && count_nonfinite(int64_t(b.size()), b.data(), stream_) > 0;
  };
  if (bad(x_[0])) return "embedding";
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& a = layers_[l];
    const std::string name = "layer " + std::to_string(l);
    if (bad(a.xn1)) return name + " (attention RMSNorm)";
    if (bad(a.fox_c)) return name + " (FoX forget gates)";
    if (bad(a.path_w))
      return name + " (PaTH w: a conv output row with zero, tiny or non-finite norm has no " +
             "direction; check the w projection and conv weights)";
    if (bad(a.path_beta)) return name + " (PaTH beta)";
    if (bad(a.lse)) return name + " (attention output)";
    if (bad(a.x_mid)) return name + " (attention output projection)";
    if (bad(a.h)) return name + " (SwiGLU MLP)";
    if (bad(x_[l + 1])) return name + " (MLP output projection)";
  }
  if (bad(xf_)) return "final RMSNorm";
  if (bad(logits_)) return "LM head";
  return "";
}

}  // namespace lcr::cuda::model
