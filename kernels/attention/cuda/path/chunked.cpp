// Chunked PaTH on one GPU (chunked.hpp): the chunk-local PaTH kernels with their folds, the
// carried queries per chunk distance through the SDPA kernels, and the reverse of both.
#include "kernels/attention/cuda/path/chunked.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"
#include "kernels/attention/cuda/partials.hpp"
#include "kernels/attention/cuda/path/plan.hpp"
#include "kernels/attention/cuda/sdpa.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda::path {

using bf16 = __nv_bfloat16;

namespace {

void zero(void* p, std::size_t bytes, cudaStream_t s) {
  if (bytes) LCR_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s));
}

// Brackets a step for bench_cuda_path --profile (plan.hpp).
struct Phase {
  cudaStream_t s;
  Phase(const char* name, cudaStream_t st) : s(st) { detail::profile_begin(name, s); }
  ~Phase() { detail::profile_end(s); }
};

}  // namespace

struct ChunkedScratch {
  DeviceBuffer<unsigned char> ws;  // the chunk-local PaTH kernels' workspace
  // Carried queries, a pair distance's partial result and the running one (fp32), the lse in
  // chunk layout [B C, H, Lc], the row deltas; the backward's gradient sums.
  DeviceBuffer<bf16> y;
  DeviceBuffer<float> o_blk, lse_blk, o_acc, lse_acc, lse_c, delta;
  DeviceBuffer<float> dy, dqfold, dkfold, dv_x, dfq_x, dfk_x, dm, dp;
};
std::shared_ptr<ChunkedScratch> make_chunked_scratch() {
  return std::make_shared<ChunkedScratch>();
}

struct Chunked::State {
  int chunk = 0;
  std::shared_ptr<ChunkedScratch> scratch;
  // Shape of the last forward: C chunks of Lc; T = C (C - 1) / 2 carry products per row b.
  int B = 0, L = 0, H = 0, Hkv = 0, D = 0, C = 0, Lc = 0;
  int64_t PP = 0, T = 0;  // PP: floats of one chunk's transitions, Hkv D D
  bool fox = false;
  const void* last[5] = {};  // the last forward's q, k, v, w, beta
  // Kept from forward: folds (chunk-major: [B, C, Lc, ...] is [B, L, ...]) and the products
  // M_d[a] for every distance d and query chunk a >= d, per b: [B][T][PP], d-major.
  DeviceBuffer<float> qfold, p, m;
  DeviceBuffer<bf16> kfold;
  DeviceBuffer<float> lse_keys;  // the forward's lse [B, H, L] (PaTH-FoX: the query lane's total)

  // M_d of row b starts after the products of distances 1 .. d-1 (C - 1, C - 2, ... of them).
  ChunkedScratch& x() { return *scratch; }
  float* m_of(DeviceBuffer<float>& buf, int b, int d) const {
    const int64_t before = int64_t(d - 1) * C - int64_t(d - 1) * d / 2;
    return buf.data() + (int64_t(b) * T + before) * PP;
  }
  Args local(const Args& a) const {
    Args l = a;
    l.B = B * C, l.L = Lc, l.q_pos0 = l.k_pos0 = 0;
    return l;
  }
  // The pairs at distance d of row b: queries y (chunks d .. C-1), keys k~ / v of chunks
  // 0 .. C-1-d; the queries sit Lc positions after the keys, so nothing is masked.
  SdpaArgs pair(const Args& a, int b, int d) const {
    SdpaArgs s;
    s.B = C - d, s.Lq = s.Lk = Lc, s.H = H, s.Hkv = Hkv, s.D = s.Dv = D;
    s.q = scratch->y.data();
    s.k = kfold.data() + int64_t(b) * L * Hkv * D;
    s.v = a.v + int64_t(b) * L * Hkv * D;
    s.q_pos0 = Lc, s.k_pos0 = 0;
    s.scale = a.scale > 0.f ? a.scale : float(1.0 / std::sqrt(double(D)));
    s.softcap = a.softcap;
    if (fox) {
      s.bias_q = a.fox_q + (int64_t(b) * L + int64_t(d) * Lc) * H;
      s.bias_k = a.fox_k + int64_t(b) * L * H;
    }
    return s;
  }
  // y <- M_d q~ for the query chunks d .. C-1 of row b.
  void carry_queries(int b, int d, cudaStream_t s) {
    path::carry(C - d, Lc, H, Hkv, D, m_of(m, b, d), q_rows(b, d), scratch->y.data(), s);
  }
  float* q_rows(int b, int d) { return qfold.data() + (int64_t(b) * L + int64_t(d) * Lc) * H * D; }
  // lse [B, H, L] <-> chunk layout [B C, H, Lc].
  void lse_to_chunks(const float* lse, float* out, cudaStream_t s) const {
    for (int b = 0; b < B; ++b)
      for (int c = 0; c < C; ++c)
        partials::copy_rows(lse + int64_t(b) * H * L, L, int64_t(c) * Lc,
                            out + (int64_t(b) * C + c) * H * Lc, Lc, 0, H, Lc, sizeof(float), s);
  }
  void lse_from_chunks(const float* in, float* lse, cudaStream_t s) const {
    for (int b = 0; b < B; ++b)
      for (int c = 0; c < C; ++c)
        partials::copy_rows(in + (int64_t(b) * C + c) * H * Lc, Lc, 0, lse + int64_t(b) * H * L, L,
                            int64_t(c) * Lc, H, Lc, sizeof(float), s);
  }

