// GPU PaTH ring (path_ring_cuda.hpp): the chunk-local PaTH kernel with its boundary folds,
// the transitions' all-reduce, the carried query per pair through RingSdpa's pair hook, and
// the reverse of all three.
#include "parallel/ring/cuda/path_ring_cuda.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/base/error.hpp"
#include "parallel/ring/cuda/ring_state.hpp"

namespace lcr::cuda {

using bf16 = __nv_bfloat16;

struct PathRing::State : RingPairHook {
  NcclCommunicator* comm = nullptr;
  SeqLayout layout;
  int B = 0, H = 0, Hkv = 0, D = 0, N = 1, me = 0;
  bool fox = false, one_chunk = true;
  int64_t Lr = 0, PP = 0;  // PP: floats of one chunk's transitions, B Hkv D D
  std::unique_ptr<RingSdpa> ring;

  // Per local chunk: gathered inputs (B > 1 with two chunks), its own block, folds, carried
  // queries and the products M_b = P_{b+1} ... P_{a-1} for every b < a (slot b of m / dm).
  struct Slot {
    Chunk ch;
    DeviceBuffer<bf16> q, k, v, o_own, kfold, y, o, dout;
    DeviceBuffer<float> w, beta, fq, fk, lse_own, qfold, dqfold, m, dm, lse, dkf;
    DeviceBuffer<float> dq, dk, dv, dw, dbeta, dfq, dfk;  // outputs gathered when B > 1
    path::Args args;
  };
  std::vector<Slot> slots;
  DeviceBuffer<bf16> kfold;                        // [B, Lr, Hkv, D] the ring's key lanes
  DeviceBuffer<float> p_all, dp_all, ident;        // [chunks][PP]; ident [PP]
  DeviceBuffer<float> dkfold, dv_x, dfq_x, dfk_x;  // the ring's gradient outputs
  DeviceBuffer<float> lse_keys, delta;             // PaTH-FoX: the forward's lse, the rows' deltas
  std::shared_ptr<DeviceBuffer<unsigned char>> ws;
  const void* last[5] = {};  // the inputs of the last forward (q, k, v, w, beta)

  State(NcclCommunicator& c, const SeqLayout& l) : comm(&c), layout(l) {}

  float* m_of(Slot& s, int b) { return s.m.data() + int64_t(b) * PP; }
  float* dm_of(Slot& s, int b) { return s.dm.data() + int64_t(b) * PP; }
  float* p_of(int c) { return p_all.data() + int64_t(c) * PP; }
  float* dp_of(int c) { return dp_all.data() + int64_t(c) * PP; }

  const bf16* query(int i, int b, cudaStream_t s) override {
    Slot& sl = slots[size_t(i)];
    path::carry(B, int(sl.ch.length), H, Hkv, D, m_of(sl, b), sl.qfold.data(), sl.y.data(), s);
    return sl.y.data();
  }
  void own_block(int i, float* o, float* lse, cudaStream_t s) override {
    Slot& sl = slots[size_t(i)];
    const int64_t rows = sl.ch.length;
    partials::to_f32(o, sl.o_own.data(), int64_t(B) * rows * H * D, s);
    LCR_CUDA_CHECK(cudaMemcpyAsync(lse, sl.lse_own.data(), size_t(B) * H * rows * sizeof(float),
                                   cudaMemcpyDeviceToDevice, s));
  }
  void query_grad(int i, int b, const float* dq, cudaStream_t s) override {
    Slot& sl = slots[size_t(i)];
    path::carry_backward(B, int(sl.ch.length), H, Hkv, D, m_of(sl, b), sl.qfold.data(), dq,
                         sl.dqfold.data(), dm_of(sl, b), s);
  }

  void check(const PathRingArgs& a) const {
    require(a.B == B && a.H == H && a.Hkv == Hkv && a.D == D, "GPU PaTH ring: arguments (B=", a.B,
            " H=", a.H, " Hkv=", a.Hkv, " D=", a.D, ") differ from the ring's (B=", B, " H=", H,
            " Hkv=", Hkv, " D=", D, "); make a PathRing for this shape");
    require(a.q && a.k && a.v && a.w && a.beta,
            "GPU PaTH ring: q, k, v, w and beta must all be device pointers");
    require((a.fox_q != nullptr) == fox && (a.fox_k != nullptr) == fox,
            "GPU PaTH ring: the ring was made for ", fox ? "PaTH-FoX" : "PaTH",
            "; pass both FoX gates exactly for PaTH-FoX");
  }

