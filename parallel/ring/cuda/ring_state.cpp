// The GPU ring's set-up and shared helpers (ring_state.hpp).
#include "parallel/ring/cuda/ring_state.hpp"

#include <utility>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda {
namespace {

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

float ms_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0.f;
  LCR_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

}  // namespace

Packing make_packing(const SeqLayout& layout, int B, const std::vector<int64_t>& row_bytes) {
  Packing p;
  p.row_bytes = row_bytes;
  for (int r = 0; r < layout.ranks(); ++r) {
    std::vector<Packing::Slot> slots;
    int64_t off = 0;
    for (int c : layout.chunks_of(r)) {
      Packing::Slot s;
      s.chunk = c;
      s.rows = layout.chunk(c).length;
      for (int64_t rb : row_bytes) {
        s.off.push_back(off);
        off += round_up(int64_t(B) * s.rows * rb, 256);
      }
      slots.push_back(std::move(s));
    }
    p.slots.push_back(std::move(slots));
    p.bytes.push_back(off);
    p.capacity = std::max(p.capacity, off);
  }
  return p;
}

template <class T>
T* chunk_rows(T* x, int64_t W, const Chunk& ch, bool one_chunk, int B, int64_t Lr,
              DeviceBuffer<std::remove_const_t<T>>& tmp, cudaStream_t s) {
  if (one_chunk) return x;
  if (B == 1) return x + ch.local_offset * W;
  const size_t n = size_t(B) * size_t(ch.length) * size_t(W);
  if (tmp.size() < n) tmp = DeviceBuffer<std::remove_const_t<T>>(n);
  partials::copy_rows(x, Lr, ch.local_offset, tmp.data(), ch.length, 0, B, ch.length,
                      W * int64_t(sizeof(T)), s);
  return tmp.data();
}
template const __nv_bfloat16* chunk_rows(const __nv_bfloat16*, int64_t, const Chunk&, bool, int,
                                         int64_t, DeviceBuffer<__nv_bfloat16>&, cudaStream_t);
template const float* chunk_rows(const float*, int64_t, const Chunk&, bool, int, int64_t,
                                 DeviceBuffer<float>&, cudaStream_t);

RingSdpa::RingSdpa(NcclCommunicator& comm, const SeqLayout& layout, int B, int H, int Hkv, int D,
                   int Dv, bool bias, bool sink)
    : st_(std::make_unique<State>(comm, layout)) {
  State& s = *st_;
  require(layout.ranks() == comm.size(), "GPU ring: the sequence layout is for ", layout.ranks(),
          " ranks but the communicator has ", comm.size());
  s.B = B, s.H = H, s.Hkv = Hkv, s.D = D, s.Dv = Dv, s.bias = bias, s.sink = sink;
  s.N = comm.size();
  s.me = comm.rank();
  s.Lr = layout.local_length(s.me);
  // Dimension checks of the SDPA kernel, on a stand-in with aligned non-null pointers.
  SdpaArgs probe;
  probe.B = B, probe.Lq = probe.Lk = 1, probe.H = H, probe.Hkv = Hkv, probe.D = D, probe.Dv = Dv;
  probe.q = probe.k = probe.v = reinterpret_cast<const __nv_bfloat16*>(uintptr_t(256));
  check(probe);

  const int64_t bf = sizeof(__nv_bfloat16), f4 = sizeof(float);
  std::vector<int64_t> kv_rows{int64_t(Hkv) * D * bf, int64_t(Hkv) * Dv * bf};
  std::vector<int64_t> g_rows{int64_t(Hkv) * D * f4, int64_t(Hkv) * Dv * f4};
  if (bias) {
    kv_rows.push_back(int64_t(H) * f4);
    g_rows.push_back(int64_t(H) * f4);
  }
  s.kv = make_packing(layout, B, kv_rows);
  s.grad = make_packing(layout, B, g_rows);
  s.kv_cur = DeviceBuffer<uint8_t>(size_t(s.kv.capacity));
  if (s.N > 1) s.kv_nxt = DeviceBuffer<uint8_t>(size_t(s.kv.capacity));
  s.one_chunk = layout.chunks_of(s.me).size() == 1;
  for (int c : layout.chunks_of(s.me)) {
    State::QChunk q;
    q.ch = layout.chunk(c);
    const size_t rows = size_t(B) * size_t(q.ch.length) * size_t(H);
    q.o_acc = DeviceBuffer<float>(rows * size_t(Dv));
    q.lse_acc = DeviceBuffer<float>(rows);
    q.o_blk = DeviceBuffer<float>(rows * size_t(Dv));
    q.lse_blk = DeviceBuffer<float>(rows);
    s.qc.push_back(std::move(q));
  }
  s.ev.resize(size_t(s.N));
  for (auto& e : s.ev)
    for (auto& x : e) LCR_CUDA_CHECK(cudaEventCreate(&x));
  for (auto& x : s.ev_pass) LCR_CUDA_CHECK(cudaEventCreate(&x));
}