  void setup(const Args& a, int Lc_, cudaStream_t s) {
    const bool same = a.B == B && a.L == L && a.H == H && a.Hkv == Hkv && a.D == D && Lc_ == Lc;
    B = a.B, L = a.L, H = a.H, Hkv = a.Hkv, D = a.D, Lc = Lc_, C = a.L / Lc_;
    fox = a.fox_q != nullptr;
    PP = int64_t(Hkv) * D * D, T = int64_t(C) * (C - 1) / 2;
    const std::size_t nq = std::size_t(B) * L * H * D, nk = std::size_t(B) * L * Hkv * D;
    const std::size_t nr = std::size_t(B) * L * H, npp = std::size_t(PP);
    qfold.grow(nq);
    kfold.grow(nk);
    p.grow(std::size_t(B) * C * npp);
    m.grow(std::size_t(B * T) * npp);
    ChunkedScratch& x = *scratch;
    x.y.grow(nq);
    x.o_blk.grow(nq);
    x.lse_blk.grow(nr);
    x.o_acc.grow(nq);
    x.lse_acc.grow(nr);
    x.lse_c.grow(nr);
    const Args l = local(a);
    const std::size_t need =
        std::max(forward_workspace_bytes(l, true), backward_workspace_bytes(l, true));
    x.ws.grow(need);
    if (!same) {  // M_1 = I for every row b and query chunk
      std::vector<float> id(std::size_t(C - 1) * npp, 0.f);
      for (int64_t t = 0; t < int64_t(C - 1) * Hkv; ++t)
        for (int i = 0; i < D; ++i) id[std::size_t(t * D * D + i * D + i)] = 1.f;
      for (int b = 0; b < B; ++b)  // pageable source: staged before the call returns
        LCR_CUDA_CHECK(cudaMemcpyAsync(m_of(m, b, 1), id.data(), id.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, s));
    }
  }
};

Chunked::Chunked(int chunk, std::shared_ptr<ChunkedScratch> scratch)
    : st_(std::make_unique<State>()) {
  require(chunk >= -1, "cuda path Chunked: chunk length ", chunk,
          " is negative; pass a length in positions, 0 for the automatic choice or -1 for the "
          "whole-sequence kernels");
  st_->chunk = chunk;
  st_->scratch = scratch ? std::move(scratch) : make_chunked_scratch();
}
Chunked::~Chunked() = default;

int Chunked::chunk_length(const Args& a) const {
  // Automatic: 8192 positions at D = 64 from L = 65536 (8 chunks) on; the whole-sequence
  // kernels otherwise, and at D = 128, where the folds cost more than the chunks save
  // (docs/cuda.md PaTH section: fwd + bwd at (1,16,16384,64) chunks of 4096 are slower than
  // the whole sequence; at (1,8,65536,64) chunks of 8192 are the fastest, 4096 about even).
  if (st_->chunk == 0) return (a.D == 64 && a.L >= 65536 && a.L % 8192 == 0) ? 8192 : a.L;
  const int Lc = st_->chunk;
  return (Lc > 0 && a.L > Lc && a.L % Lc == 0) ? Lc : a.L;
}

std::size_t Chunked::bytes(bool with_scratch) const {
  const State& S = *st_;
  std::size_t n = S.kfold.bytes() + S.qfold.bytes() + S.p.bytes() + S.m.bytes();
  if (!with_scratch) return n;
  const ChunkedScratch& x = *S.scratch;
  n += x.ws.bytes() + x.y.bytes();
  for (const DeviceBuffer<float>* b :
       {&x.o_blk, &x.lse_blk, &x.o_acc, &x.lse_acc, &x.lse_c, &x.delta, &x.dy, &x.dqfold, &x.dkfold,
        &x.dv_x, &x.dfq_x, &x.dfk_x, &x.dm, &x.dp})
    n += b->bytes();
  return n;
}

