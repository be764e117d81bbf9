// cuDNN's fused attention behind lcr's SDPA API (cudnn_sdpa.hpp). The graphs are the
// FlashAttention patterns cuDNN's SDPA engines recognise (the ones cuDNN's frontend builds
// for sdpa / sdpa_backward with a top-left causal mask), written out node by node:
//
//   forward   S = Q K^T * scale [-> causal: GEN_INDEX row >= col, else -inf]
//             m = max_j S, E = exp(S - m), l = sum_j E, stats = m + log l,
//             P = E / l (bf16), O = P V
//   backward  delta = sum_c dO O (the non-virtual softmax_sum), P = exp(S * scale - stats)
//             [masked], dV = P^T dO, dS = P (dO V^T - delta) * scale,
//             dQ_accum = dS K (fp32 scratch) -> dQ (bf16), dK = dS^T Q
//             (GQA: dK, dV summed over the group by a reduction node)
//
// lcr's layouts map onto cuDNN's [b, h, s, d] dims by strides: q [B, Lq, H, D] is
// strides (Lq H D, D, H D, 1); K enters transposed ([b, hk, d, s]), lse is [B, H, Lq].
// Plans are built once per shape and thread (cuDNN may compile kernels: ~1 s), cached,
// and shapes no engine serves are remembered too.
#include "kernels/attention/cuda/cudnn/cudnn_sdpa.hpp"

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/cudnn/cudnn_graph.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/attention/cuda/sdpa_internal.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda::cudnn {
namespace {

// The graph's named tensors (variant-pack uids); virtual tensors number from 1000.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kNegInf,
  kDO,
  kDQ,
  kDK,
  kDV,
  kOne,
  kSoftmaxSum,
  kDQAccum
};

enum class Mask { Unsupported, Causal, None };

// Self-attention gets the causal mask; a key block wholly in the queries' past gets none.
Mask mask_of(const SdpaArgs& a) {
  if (a.Lq < 1 || a.Lk < 1) return Mask::Unsupported;
  if (a.q_pos0 == a.k_pos0 && a.Lq == a.Lk) return Mask::Causal;
  if (a.k_pos0 + a.Lk - 1 <= a.q_pos0) return Mask::None;
  return Mask::Unsupported;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

const char* common_unsupported(const SdpaArgs& a) {
  if (::lcr::cuda::detail::has_options(a))
    return "ALiBi, bias lanes and softcap run on lcr's kernels only (cuDNN gets the plain "
           "product)";
  if (!(a.scale > 0.f)) return "the scale must be > 0";
  if (mask_of(a) == Mask::Unsupported)
    return "cuDNN serves self-attention (q_pos0 == k_pos0, Lq == Lk) and key blocks wholly in "
           "the queries' past; other offsets and empty calls run on lcr's kernels";
  return nullptr;
}

struct Shape {
  bool backward;
  int device, B, H, Hkv, Lq, Lk, D, Dv;
  Mask mask;
  bool operator<(const Shape& o) const {
    return std::tie(backward, device, B, H, Hkv, Lq, Lk, D, Dv, mask) <
           std::tie(o.backward, o.device, o.B, o.H, o.Hkv, o.Lq, o.Lk, o.D, o.Dv, o.mask);
  }
};

struct Entry {
  std::shared_ptr<Plan> plan;  // null: no engine; why says so
  std::string why;
};

// Per thread (cuDNN handles are not to be shared between threads): one handle per device,
// the plan cache, and one scratch buffer per stream (calls on one stream are ordered, so
// they may reuse it; calls on two streams must not share it).
struct ThreadState {
  std::map<int, cudnnHandle_t> handles;
  std::map<Shape, Entry> plans;
  std::map<cudaStream_t, DeviceBuffer<char>> scratch;
};
thread_local ThreadState state;

cudnnHandle_t handle_for(const Api& api, int device) {
  auto it = state.handles.find(device);
  if (it != state.handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  const cudnnStatus_t s = api.Create(&h);
  require(s == CUDNN_STATUS_SUCCESS, "cuDNN: cudnnCreate failed on device ", device, ": ",
          status_text(api, s));
  // Never destroyed: the handle lives as long as the thread, and destroying it at exit can
  // run after the CUDA context is gone.
  return state.handles[device] = h;
}

Dims bshd_dims(int64_t B, int64_t L, int64_t H, int64_t D) { return {B, H, L, D}; }
Dims bshd_strides(int64_t L, int64_t H, int64_t D) { return {L * H * D, D, H * D, 1}; }

struct Layout {
  int64_t B, H, Hk, Lq, Lk, D, Dv;
  explicit Layout(const Shape& s)
      : B(s.B), H(s.H), Hk(s.Hkv), Lq(s.Lq), Lk(s.Lk), D(s.D), Dv(s.Dv) {}
  Dims sd() const { return {B, H, Lq, Lk}; }  // the score matrix [b, h, sq, skv]
  Dims ss() const { return {H * Lq * Lk, Lq * Lk, Lk, 1}; }
  Dims st() const { return {B, H, Lk, Lq}; }  // its transpose as a matmul operand
  Dims sts() const { return {H * Lq * Lk, Lq * Lk, 1, Lk}; }
  Dims rd() const { return {B, H, Lq, 1}; }  // one value per query row
  Dims rs() const { return {H * Lq, Lq, 1, 1}; }
};

// x -> x where row >= col, -inf elsewhere (GEN_INDEX over the score dims, top-left diagonal).
Tensor causal_mask(GraphBuilder& g, const Layout& l, Tensor x, Tensor neg_inf) {
  Tensor col = g.virt(CUDNN_DATA_INT32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, col, nullptr, nullptr, 3);
  Tensor row = g.virt(CUDNN_DATA_INT32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, row, nullptr, nullptr, 2);
  Tensor keep = g.virt(CUDNN_DATA_BOOLEAN, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, keep, &col);
  Tensor y = g.virt(CUDNN_DATA_FLOAT, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, y, &neg_inf, &keep);
  return y;
}

std::shared_ptr<Plan> build_forward(const Api& api, cudnnHandle_t h, const Shape& s,
                                    std::string* why) {
  const Layout l(s);
  GraphBuilder g(api);
  const auto bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  Tensor q = g.tensor(kQ, bf, bshd_dims(l.B, l.Lq, l.H, l.D), bshd_strides(l.Lq, l.H, l.D));
  Tensor kt = g.tensor(kK, bf, {l.B, l.Hk, l.D, l.Lk}, {l.Lk * l.Hk * l.D, l.D, 1, l.Hk * l.D});
  Tensor v = g.tensor(kV, bf, bshd_dims(l.B, l.Lk, l.Hk, l.Dv), bshd_strides(l.Lk, l.Hk, l.Dv));
  Tensor o = g.tensor(kO, bf, bshd_dims(l.B, l.Lq, l.H, l.Dv), bshd_strides(l.Lq, l.H, l.Dv));
  Tensor stats = g.tensor(kStats, f32, l.rd(), l.rs());
  Tensor scale = g.scalar(kScale);
  Tensor s0 = g.virt(f32, l.sd(), l.ss());
  g.matmul(q, kt, s0);
  Tensor x = g.virt(f32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_MUL, f32, s0, x, &scale);
  if (s.mask == Mask::Causal) x = causal_mask(g, l, x, g.scalar(kNegInf));
  Tensor mx = g.virt(f32, l.rd(), l.rs());
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, x, mx);
  Tensor centred = g.virt(f32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_SUB, f32, x, centred, &mx);
  Tensor e = g.virt(f32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_EXP, f32, centred, e);
  Tensor sum = g.virt(f32, l.rd(), l.rs());
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  Tensor log_sum = g.virt(f32, l.rd(), l.rs());
  g.pointwise(CUDNN_POINTWISE_LOG, f32, sum, log_sum);
  g.pointwise(CUDNN_POINTWISE_ADD, f32, mx, stats, &log_sum);
  Tensor p = g.virt(bf, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_DIV, f32, e, p, &sum);
  g.matmul(p, v, o);
  return g.build(h, why);
}

std::shared_ptr<Plan> build_backward(const Api& api, cudnnHandle_t h, const Shape& s,
                                     std::string* why) {
  const Layout l(s);
  GraphBuilder g(api);
  const auto bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  const bool gqa = l.H != l.Hk;
  Tensor q = g.tensor(kQ, bf, bshd_dims(l.B, l.Lq, l.H, l.D), bshd_strides(l.Lq, l.H, l.D));
  Tensor kt = g.tensor(kK, bf, {l.B, l.Hk, l.D, l.Lk}, {l.Lk * l.Hk * l.D, l.D, 1, l.Hk * l.D});
  Tensor vt = g.tensor(kV, bf, {l.B, l.Hk, l.Dv, l.Lk}, {l.Lk * l.Hk * l.Dv, l.Dv, 1, l.Hk * l.Dv});
  Tensor o = g.tensor(kO, bf, bshd_dims(l.B, l.Lq, l.H, l.Dv), bshd_strides(l.Lq, l.H, l.Dv));
  Tensor dout = g.tensor(kDO, bf, bshd_dims(l.B, l.Lq, l.H, l.Dv), bshd_strides(l.Lq, l.H, l.Dv));
  Tensor stats = g.tensor(kStats, f32, l.rd(), l.rs());
  Tensor scale = g.scalar(kScale), one = g.scalar(kOne);
  Tensor dq = g.tensor(kDQ, bf, bshd_dims(l.B, l.Lq, l.H, l.D), bshd_strides(l.Lq, l.H, l.D));
  Tensor dk = g.tensor(kDK, bf, bshd_dims(l.B, l.Lk, l.Hk, l.D), bshd_strides(l.Lk, l.Hk, l.D));
  Tensor dv = g.tensor(kDV, bf, bshd_dims(l.B, l.Lk, l.Hk, l.Dv), bshd_strides(l.Lk, l.Hk, l.Dv));
  Tensor softmax_sum = g.tensor(kSoftmaxSum, f32, l.rd(), l.rs());
  Tensor dq_accum =
      g.tensor(kDQAccum, f32, {l.B, l.H, l.Lq, l.D}, {l.H * l.Lq * l.D, l.Lq * l.D, l.D, 1});

  Tensor dp = g.virt(f32, l.sd(), l.ss());
  g.matmul(dout, vt, dp);
  Tensor s0 = g.virt(f32, l.sd(), l.ss());
  g.matmul(q, kt, s0);
  Tensor doo = g.virt(f32, {l.B, l.H, l.Lq, l.Dv}, {l.H * l.Lq * l.Dv, l.Lq * l.Dv, l.H * l.Dv, 1});
  g.pointwise(CUDNN_POINTWISE_MUL, f32, dout, doo, &o);
  Tensor k = g.virt(f32, {l.B, l.Hk, l.Lk, l.D}, {l.Lk * l.Hk * l.D, l.D, l.Hk * l.D, 1});
  g.reshape(kt, k);
  Tensor s1 = g.virt(f32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_MUL, f32, s0, s1, &scale);
  Tensor x = g.virt(f32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_SUB, f32, s1, x, &stats);
  if (s.mask == Mask::Causal) x = causal_mask(g, l, x, g.scalar(kNegInf));
  Tensor p = g.virt(f32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_EXP, f32, x, p);
  Tensor pt = g.virt(bf, l.st(), l.sts());
  g.reshape(p, pt);
  const Dims dv_full{l.B, l.H, l.Lk, l.Dv}, dv_full_s{l.H * l.Lk * l.Dv, l.Lk * l.Dv, l.Dv, 1};
  Tensor dv_out = gqa ? g.virt(bf, dv_full, dv_full_s) : dv;
  g.matmul(pt, dout, dv_out);
  Tensor rowsum = g.virt(f32, l.rd(), l.rs());
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, doo, rowsum);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, rowsum, softmax_sum, &one);
  Tensor t = g.virt(f32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_SUB, f32, dp, t, &softmax_sum);
  Tensor t2 = g.virt(f32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_MUL, f32, t, t2, &p);
  Tensor ds = g.virt(f32, l.sd(), l.ss());
  g.pointwise(CUDNN_POINTWISE_MUL, f32, t2, ds, &scale);
  g.matmul(ds, k, dq_accum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, f32, dq_accum, dq);
  Tensor dst = g.virt(bf, l.st(), l.sts());
  g.reshape(ds, dst);
  const Dims dk_full{l.B, l.H, l.Lk, l.D}, dk_full_s{l.H * l.Lk * l.D, l.Lk * l.D, l.D, 1};
  Tensor dk_out = gqa ? g.virt(bf, dk_full, dk_full_s) : dk;
  g.matmul(dst, q, dk_out);
  if (gqa) {
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dk_out, dk);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dv_out, dv);
  }
  return g.build(h, why);
}

