// PaTH's convolution rows across chunks and the per-layer PaTH rings (gpu_path_shards.hpp).
#include "core/train/gpu_path_shards.hpp"

#include <algorithm>

#include "core/model/cuda/gpu_layers.hpp"
#include "core/model/cuda/gpu_path.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/base/error.hpp"

namespace lcr::train {

using cuda::DeviceBuffer;

namespace {

// rows [r0, r0 + n) of src [B, src_L, C] -> rows [d0, d0 + n) of dst [B, dst_L, C].
void copy_rows(const float* src, int64_t src_L, int64_t r0, float* dst, int64_t dst_L, int64_t d0,
               int B, int64_t n, int64_t C, cudaStream_t s) {
  if (n <= 0) return;
  LCR_CUDA_CHECK(cudaMemcpy2DAsync(dst + d0 * C, size_t(dst_L * C) * 4, src + r0 * C,
                                   size_t(src_L * C) * 4, size_t(n * C) * 4, size_t(B),
                                   cudaMemcpyDeviceToDevice, s));
}

}  // namespace

GpuPathShards::GpuPathShards(NcclCommunicator& comm, SeqLayout layout, int layers)
    : comm_(comm), layout_(std::move(layout)), rings_(size_t(layers)), batch_(size_t(layers)) {}

GpuPathShards::~GpuPathShards() = default;

void GpuPathShards::exchange_tails(int B, int L, int64_t C, const float* x, cudaStream_t s) {
  const int64_t n = int64_t(layout_.num_chunks()) * B * 2 * C;
  slots_.grow(size_t(n));
  LCR_CUDA_CHECK(cudaMemsetAsync(slots_.data(), 0, size_t(n) * 4, s));
  for (int c : layout_.chunks_of(comm_.rank())) {
    const Chunk& ch = layout_.chunk(c);
    const int64_t rows = std::min<int64_t>(2, ch.length), end = ch.local_offset + ch.length;
    // [B, 2, C] slot, the last `rows` rows at its end
    copy_rows(x, L, end - rows, slots_.data() + int64_t(c) * B * 2 * C, 2, 2 - rows, B, rows, C, s);
  }
  comm_.after(s);
  comm_.allreduce_sum_async(slots_.data(), size_t(n), DType::F32);
  comm_.join(s);
}

const float* GpuPathShards::prefix_row(int c, int back, int B, int b, int64_t C) const {
  // start - 1: the last row of chunk c - 1; start - 2: its second-to-last row, or the last
  // row of chunk c - 2 when chunk c - 1 has one row.
  int cc = c - 1, row = 1;
  if (back == 2) {
    if (layout_.chunk(c - 1).length >= 2)
      row = 0;
    else
      cc = c - 2;
  }
  return slots_.data() + ((int64_t(cc) * B + b) * 2 + row) * C;
}

int64_t GpuPathShards::extend(int c, int B, int L, int64_t C, const float* u, cudaStream_t s) {
  const Chunk& ch = layout_.chunk(c);
  const int64_t e = std::min<int64_t>(2, ch.start), Le = ch.length + e;
  ext_u_.grow(size_t(B * Le * C));
  for (int b = 0; b < B; ++b)
    for (int64_t j = 0; j < e; ++j)
      LCR_CUDA_CHECK(cudaMemcpyAsync(ext_u_.data() + (b * Le + j) * C,
                                     prefix_row(c, int(e - j), B, b, C), size_t(C) * 4,
                                     cudaMemcpyDeviceToDevice, s));
  copy_rows(u, L, ch.local_offset, ext_u_.data(), Le, e, B, ch.length, C, s);
  return e;
}

void GpuPathShards::w_forward(int B, int L, int Hkv, int d, bool silu, const float* u,
                              const float* conv, float* w, cudaStream_t s) {
  const int64_t C = int64_t(Hkv) * d;
  exchange_tails(B, L, C, u, s);
  for (int c : layout_.chunks_of(comm_.rank())) {
    const Chunk& ch = layout_.chunk(c);
    const int64_t e = extend(c, B, L, C, u, s), n = ch.length, Le = n + e;
    ext_w_.grow(size_t(B * Le * C));
    cuda::model::path_w_forward(B, Le, Hkv, d, silu, ext_u_.data(), conv, ext_w_.data(), s);
    copy_rows(ext_w_.data(), Le, e, w, L, ch.local_offset, B, n, C, s);
  }
}

void GpuPathShards::w_backward(int B, int L, int Hkv, int d, bool silu, const float* u,
                               const float* conv, float* dw, float* du, float* dconv,
                               cudaStream_t s) {
  const int64_t C = int64_t(Hkv) * d, nslots = int64_t(layout_.num_chunks()) * B * 2 * C;
  exchange_tails(B, L, C, u, s);
  dslots_.grow(size_t(nslots));  // gradients of the chunks' last two rows
  LCR_CUDA_CHECK(cudaMemsetAsync(dslots_.data(), 0, size_t(nslots) * 4, s));
  for (int c : layout_.chunks_of(comm_.rank())) {
    const Chunk& ch = layout_.chunk(c);
    const int64_t e = extend(c, B, L, C, u, s), n = ch.length, Le = n + e;
    ext_w_.grow(size_t(B * Le * C));  // d w of [prefix; chunk], zero on the prefix rows
    ext_du_.grow(size_t(B * Le * C));
    partial_.grow(size_t(cuda::model::path_conv_partial_floats(B * Le, Hkv, d)));
    LCR_CUDA_CHECK(cudaMemsetAsync(ext_w_.data(), 0, size_t(B * Le * C) * 4, s));
    copy_rows(dw, L, ch.local_offset, ext_w_.data(), Le, e, B, n, C, s);
    cuda::model::path_w_backward(B, Le, Hkv, d, silu, ext_u_.data(), conv, ext_w_.data(),
                                 ext_du_.data(), dconv, partial_.data(), s);
    copy_rows(ext_du_.data(), Le, e, du, L, ch.local_offset, B, n, C, s);
    // The prefix rows' gradients, into the slot (and row) of the chunk that holds them.
    for (int b = 0; b < B; ++b)
      for (int64_t j = 0; j < e; ++j) {
        const float* src = ext_du_.data() + (b * Le + j) * C;
        const float* at = prefix_row(c, int(e - j), B, b, C);  // same offset in dslots
        cuda::model::axpy(C, 1.f, src, dslots_.data() + (at - slots_.data()), s);
      }
  }
  comm_.after(s);
  comm_.allreduce_sum_async(dslots_.data(), size_t(nslots), DType::F32);
  comm_.join(s);
  for (int c : layout_.chunks_of(comm_.rank())) {  // add what refers to our rows
    const Chunk& ch = layout_.chunk(c);
    const int64_t rows = std::min<int64_t>(2, ch.length), end = ch.local_offset + ch.length;
    for (int b = 0; b < B; ++b)
      cuda::model::axpy(rows * C, 1.f, dslots_.data() + ((int64_t(c) * B + b) * 2 + (2 - rows)) * C,
                        du + (int64_t(b) * L + end - rows) * C, s);
  }
}

cuda::PathRing& GpuPathShards::ring(int l, const cuda::path::Args& a) {
  auto& r = rings_[size_t(l)];
  if (!r || batch_[size_t(l)] != a.B) {
    // Finer chunks for the ring (local rows unchanged): cuda::path_ring_split.
    const SeqLayout fine(layout_.kind(), layout_.length(), layout_.ranks(),
                         cuda::path_ring_split(layout_, a.D));
    r = std::make_unique<cuda::PathRing>(comm_, fine, a.B, a.H, a.Hkv, a.D, a.fox_q != nullptr,
                                         ws_);
    batch_[size_t(l)] = a.B;
  }
  return *r;
}

namespace {
cuda::PathRingArgs ring_args(const cuda::path::Args& a) {
  cuda::PathRingArgs r;
  r.B = a.B, r.H = a.H, r.Hkv = a.Hkv, r.D = a.D;
  r.q = a.q, r.k = a.k, r.v = a.v, r.w = a.w, r.beta = a.beta;
  r.fox_q = a.fox_q, r.fox_k = a.fox_k;
  r.scale = a.scale, r.softcap = a.softcap;
  return r;
}
}  // namespace

void GpuPathShards::forward(int l, const cuda::path::Args& a, __nv_bfloat16* o, float* lse,
                            cudaStream_t s) {
  ring(l, a).forward(ring_args(a), o, lse, s);
}

void GpuPathShards::backward(int l, const cuda::path::Args& a, const __nv_bfloat16* o,
                             const float* lse, const __nv_bfloat16* dout,
                             const cuda::path::Grads& g, cudaStream_t s) {
  cuda::PathRingGrads rg;
  rg.dq = g.dq, rg.dk = g.dk, rg.dv = g.dv, rg.dw = g.dw, rg.dbeta = g.dbeta;
  rg.dfox_q = g.dfox_q, rg.dfox_k = g.dfox_k;
  ring(l, a).backward(ring_args(a), o, lse, dout, rg, s);
}

}  // namespace lcr::train