void Chunked::forward(const Args& a, bf16* o, float* lse, cudaStream_t s) {
  check(a);
  require(o && lse, "cuda path Chunked forward: o and lse must be device pointers");
  State& S = *st_;
  ChunkedScratch& X = S.x();
  S.last[0] = a.q, S.last[1] = a.k, S.last[2] = a.v, S.last[3] = a.w, S.last[4] = a.beta;
  const int Lc = chunk_length(a);
  if (Lc == a.L) {  // one chunk: the whole-sequence kernels
    S.C = 1;
    X.ws.grow(forward_workspace_bytes(a));
    path::forward(a, o, lse, X.ws.data(), X.ws.size(), s);
    return;
  }
  S.setup(a, Lc, s);
  const int B = S.B, C = S.C, H = S.H, D = S.D;
  const int64_t L = S.L, nq = int64_t(B) * L * H * D;
  {  // Each chunk's own block (o written straight into o, lse in chunk layout) and folds.
    Phase ph("chunked: local PaTH", s);
    Folds f;
    f.q = S.qfold.data(), f.k = S.kfold.data(), f.p = S.p.data();
    path::forward(S.local(a), o, X.lse_acc.data(), X.ws.data(), X.ws.size(), s, &f);
    partials::to_f32(X.o_acc.data(), o, nq, s);
  }
  for (int b = 0; b < B; ++b)
    for (int d = 1; d < C; ++d) {
      const int n = C - d;
      if (d >= 2) {  // M_d[a] = P_{a-d+1} M_{d-1}[a], a = d .. C-1
        Phase ph("chunked: M chain", s);
        mat_products(n * S.Hkv, D, S.p.data() + (int64_t(b) * C + 1) * S.PP, false,
                     S.m_of(S.m, b, d - 1) + S.PP, false, S.m_of(S.m, b, d), false, s);
      }
      {
        Phase ph("chunked: carry", s);
        S.carry_queries(b, d, s);
      }
      {
        Phase ph("chunked: pairs (SDPA)", s);
        sdpa_forward(S.pair(a, b, d), nullptr, X.o_blk.data(), X.lse_blk.data(), s);
      }
      Phase ph("chunked: merge", s);
      partials::merge_partial(X.o_acc.data() + (int64_t(b) * L + int64_t(d) * S.Lc) * H * D,
                              X.lse_acc.data() + (int64_t(b) * C + d) * H * S.Lc, X.o_blk.data(),
                              X.lse_blk.data(), n, S.Lc, H, D, s);
    }
  Phase ph("chunked: merge", s);
  partials::finish_forward(X.o_acc.data(), X.lse_acc.data(), nullptr, B * C, S.Lc, H, D, o,
                           X.lse_c.data(), S.Lc, 0, s);
  S.lse_from_chunks(X.lse_c.data(), lse, s);
  if (S.fox) {
    S.lse_keys.grow(std::size_t(B) * H * L);
    LCR_CUDA_CHECK(cudaMemcpyAsync(S.lse_keys.data(), lse, std::size_t(B) * H * L * sizeof(float),
                                   cudaMemcpyDeviceToDevice, s));
  }
}