// The cached plan for the call's shape, or null (why set) when none can be built.
const Entry& plan_for(const Api& api, cudnnHandle_t h, const Shape& s) {
  auto it = state.plans.find(s);
  if (it != state.plans.end()) return it->second;
  Entry e;
  try {
    e.plan = s.backward ? build_backward(api, h, s, &e.why) : build_forward(api, h, s, &e.why);
  } catch (const Error& err) {  // a descriptor refused: this shape is not for cuDNN
    e.plan = nullptr;
    e.why = err.what();
  }
  return state.plans[s] = std::move(e);
}

// Scratch of at least `bytes` for the stream, carved by the caller.
char* scratch(cudaStream_t s, size_t bytes) {
  DeviceBuffer<char>& b = state.scratch[s];
  if (b.size() < bytes) {
    LCR_CUDA_CHECK(cudaStreamSynchronize(s));  // the old buffer may still be in use
    b.grow(bytes);
  }
  return b.data();
}

size_t round_up(size_t n) { return (n + 255) / 256 * 256; }

Shape shape_of(const SdpaArgs& a, bool backward) {
  int dev = 0;
  LCR_CUDA_CHECK(cudaGetDevice(&dev));
  return {backward, dev, a.B, a.H, a.Hkv, a.Lq, a.Lk, a.D, a.Dv, mask_of(a)};
}