RingSdpa::~RingSdpa() {
  for (auto& e : st_->ev)
    for (auto& x : e) cudaEventDestroy(x);
  for (auto& x : st_->ev_pass)
    if (x) cudaEventDestroy(x);
}

void RingSdpa::State::check(const RingSdpaArgs& a, bool hook) const {
  require(a.B == B && a.H == H && a.Hkv == Hkv && a.D == D && a.Dv == Dv,
          "GPU ring: arguments (B=", a.B, " H=", a.H, " Hkv=", a.Hkv, " D=", a.D, " Dv=", a.Dv,
          ") differ from the ring's (B=", B, " H=", H, " Hkv=", Hkv, " D=", D, " Dv=", Dv,
          "); make a RingSdpa for this shape");
  require((a.q || hook) && a.k && a.v, "GPU ring: q, k and v must be device pointers, one is null");
  require((a.bias_q != nullptr) == bias && (a.bias_k != nullptr) == bias,
          "GPU ring: the ring was made ", bias ? "with" : "without",
          " bias lanes; pass both bias_q and bias_k or neither, as at construction");
  require((a.sink != nullptr) == sink, "GPU ring: the ring was made ", sink ? "with" : "without",
          " a sink; pass sink logits [H] iff it was");
}

SdpaArgs RingSdpa::State::pair_args(const RingSdpaArgs& a, const QChunk& q, const __nv_bfloat16* qp,
                                    const float* bq, const Packing::Slot& b,
                                    const uint8_t* msg) const {
  SdpaArgs s;
  s.B = B, s.H = H, s.Hkv = Hkv, s.D = D, s.Dv = Dv;
  s.Lq = int(q.ch.length);
  s.Lk = int(b.rows);
  s.q = qp;
  s.k = reinterpret_cast<const __nv_bfloat16*>(msg + b.off[0]);
  s.v = reinterpret_cast<const __nv_bfloat16*>(msg + b.off[1]);
  s.q_pos0 = a.pos0 + q.ch.start;
  s.k_pos0 = a.pos0 + layout.chunk(b.chunk).start;
  s.scale = a.scale;
  s.softcap = a.softcap;
  s.alibi_slopes = a.alibi_slopes;
  s.bias_q = bq;
  s.bias_k = bias ? reinterpret_cast<const float*>(msg + b.off[2]) : nullptr;
  return s;
}

void RingSdpa::State::pack_own(const RingSdpaArgs& a, cudaStream_t s) {
  const auto& slots = kv.slots[size_t(me)];
  for (size_t i = 0; i < slots.size(); ++i) {
    const Chunk& ch = layout.chunk(slots[i].chunk);
    const void* src[3] = {a.k, a.v, a.bias_k};
    for (size_t f = 0; f < kv.row_bytes.size(); ++f)
      partials::copy_rows(src[f], Lr, ch.local_offset, kv_cur.data() + slots[i].off[f], ch.length,
                          0, B, ch.length, kv.row_bytes[f], s);
  }
}

RingStats RingSdpa::State::collect(const char* pass, std::vector<RingStepStats> steps,
                                   Clock::time_point t0) const {
  LCR_CUDA_CHECK(cudaEventSynchronize(ev_pass[3]));
  RingStats st;
  st.pass = pass;
  for (int s = 0; s < N; ++s) {
    const auto& e = ev[size_t(s)];
    RingStepStats& ss = steps[size_t(s)];
    ss.compute_s = 1e-3 * (ms_between(e[0], e[1]) + ms_between(e[2], e[3]));
    ss.wait_s = 1e-3 * ms_between(e[1], e[2]);
    // Idle between this step's end and the next one's start: the K/V hop not hidden.
    const cudaEvent_t next = s + 1 < N ? ev[size_t(s) + 1][0] : ev_pass[1];
    ss.wait_s +=
        1e-3 * (ms_between(e[3], next) + (s + 1 < N ? 0.f : ms_between(ev_pass[1], ev_pass[2])));
  }
  st.steps = std::move(steps);
  st.prepare_s = 1e-3 * (ms_between(ev_pass[0], ev[0][0]) + ms_between(ev_pass[2], ev_pass[3]));
  st.total_s = seconds_since(t0);
  return st;
}

}  // namespace lcr::cuda