void Chunked::backward(const Args& a, const bf16* o, const float* lse, const bf16* dout,
                       const Grads& g, cudaStream_t s) {
  check(a);
  State& S = *st_;
  ChunkedScratch& X = S.x();
  const void* now[5] = {a.q, a.k, a.v, a.w, a.beta};
  for (int i = 0; i < 5; ++i)
    require(S.last[i] == now[i],
            "cuda path Chunked backward: its inputs differ from the last forward's; call "
            "forward() on these inputs first (the backward uses its folds)");
  require(o && lse && dout && g.dq && g.dk && g.dv && g.dw && g.dbeta &&
              (!a.fox_q || (g.dfox_q && g.dfox_k)),
          "cuda path Chunked backward: o, lse, dout, dq, dk, dv, dw, dbeta must be device "
          "pointers, and dfox_q / dfox_k for PaTH-FoX");
  if (S.C == 1) {
    X.ws.grow(backward_workspace_bytes(a));
    path::backward(a, o, lse, dout, g, X.ws.data(), X.ws.size(), s);
    return;
  }
  require(a.L == S.L && a.B == S.B && a.H == S.H && a.Hkv == S.Hkv && a.D == S.D,
          "cuda path Chunked backward: shape differs from the last forward's");
  const int B = S.B, C = S.C, H = S.H, Hkv = S.Hkv, D = S.D, Lc = S.Lc;
  const int64_t L = S.L;
  const std::size_t nq = std::size_t(B) * L * H * D, nk = std::size_t(B) * L * Hkv * D;
  const std::size_t nr = std::size_t(B) * L * H;
  // PaTH-FoX without softcap: the query lane's gradient has a closed form over all keys
  // (partials::query_bias_total), so the pairs need not sum it and take the SDPA's fast
  // bias-lane kernels; with softcap they sum it (dbias_q, the option path).
  const bool fox_total = S.fox && a.softcap == 0.f;
  X.delta.grow(nr);
  X.dy.grow(nq);
  X.dqfold.grow(nq);
  X.dkfold.grow(nk);
  X.dv_x.grow(nk);
  X.dm.grow(S.m.size());
  X.dp.grow(S.p.size());
  if (S.fox) X.dfk_x.grow(nr);
  if (S.fox && !fox_total) X.dfq_x.grow(nr);  // the pairs' query-lane sums
  {
    Phase ph("chunked: setup", s);
    S.lse_to_chunks(lse, X.lse_c.data(), s);
    sdpa_row_delta(B * C, Lc, H, D, o, dout, X.delta.data(), s);
    zero(X.dqfold.data(), nq * sizeof(float), s);
    zero(X.dkfold.data(), nk * sizeof(float), s);
    zero(X.dv_x.data(), nk * sizeof(float), s);
    zero(X.dm.data(), X.dm.bytes(), s);
    zero(X.dp.data(), X.dp.bytes(), s);
    if (S.fox) zero(X.dfk_x.data(), nr * 4, s);
    if (S.fox && !fox_total) zero(X.dfq_x.data(), nr * 4, s);
  }
  for (int b = 0; b < B; ++b) {
    for (int d = 1; d < C; ++d) {
      const int n = C - d;
      const int64_t qrow = int64_t(b) * L + int64_t(d) * Lc;  // first query row of the pairs
      {
        Phase ph("chunked: carry", s);
        S.carry_queries(b, d, s);
        zero(X.dy.data(), std::size_t(n) * Lc * H * D * sizeof(float), s);
      }
      {
        Phase ph("chunked: pairs (SDPA)", s);
        const int64_t krow = int64_t(b) * L;
        sdpa_backward(S.pair(a, b, d), X.lse_c.data() + (int64_t(b) * C + d) * H * Lc,
                      X.delta.data() + (int64_t(b) * C + d) * H * Lc, dout + qrow * H * D,
                      X.dy.data(), X.dkfold.data() + krow * Hkv * D, X.dv_x.data() + krow * Hkv * D,
                      S.fox && !fox_total ? X.dfq_x.data() + qrow * H : nullptr,
                      S.fox ? X.dfk_x.data() + krow * H : nullptr, true, s);
      }
      Phase ph("chunked: carry", s);
      carry_backward(n, Lc, H, Hkv, D, S.m_of(S.m, b, d), S.q_rows(b, d), X.dy.data(),
                     X.dqfold.data() + qrow * H * D, S.m_of(X.dm, b, d), s);
    }
    // dP: reverse of M_{d+1}[a] = P_{a-d} M_d[a] (a = d+1 .. C-1), longest products first.
    Phase ph("chunked: M chain", s);
    float* p1 = S.p.data() + (int64_t(b) * C + 1) * S.PP;
    float* dp1 = X.dp.data() + (int64_t(b) * C + 1) * S.PP;
    for (int d = C - 2; d >= 1; --d) {
      const int n = (C - 1 - d) * Hkv;
      mat_products(n, D, S.m_of(X.dm, b, d + 1), false, S.m_of(S.m, b, d) + S.PP, true, dp1, true,
                   s);
      mat_products(n, D, p1, true, S.m_of(X.dm, b, d + 1), false, S.m_of(X.dm, b, d) + S.PP, true,
                   s);
    }
  }
  {  // The chunk-local backward with the folds' gradients writes every output.
    Phase ph("chunked: local PaTH", s);
    FoldGrads fg;
    fg.dq = X.dqfold.data(), fg.dk = X.dkfold.data(), fg.dp = X.dp.data();
    path::backward(S.local(a), o, X.lse_c.data(), dout, g, X.ws.data(), X.ws.size(), s, &fg);
  }
  Phase ph("chunked: merge", s);
  partials::add_inplace(g.dv, X.dv_x.data(), int64_t(nk), s);
  if (S.fox) partials::add_inplace(g.dfox_k, X.dfk_x.data(), int64_t(nr), s);
  if (fox_total) {                  // replaces the chunk-local part the PaTH backward wrote
    float* delta = X.o_blk.data();  // [B, H, L], scratch free by now
    sdpa_row_delta(B, int(L), H, D, o, dout, delta, s);
    partials::query_bias_total(delta, S.lse_keys.data(), lse, B, H, L, g.dfox_q, s);
  } else if (S.fox) {
    partials::add_inplace(g.dfox_q, X.dfq_x.data(), int64_t(nr), s);
  }
}

}  // namespace lcr::cuda::path