// The loaded API, the thread's handle and the cached plan of one call.
struct Prepared {
  const Api* api = nullptr;
  cudnnHandle_t handle = nullptr;
  const Plan* plan = nullptr;
};

// The call's plan, or false (nothing launched, *why set) when cuDNN cannot serve it.
bool prepare(const SdpaArgs& a, bool backward, Prepared* p, std::string* why) {
  p->api = cudnn::api(why);
  if (!p->api) return false;
  const Shape s = shape_of(a, backward);
  p->handle = handle_for(*p->api, s.device);
  const Entry& e = plan_for(*p->api, p->handle, s);
  if (!e.plan) *why = "cuDNN has no engine for this shape: " + e.why;
  p->plan = e.plan.get();
  return p->plan != nullptr;
}

// Runs the plan on stream s with the variant pack (uids[i] -> ptrs[i]) and workspace.
void run(const Prepared& p, const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
         void* workspace, cudaStream_t s) {
  const cudnnStatus_t st = p.api->SetStream(p.handle, s);
  require(st == CUDNN_STATUS_SUCCESS, "cuDNN: cudnnSetStream failed: ", status_text(*p.api, st));
  execute(*p.api, p.handle, *p.plan, uids, ptrs, workspace);
}

}  // namespace

const char* unsupported_forward(const SdpaArgs& a, const __nv_bfloat16* o, const float* o_f32,
                                const float* lse) {
  if (const char* why = common_unsupported(a)) return why;
  if (!o || o_f32) return "cuDNN writes the bf16 o only (the call asks for o_f32)";
  if (!aligned16(o) || !aligned16(lse)) return "o and lse must be 16-byte aligned for cuDNN";
  return nullptr;
}