  // The chunk-local PaTH arguments of every slot (rows gathered when needed).
  void gather(const PathRingArgs& a, cudaStream_t s) {
    for (Slot& sl : slots) {
      path::Args& p = sl.args;
      p = path::Args{};
      p.B = B, p.L = int(sl.ch.length), p.H = H, p.Hkv = Hkv, p.D = D;
      p.q = chunk_rows(a.q, int64_t(H) * D, sl.ch, one_chunk, B, Lr, sl.q, s);
      p.k = chunk_rows(a.k, int64_t(Hkv) * D, sl.ch, one_chunk, B, Lr, sl.k, s);
      p.v = chunk_rows(a.v, int64_t(Hkv) * D, sl.ch, one_chunk, B, Lr, sl.v, s);
      p.w = chunk_rows(a.w, int64_t(Hkv) * D, sl.ch, one_chunk, B, Lr, sl.w, s);
      p.beta = chunk_rows(a.beta, int64_t(Hkv), sl.ch, one_chunk, B, Lr, sl.beta, s);
      if (fox) {
        p.fox_q = chunk_rows(a.fox_q, int64_t(H), sl.ch, one_chunk, B, Lr, sl.fq, s);
        p.fox_k = chunk_rows(a.fox_k, int64_t(H), sl.ch, one_chunk, B, Lr, sl.fk, s);
      }
      p.scale = a.scale, p.softcap = a.softcap;
    }
  }

  RingSdpaArgs ring_args(const PathRingArgs& a) const {
    RingSdpaArgs r;
    r.B = B, r.H = H, r.Hkv = Hkv, r.D = D, r.Dv = D;
    r.k = kfold.data();
    r.v = a.v;
    r.scale = a.scale > 0.f ? a.scale : float(1.0 / std::sqrt(double(D)));
    r.softcap = a.softcap;
    r.bias_q = a.fox_q;
    r.bias_k = a.fox_k;
    return r;
  }

  void workspace(bool backward) {
    size_t need = 0;
    for (const Slot& sl : slots)
      need = std::max(need, backward ? path::backward_workspace_bytes(sl.args, true)
                                     : path::forward_workspace_bytes(sl.args, true));
    if (ws->size() < need) {
      *ws = DeviceBuffer<unsigned char>();  // free first: the old and new may not both fit
      *ws = DeviceBuffer<unsigned char>(need);
    }
  }