const char* unsupported_backward(const SdpaArgs& a, const __nv_bfloat16* o, const float* dq,
                                 const float* dk, const float* dv, const float* dbias_q,
                                 const float* dbias_k, const float* dbias_q_sums) {
  if (const char* why = common_unsupported(a)) return why;
  if (!o) return "cuDNN forms delta = <dO, O> itself and needs the forward's bf16 o";
  if (dbias_q || dbias_k || dbias_q_sums) return "bias-lane gradients run on lcr's kernels only";
  if (!aligned16(o) || !aligned16(dq) || !aligned16(dk) || !aligned16(dv))
    return "o, dq, dk and dv must be 16-byte aligned for cuDNN";
  return nullptr;
}

bool available(std::string* why) { return api(why) != nullptr; }

bool forward(const SdpaArgs& a, __nv_bfloat16* o, float* lse, cudaStream_t s, std::string* why) {
  Prepared p;
  if (!prepare(a, false, &p, why)) return false;
  float scale = a.scale, neg_inf = -INFINITY;
  std::vector<int64_t> uids{kQ, kK, kV, kO, kStats, kScale};
  std::vector<void*> ptrs{const_cast<__nv_bfloat16*>(a.q),
                          const_cast<__nv_bfloat16*>(a.k),
                          const_cast<__nv_bfloat16*>(a.v),
                          o,
                          lse,
                          &scale};
  if (mask_of(a) == Mask::Causal) uids.push_back(kNegInf), ptrs.push_back(&neg_inf);
  run(p, uids, ptrs, scratch(s, round_up(size_t(p.plan->workspace_bytes)) + 256), s);
  return true;
}