  void allreduce(float* buf, int64_t n, cudaStream_t s) {
    if (N == 1) return;
    comm->after(s);
    comm->allreduce_sum_async(buf, size_t(n), DType::F32);
    comm->join(s);
  }
};

int path_ring_split(const SeqLayout& layout, int D) {
  int64_t shortest = layout.length();
  for (const Chunk& c : layout.chunks()) shortest = std::min(shortest, c.length);
  const int64_t piece = D <= 64 ? 8192 : 16384;
  return int(std::max<int64_t>(1, shortest / piece));
}

PathRing::PathRing(NcclCommunicator& comm, const SeqLayout& layout, int B, int H, int Hkv, int D,
                   bool fox, std::shared_ptr<DeviceBuffer<unsigned char>> workspace)
    : st_(std::make_unique<State>(comm, layout)) {
  State& s = *st_;
  s.ws = workspace ? std::move(workspace) : std::make_shared<DeviceBuffer<unsigned char>>();
  require(layout.ranks() == comm.size(), "GPU PaTH ring: the sequence layout is for ",
          layout.ranks(), " ranks but the communicator has ", comm.size());
  require(B > 0 && H > 0 && Hkv > 0 && H % Hkv == 0 && (D == 64 || D == 128),
          "GPU PaTH ring: needs B, H, Hkv > 0 with H a multiple of Hkv and D = 64 or 128 (the "
          "CUDA PaTH kernels' head widths); got B=",
          B, " H=", H, " Hkv=", Hkv, " D=", D);
  LCR_CUDA_CHECK(cudaSetDevice(comm.device()));
  s.B = B, s.H = H, s.Hkv = Hkv, s.D = D, s.fox = fox;
  s.N = comm.size();
  s.me = comm.rank();
  s.Lr = layout.local_length(s.me);
  s.PP = int64_t(B) * Hkv * D * D;
  s.one_chunk = layout.chunks_of(s.me).size() == 1;
  s.ring = std::make_unique<RingSdpa>(comm, layout, B, H, Hkv, D, D, fox, false);
  for (int c : layout.chunks_of(s.me)) {
    State::Slot sl;
    sl.ch = layout.chunk(c);
    const size_t rows = size_t(B) * size_t(sl.ch.length);
    sl.o_own = DeviceBuffer<bf16>(rows * H * D);
    sl.lse_own = DeviceBuffer<float>(rows * H);
    sl.qfold = DeviceBuffer<float>(rows * H * D);
    sl.dqfold = DeviceBuffer<float>(rows * H * D);
    sl.kfold = DeviceBuffer<bf16>(rows * Hkv * D);
    sl.y = DeviceBuffer<bf16>(rows * H * D);
    sl.m = DeviceBuffer<float>(size_t(c) * size_t(s.PP));
    sl.dm = DeviceBuffer<float>(size_t(c) * size_t(s.PP));
    s.slots.push_back(std::move(sl));
  }
  const size_t nk = size_t(B) * size_t(s.Lr) * Hkv * D, nf = size_t(B) * size_t(s.Lr) * H;
  s.kfold = DeviceBuffer<bf16>(nk);
  s.dkfold = DeviceBuffer<float>(nk);
  s.dv_x = DeviceBuffer<float>(nk);
  if (fox) {
    s.dfq_x = DeviceBuffer<float>(nf), s.dfk_x = DeviceBuffer<float>(nf);
    s.lse_keys = DeviceBuffer<float>(nf), s.delta = DeviceBuffer<float>(nf);
  }
  s.p_all = DeviceBuffer<float>(size_t(layout.num_chunks()) * size_t(s.PP));
  s.dp_all = DeviceBuffer<float>(size_t(layout.num_chunks()) * size_t(s.PP));
  std::vector<float> id(size_t(s.PP), 0.f);
  for (int64_t m = 0; m < int64_t(B) * Hkv; ++m)
    for (int i = 0; i < D; ++i) id[size_t(m * D * D + i * D + i)] = 1.f;
  s.ident = DeviceBuffer<float>(id);
}

PathRing::~PathRing() = default;

RingStats PathRing::forward(const PathRingArgs& a, bf16* o, float* lse, cudaStream_t stream) {
  const auto t0 = Clock::now();
  State& S = *st_;
  S.check(a);
  require(o && lse, "GPU PaTH ring forward: o and lse must be device pointers");
  LCR_CUDA_CHECK(cudaSetDevice(S.comm->device()));
  S.gather(a, stream);
  S.workspace(false);
  const size_t pbytes = S.p_all.size() * sizeof(float);
  LCR_CUDA_CHECK(cudaMemsetAsync(S.p_all.data(), 0, pbytes, stream));
  // Own blocks and folds; every rank's P_c lands in slot c of p_all.
  for (State::Slot& sl : S.slots) {
    path::Folds f;
    f.q = sl.qfold.data();
    f.k = sl.kfold.data();
    f.p = S.p_of(sl.ch.index);
    path::forward(sl.args, sl.o_own.data(), sl.lse_own.data(), S.ws->data(), S.ws->size(), stream,
                  &f);
    partials::copy_rows(sl.kfold.data(), sl.ch.length, 0, S.kfold.data(), S.Lr, sl.ch.local_offset,
                        S.B, sl.ch.length, int64_t(S.Hkv) * S.D * int64_t(sizeof(bf16)), stream);
  }
  S.allreduce(S.p_all.data(), int64_t(S.p_all.size()), stream);
  // M_b = P_{b+1} M_{b+1} from M_{a-1} = I down to M_0.
  for (State::Slot& sl : S.slots) {
    const int a_idx = sl.ch.index, batch = S.B * S.Hkv;
    if (a_idx == 0) continue;
    LCR_CUDA_CHECK(cudaMemcpyAsync(S.m_of(sl, a_idx - 1), S.ident.data(), S.PP * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
    for (int b = a_idx - 2; b >= 0; --b)
      path::mat_products(batch, S.D, S.p_of(b + 1), false, S.m_of(sl, b + 1), false, S.m_of(sl, b),
                         false, stream);
  }
  const RingSdpaArgs ra = S.ring_args(a);
  RingStats st = S.ring->forward(ra, o, lse, stream, &S);
  if (S.fox)
    LCR_CUDA_CHECK(cudaMemcpyAsync(S.lse_keys.data(), lse, S.lse_keys.bytes(),
                                   cudaMemcpyDeviceToDevice, stream));
  S.last[0] = a.q, S.last[1] = a.k, S.last[2] = a.v, S.last[3] = a.w, S.last[4] = a.beta;
  st.total_s = seconds_since(t0);
  return st;
}

RingStats PathRing::backward(const PathRingArgs& a, const bf16* o, const float* lse,
                             const bf16* dout, const PathRingGrads& g, cudaStream_t stream) {
  const auto t0 = Clock::now();
  State& S = *st_;
  S.check(a);
  require(o && lse && dout, "GPU PaTH ring backward: o, lse and dout must be device pointers");
  require(g.dq && g.dk && g.dv && g.dw && g.dbeta && (!S.fox || (g.dfox_q && g.dfox_k)),
          "GPU PaTH ring backward: dq, dk, dv, dw, dbeta are required, and dfox_q / dfox_k for "
          "PaTH-FoX");
  const void* now[5] = {a.q, a.k, a.v, a.w, a.beta};
  for (int i = 0; i < 5; ++i)
    require(S.last[i] == now[i],
            "GPU PaTH ring backward: its inputs differ from the last forward's; call forward() "
            "on these inputs first (the backward uses its folds)");
  LCR_CUDA_CHECK(cudaSetDevice(S.comm->device()));
  const int B = S.B, H = S.H, Hkv = S.Hkv, D = S.D, batch = B * Hkv;
  for (State::Slot& sl : S.slots) {
    LCR_CUDA_CHECK(cudaMemsetAsync(sl.dqfold.data(), 0, sl.dqfold.bytes(), stream));
    if (sl.dm.size()) LCR_CUDA_CHECK(cudaMemsetAsync(sl.dm.data(), 0, sl.dm.bytes(), stream));
  }
  // Cross pairs on the ring: dk~, dv, dc_j travel home; dq~, dM through the hook.
  // PaTH-FoX without softcap: the query lane's gradient over all keys has a closed form
  // (partials::query_bias_total), so the pairs do not sum it and take the SDPA's fast
  // bias-lane kernels; with softcap they sum it.
  const bool fox_total = S.fox && a.softcap == 0.f;
  RingSdpaGrads rg;
  rg.dk = S.dkfold.data();
  rg.dv = S.dv_x.data();
  rg.dbias_q = S.fox && !fox_total ? S.dfq_x.data() : nullptr;
  rg.dbias_k = S.fox ? S.dfk_x.data() : nullptr;
  RingStats st = S.ring->backward(S.ring_args(a), o, lse, dout, rg, stream, &S);

  // dP: reverse of M_b = P_{b+1} M_{b+1}, b ascending; summed over ranks.
  LCR_CUDA_CHECK(cudaMemsetAsync(S.dp_all.data(), 0, S.dp_all.bytes(), stream));
  for (State::Slot& sl : S.slots)
    for (int b = 0; b + 2 <= sl.ch.index; ++b) {
      path::mat_products(batch, D, S.dm_of(sl, b), false, S.m_of(sl, b + 1), true, S.dp_of(b + 1),
                         true, stream);
      path::mat_products(batch, D, S.p_of(b + 1), true, S.dm_of(sl, b), false, S.dm_of(sl, b + 1),
                         true, stream);
    }
  S.allreduce(S.dp_all.data(), int64_t(S.dp_all.size()), stream);

  // The chunk-local PaTH backward with the folds' gradients, per chunk.
  S.workspace(true);
  const bool direct = S.one_chunk || B == 1;  // outputs written in place
  for (State::Slot& sl : S.slots) {
    const Chunk& ch = sl.ch;
    const int64_t rows = ch.length, off = S.one_chunk ? 0 : ch.local_offset;
    const bf16* o_c = chunk_rows(o, int64_t(H) * D, ch, S.one_chunk, B, S.Lr, sl.o, stream);
    const bf16* dout_c =
        chunk_rows(dout, int64_t(H) * D, ch, S.one_chunk, B, S.Lr, sl.dout, stream);
    const float* lse_c =
        S.one_chunk ? lse : chunk_rows(lse, 1, ch, false, B * H, S.Lr, sl.lse, stream);
    path::FoldGrads fg;
    fg.dq = sl.dqfold.data();
    fg.dk = chunk_rows(static_cast<const float*>(S.dkfold.data()), int64_t(Hkv) * D, ch,
                       S.one_chunk, B, S.Lr, sl.dkf, stream);
    fg.dp = S.dp_of(ch.index);
    auto out = [&](float* full, int64_t W, DeviceBuffer<float>& tmp) -> float* {
      if (direct) return full + off * W;
      if (tmp.size() < size_t(B) * rows * W) tmp = DeviceBuffer<float>(size_t(B) * rows * W);
      return tmp.data();
    };
    path::Grads pg;
    pg.dq = out(g.dq, int64_t(H) * D, sl.dq);
    pg.dk = out(g.dk, int64_t(Hkv) * D, sl.dk);
    pg.dv = out(g.dv, int64_t(Hkv) * D, sl.dv);
    pg.dw = out(g.dw, int64_t(Hkv) * D, sl.dw);
    pg.dbeta = out(g.dbeta, Hkv, sl.dbeta);
    if (S.fox) {
      pg.dfox_q = out(g.dfox_q, H, sl.dfq);
      pg.dfox_k = out(g.dfox_k, H, sl.dfk);
    }
    path::Args pa = sl.args;
    path::backward(pa, o_c, lse_c, dout_c, pg, S.ws->data(), S.ws->size(), stream, &fg);
    if (!direct) {
      auto put = [&](const float* src, int64_t W, float* dst) {
        partials::copy_rows(src, rows, 0, dst, S.Lr, ch.local_offset, B, rows,
                            W * int64_t(sizeof(float)), stream);
      };
      put(pg.dq, int64_t(H) * D, g.dq);
      put(pg.dk, int64_t(Hkv) * D, g.dk);
      put(pg.dv, int64_t(Hkv) * D, g.dv);
      put(pg.dw, int64_t(Hkv) * D, g.dw);
      put(pg.dbeta, Hkv, g.dbeta);
      if (S.fox) {
        put(pg.dfox_q, H, g.dfox_q);
        put(pg.dfox_k, H, g.dfox_k);
      }
    }
  }
  // The cross pairs' shares of dv and the FoX lanes.
  const int64_t nk = int64_t(B) * S.Lr * Hkv * D, nf = int64_t(B) * S.Lr * H;
  partials::add_inplace(g.dv, S.dv_x.data(), nk, stream);
  if (S.fox) partials::add_inplace(g.dfox_k, S.dfk_x.data(), nf, stream);
  if (fox_total) {  // replaces the chunk-local parts the PaTH backward wrote
    sdpa_row_delta(B, int(S.Lr), H, D, o, dout, S.delta.data(), stream);
    partials::query_bias_total(S.delta.data(), S.lse_keys.data(), lse, B, H, S.Lr, g.dfox_q,
                               stream);
  } else if (S.fox) {
    partials::add_inplace(g.dfox_q, S.dfq_x.data(), nf, stream);
  }
  LCR_CUDA_CHECK(cudaStreamSynchronize(stream));
  st.total_s = seconds_since(t0);
  return st;
}

}  // namespace lcr::cuda