bool backward(const SdpaArgs& a, const float* lse, const __nv_bfloat16* o,
              const __nv_bfloat16* dout, float* dq, float* dk, float* dv, bool accumulate,
              cudaStream_t s, std::string* why, __nv_bfloat16* dq16, __nv_bfloat16* dk16) {
  if ((dq16 && !aligned16(dq16)) || (dk16 && !aligned16(dk16))) {
    *why = "bf16 dq and dk must be 16-byte aligned for cuDNN";
    return false;
  }
  Prepared p;
  if (!prepare(a, true, &p, why)) return false;
  const int64_t rows = int64_t(a.B) * a.H * a.Lq;
  const int64_t nq = rows * a.D, nk = int64_t(a.B) * a.Lk * a.Hkv * a.D,
                nv = int64_t(a.B) * a.Lk * a.Hkv * a.Dv;
  // Scratch: [cuDNN workspace | softmax_sum f32 | dQ_accum f32 | dQ, dK, dV bf16].
  const size_t off_sum = round_up(size_t(p.plan->workspace_bytes));
  const size_t off_acc = off_sum + round_up(4 * size_t(rows));
  const size_t off_dq = off_acc + round_up(4 * size_t(nq));
  const size_t off_dk = off_dq + round_up(2 * size_t(nq));
  const size_t off_dv = off_dk + round_up(2 * size_t(nk));
  char* ws = scratch(s, off_dv + round_up(2 * size_t(nv)));
  float* dq_acc = reinterpret_cast<float*>(ws + off_acc);
  // The caller's bf16 dq / dk when given (sdpa_backward_bf16_qk), else scratch to widen.
  const bool widen_q = !dq16, widen_k = !dk16;
  if (widen_q) dq16 = reinterpret_cast<__nv_bfloat16*>(ws + off_dq);
  if (widen_k) dk16 = reinterpret_cast<__nv_bfloat16*>(ws + off_dk);
  auto* dv16 = reinterpret_cast<__nv_bfloat16*>(ws + off_dv);
  float scale = a.scale, one = 1.f, neg_inf = -INFINITY;
  std::vector<int64_t> uids{kQ,   kK,  kV,  kO,  kDO,         kStats,  kScale,
                            kOne, kDQ, kDK, kDV, kSoftmaxSum, kDQAccum};
  std::vector<void*> ptrs{const_cast<__nv_bfloat16*>(a.q),
                          const_cast<__nv_bfloat16*>(a.k),
                          const_cast<__nv_bfloat16*>(a.v),
                          const_cast<__nv_bfloat16*>(o),
                          const_cast<__nv_bfloat16*>(dout),
                          const_cast<float*>(lse),
                          &scale,
                          &one,
                          dq16,
                          dk16,
                          dv16,
                          ws + off_sum,
                          dq_acc};
  if (mask_of(a) == Mask::Causal) uids.push_back(kNegInf), ptrs.push_back(&neg_inf);
  run(p, uids, ptrs, ws, s);
  // dQ from cuDNN's bf16 output: its fp32 dQ_accum is scratch in cuDNN's own order, not
  // the declared [B, H, L, D] (read that way, every test fails).
  if (widen_q) detail::add_bf16_to_f32(nq, dq16, dq, accumulate, s);
  if (widen_k) detail::add_bf16_to_f32(nk, dk16, dk, accumulate, s);
  detail::add_bf16_to_f32(nv, dv16, dv, accumulate, s);
  return true;
}

}  // namespace lcr::cuda::cudnn
