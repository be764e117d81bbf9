// Host orchestration of the CUDA attention API (attention_cuda.hpp): argument checks,
// position tables (angles from the CPU scheme units' own frequency functions, so both
// backends use the same numbers), lane launches, SDPA calls, sink, parameter reductions.
#include "kernels/attention/cuda/api/attention_cuda.hpp"

#include <cmath>
#include <sstream>

#include "kernels/attention/cuda/api/workspace.hpp"
#include "kernels/attention/params.hpp"
#include "kernels/base/error.hpp"
#include "kernels/schemes/goat/goat.hpp"
#include "kernels/schemes/pope/pope.hpp"
#include "kernels/schemes/rope/rope.hpp"

namespace lcr::cuda {
namespace {

using lanes::LaneKind;

int pad8(int x) { return (x + 7) / 8 * 8; }

LaneKind lane_kind(const AttentionSpec& s) {
  switch (s.scheme) {
    case Scheme::RoPE:
      return LaneKind::Rope;
    case Scheme::GOAT:
    case Scheme::GOAT2D:
      return LaneKind::Goat;
    case Scheme::PoPE:
      return LaneKind::Pope;
    default:
      return LaneKind::Copy;
  }
}

// q' = q, k' = k exactly: no lane pass, the SDPA reads the caller's tensors.
bool lanes_are_inputs(const AttentionSpec& s) {
  return lane_kind(s) == LaneKind::Copy && !s.numerics.qk_norm && s.head_dim % 8 == 0;
}

double sdpa_scale(const AttentionSpec& s) {
  switch (s.scheme) {
    case Scheme::RoPE:
      return rope::sdpa_scale(s);
    case Scheme::GOAT:
    case Scheme::GOAT2D:
      return goat::sdpa_scale(s);
    case Scheme::PoPE:
      return pope::sdpa_scale(s);
    default:
      return 1.0 / std::sqrt(double(s.head_dim));
  }
}

// Offset of a parameter slice in the one buffer (the CPU layout).
float* slice(float* base, const ParamLayout& l, const char* name) {
  return base + l.at(name).offset;
}
const float* slice(const float* base, const ParamLayout& l, const char* name) {
  return base + l.at(name).offset;
}

lanes::TrigSpec trig_spec(const AttentionSpec& s) {
  lanes::TrigSpec t;
  // check_inputs bounds the widths: RoPE r/2 <= 128, PoPE d <= 128, GOAT R < 128.
  switch (lane_kind(s)) {
    case LaneKind::Rope: {
      const auto f = rope::frequencies(s);
      t.M = int(f.size());
      for (int m = 0; m < t.M; ++m) t.freq[m] = f[m];
      break;
    }
    case LaneKind::Goat:
      t.M = s.goat.modes;
      t.grid_w = std::max(s.goat.grid_width, 1);
      for (int r = 0; r < t.M; ++r) {
        t.freq[r] = goat::mode_frequency(s, r);
        t.axis[r] = int(goat::mode_axis(s, r));
      }
      break;
    case LaneKind::Pope: {
      const auto f = pope::frequencies(s);
      t.M = int(f.size());
      for (int c = 0; c < t.M; ++c) t.freq[c] = f[c];
      break;
    }
    default:
      break;
  }
  require(t.M <= lanes::kMaxTable, "cuda attention: ", t.M, " position frequencies exceed the ",
          lanes::kMaxTable, " the lane kernels hold");
  return t;
}

// The position table of one side, computed once per (frequencies, span) and cached.
const float2* position_table(Workspace::Impl& w, const lanes::TrigSpec& ts, bool query,
                             int64_t pos0, int L, cudaStream_t s) {
  if (ts.M == 0) return nullptr;
  // Self-attention: the keys span the queries' positions; share the query table.
  if (!query && w.trig_q.matches(ts, pos0, L, w.generation(Slot::TrigQ)))
    return w.get<float2>(Slot::TrigQ, int64_t(L) * ts.M);
  const Slot slot = query ? Slot::TrigQ : Slot::TrigK;
  auto& key = query ? w.trig_q : w.trig_k;
  float2* tab = w.get<float2>(slot, int64_t(L) * ts.M);
  if (!key.matches(ts, pos0, L, w.generation(slot))) {
    lanes::trig_table(ts, pos0, L, tab, s);
    key.valid = true;
    key.spec = ts;
    key.pos0 = pos0;
    key.L = L;
    key.generation = w.generation(slot);
  }
  return tab;
}

// GOAT's key-bias arguments with the feature table phi [Lk, 2F+2] (cached per key span).
lanes::GoatKeyArgs goat_key_args(const AttentionSpec& s, const ParamLayout& l, const float* p,
                                 int Lk, int64_t k_pos0, Workspace::Impl& w, cudaStream_t st) {
  lanes::GoatKeyArgs a;
  a.L = Lk;
  a.Hkv = s.kv_heads;
  a.N = s.goat.mlp_hidden;
  a.F = s.goat.feature_freqs;
  a.pos0 = k_pos0;
  for (int m = 0; m < a.F; ++m) a.feature_freq[m] = goat::feature_frequency(s, m);
  a.inv_train_len = 1.0 / double(s.goat.train_len);
  a.inv_log_train = 1.0 / std::log1p(double(s.goat.train_len));
  a.lambda = slice(p, l, "goat.lambda");
  a.bump = slice(p, l, "goat.bump");
  a.w1 = slice(p, l, "goat.mlp_w1");
  a.b1 = slice(p, l, "goat.mlp_b1");
  a.w2 = slice(p, l, "goat.mlp_w2");
  const int NF = 2 * a.F + 2;
  double* phi = w.get<double>(Slot::Phi, int64_t(Lk) * NF);
  std::ostringstream key;
  key << k_pos0 << ' ' << Lk << ' ' << a.F << ' ' << s.goat.base << ' ' << s.goat.train_len << ' '
      << w.generation(Slot::Phi);
  if (w.phi_key != key.str()) {
    a.phi = phi;
    lanes::goat_features(a, phi, st);
    w.phi_key = key.str();
  }
  a.phi = phi;
  return a;
}

// The lane arguments of one side. `backward`: the key bias u is not needed (only du).
lanes::RowLaneArgs side_args(const AttentionSpec& s, const ParamLayout& l, const DeviceParams& prm,
                             const AttentionInputs& in, bool query, bool backward,
                             Workspace::Impl& w, cudaStream_t st) {
  lanes::RowLaneArgs a;
  a.kind = lane_kind(s);
  a.is_query = query;
  a.B = in.B;
  a.L = query ? in.Lq : in.Lk;
  a.Hx = query ? s.heads : s.kv_heads;
  a.d = input_qk_dim(s);
  a.dp = padded_lane_width(s);
  a.pos0 = query ? in.q_pos0 : in.k_pos0;
  a.x = query ? in.q : in.k;
  if (s.numerics.qk_norm) {
    a.gain = slice(prm.data, l, query ? "qk_norm.q_gain" : "qk_norm.k_gain");
    a.eps = float(s.numerics.qk_norm_eps);
  }
  const lanes::TrigSpec ts = trig_spec(s);
  a.M = ts.M;
  a.trig = position_table(w, ts, query, a.pos0, a.L, st);
  switch (a.kind) {
    case LaneKind::Rope:
      a.scale = float(rope::attention_factor(s));
      a.pass_scale = float(rope::pass_through_factor(s));
      a.rotary = rope::rotary_dim(s);
      a.interleaved = s.rope.pairing == RopePairing::Interleaved;
      break;
    case LaneKind::Goat: {
      const double dh = s.head_dim, dc = goat::content_dim(s);
      a.R = s.goat.modes;
      a.scale = query ? float(std::sqrt(dh / dc)) : 1.f;
      a.lane_scale = float(std::sqrt(dh));
      a.u_scale = std::sqrt(dh);
      if (query) {
        a.alpha = slice(prm.data, l, "goat.alpha");
        a.beta = slice(prm.data, l, "goat.beta");
      } else if (!backward) {
        double* u = w.get<double>(Slot::U, int64_t(in.Lk) * s.kv_heads);
        lanes::goat_key_bias(goat_key_args(s, l, prm.data, in.Lk, in.k_pos0, w, st), u, st);
        a.u = u;
      }
      if (!backward)  // one buffer per side: the two sides may run on two streams
        a.prior =
            w.get<bf16>(query ? Slot::PriorQ : Slot::PriorK, int64_t(a.L) * a.Hx * (2 * a.R + 2));
      break;
    }
    case LaneKind::Pope:
      if (!query) {
        const int n = s.kv_heads * s.head_dim;
        a.delta = slice(prm.data, l, "pope.delta");
        float2* dt = w.get<float2>(Slot::DeltaTrig, n);
        lanes::pope_delta_trig(a.delta, n, dt, st);
        a.delta_trig = dt;
      }
      break;
    default:
      break;
  }
  return a;
}

// GOAT's query gate from the queries' lane arguments (their table, lane parameters, norm).
lanes::GoatGateArgs gate_args(const ParamLayout& l, const DeviceParams& prm,
                              const lanes::RowLaneArgs& qa) {
  lanes::GoatGateArgs g;
  g.B = qa.B;
  g.L = qa.L;
  g.H = qa.Hx;
  g.d = qa.d;
  g.dp = qa.dp;
  g.R = qa.R;
  g.M = qa.M;
  g.x = qa.x;
  g.gain = qa.gain;
  g.eps = qa.eps;
  g.content_scale = qa.scale;
  g.lane_scale = qa.lane_scale;
  g.alpha = qa.alpha;
  g.beta = qa.beta;
  g.trig = qa.trig;
  g.gate_scale = slice(prm.data, l, "goat.gate_scale");
  g.gate_bias = slice(prm.data, l, "goat.gate_bias");
  return g;
}

// Identifies a forward call (spec, tensors, positions, parameters, lane buffers).
std::string call_key(const AttentionSpec& s, const DeviceParams& p, const AttentionInputs& in,
                     const Workspace::Impl& w) {
  std::ostringstream o;
  const auto& r = s.rope;
  const auto& g = s.goat;
  const auto& n = s.numerics;
  o << int(s.scheme) << ' ' << s.heads << ' ' << s.kv_heads << ' ' << s.head_dim << ' '
    << s.value_dim << ' ' << int(r.pairing) << ' ' << r.rotary_dim << ' ' << r.base << ' '
    << r.yarn_factor << ' ' << r.yarn_original_len << ' ' << r.yarn_beta_fast << ' '
    << r.yarn_beta_slow << ' ' << int(r.yarn_convention) << ' ' << g.modes << ' ' << g.base << ' '
    << g.mlp_hidden << ' ' << g.feature_freqs << ' ' << g.train_len << ' ' << g.grid_width << ' '
    << g.y_modes << ' ' << int(g.recipe) << ' ' << g.query_gate << ' ' << s.pope.base << ' '
    << int(s.alibi.slopes) << ' ' << n.qk_norm << ' ' << n.qk_norm_eps << ' ' << n.softcap << ' '
    << n.has_sink() << ' ' << p.data << ' ' << p.size << ' ' << in.B << ' ' << in.Lq << ' ' << in.Lk
    << ' ' << in.q << ' ' << in.k << ' ' << in.v << ' ' << in.q_pos0 << ' ' << in.k_pos0 << ' '
    << in.fox_cq << ' ' << in.fox_ck << ' ' << w.generation(Slot::Q2) << ' '
    << w.generation(Slot::K2) << ' ' << w.generation(Slot::Alibi);
  return o.str();
}

}  // namespace

Workspace::Workspace() : impl_(std::make_unique<Impl>()) {}
Workspace::~Workspace() { impl_->release(); }
void Workspace::forget() { impl_->forget(); }
int64_t Workspace::bytes() const {
  int64_t n = 0;
  for (const auto& b : impl_->buffers) n += int64_t(b.bytes);
  return n;
}

int lane_width(const AttentionSpec& s) {
  return s.scheme == Scheme::PoPE ? pope::lanes_width(s) : s.head_dim;
}
int padded_lane_width(const AttentionSpec& s) { return pad8(lane_width(s)); }

void check_inputs(const AttentionSpec& s, const AttentionInputs& in, const DeviceParams& p) {
  require(!is_path(s.scheme),
          "cuda::attention_forward/backward cover the dot-product family; "
          "scheme '",
          scheme_name(s.scheme),
          "' runs on the PaTH CUDA kernel "
          "(kernels/attention/cuda/path/, namespace lcr::cuda::path)");
  validate(s);
  const int qd = input_qk_dim(s);
  require(in.B >= 1 && in.Lq >= 0 && in.Lk >= 0,
          "cuda attention: need B >= 1, Lq >= 0, Lk >= 0;"
          " got B=",
          in.B, " Lq=", in.Lq, " Lk=", in.Lk);
  require(in.q_pos0 >= 0 && in.k_pos0 >= 0, "cuda attention: positions must be >= 0 (q_pos0 ",
          in.q_pos0, ", k_pos0 ", in.k_pos0, ")");
  require(in.Lq == 0 || in.q, "cuda attention: q is null but Lq = ", in.Lq);
  require(in.Lk == 0 || (in.k && in.v), "cuda attention: k or v is null but Lk = ", in.Lk);
  require(qd <= lanes::kMaxRowWidth, "cuda attention: the q/k input width ", qd, " exceeds ",
          lanes::kMaxRowWidth, "; use head_dim <= ", lanes::kMaxRowWidth);
  require(padded_lane_width(s) <= 256, "cuda attention: scheme '", scheme_name(s.scheme),
          "' gives a QK width of ", padded_lane_width(s), " (padded), above the CUDA SDPA's 256",
          s.scheme == Scheme::PoPE ? "; PoPE's QK width is 2*head_dim: use head_dim <= 128" : "");
  require(s.v_dim() % 8 == 0, "cuda attention: value width ", s.v_dim(),
          " is not a multiple of 8; the CUDA SDPA needs dv % 8 == 0 (pad v with zero columns)");
  if (is_goat(s.scheme))
    require(s.goat.feature_freqs <= 16,
            "cuda attention: GOAT supports goat.feature_freqs <= 16,"
            " got ",
            s.goat.feature_freqs, "; lower it");
  const bool fox = uses_fox(s.scheme);
  require(!fox || ((in.fox_cq || in.Lq == 0) && (in.fox_ck || in.Lk == 0)),
          "cuda attention: scheme 'fox' needs fox_cq [B, Lq, H] and fox_ck [B, Lk, H] "
          "(cumulative log gates; fox_cumulative_log_gates computes them)");
  require(fox || (!in.fox_cq && !in.fox_ck),
          "cuda attention: FoX gates were given but the "
          "scheme is '",
          scheme_name(s.scheme), "'; use scheme 'fox' or drop the gates");
  const int64_t total = attention_param_layout(s).total();
  require(p.size == total && (total == 0 || p.data), "cuda attention: the parameter buffer has ",
          p.size, " floats", p.data || total == 0 ? "" : " (null)", "; scheme '",
          scheme_name(s.scheme), "' with these options needs ", total,
          " laid out by attention_param_layout(spec)");
}

namespace {

// The SDPA arguments of a call but q', k' and their width.
SdpaArgs sdpa_frame(const AttentionSpec& s, const AttentionInputs& in, Workspace::Impl& w,
                    cudaStream_t st) {
  SdpaArgs a;
  a.B = in.B;
  a.Lq = in.Lq;
  a.Lk = in.Lk;
  a.H = s.heads;
  a.Hkv = s.kv_heads;
  a.Dv = s.v_dim();
  a.v = in.v;
  a.q_pos0 = in.q_pos0;
  a.k_pos0 = in.k_pos0;
  a.scale = float(sdpa_scale(s));
  a.softcap = float(s.numerics.softcap);
  if (s.scheme == Scheme::ALiBi) {
    float* slopes = w.get<float>(Slot::Alibi, s.heads);
    lanes::alibi_slopes(s.heads, s.alibi.slopes, slopes, st);
    a.alibi_slopes = slopes;
  }
  if (uses_fox(s.scheme)) {
    a.bias_q = in.fox_cq;
    a.bias_k = in.fox_ck;
  }
  return a;
}

// The prepared call around the lanes already in Q2/K2 (or the inputs themselves).
PreparedAttention lanes_in_place(const AttentionSpec& s, const AttentionInputs& in,
                                 Workspace::Impl& w, cudaStream_t st) {
  PreparedAttention P;
  P.sdpa = sdpa_frame(s, in, w, st);
  P.lanes_are_inputs = lanes_are_inputs(s);
  SdpaArgs& a = P.sdpa;
  if (P.lanes_are_inputs) {
    a.D = s.head_dim;
    a.q = in.q;
    a.k = in.k;
  } else {
    a.D = padded_lane_width(s);
    a.q = w.get<bf16>(Slot::Q2, int64_t(in.B) * in.Lq * s.heads * a.D);
    a.k = w.get<bf16>(Slot::K2, int64_t(in.B) * in.Lk * s.kv_heads * a.D);
  }
  return P;
}

}  // namespace

namespace {

// GOAT recipe "authors": their parameters mapped onto the lane layout (goat_recipe.hpp), in
// the workspace; the lanes then run as for recipe "lcr" (the spec lane_spec returns).
DeviceParams goat_lane_params(const AttentionSpec& s, const DeviceParams& prm, Workspace::Impl& w,
                              cudaStream_t st) {
  const goat::RecipeMap m = goat::recipe_map(s);
  float* lane = w.get<float>(Slot::GoatLane, m.lane_total());
  lanes::goat_recipe_expand(m, prm.data, lane, st);
  return DeviceParams{lane, m.lane_total()};
}

bool authors_recipe(const AttentionSpec& s) {
  return is_goat(s.scheme) && s.goat.recipe == GoatRecipe::Authors;
}

}  // namespace

PreparedAttention prepare_attention(const AttentionSpec& s, const DeviceParams& prm,
                                    const AttentionInputs& in, Workspace& ws, cudaStream_t st) {
  check_inputs(s, in, prm);
  if (authors_recipe(s))
    return prepare_attention(goat::lane_spec(s), goat_lane_params(s, prm, ws.impl(), st), in, ws,
                             st);
  Workspace::Impl& w = ws.impl();
  w.saved_lanes_key.clear();  // Q2/K2 are about to change
  PreparedAttention P = lanes_in_place(s, in, w, st);
  if (P.lanes_are_inputs) return P;
  const ParamLayout l = attention_param_layout(s);
  const int64_t D = P.sdpa.D;  // the same buffers lanes_in_place pointed the SDPA at
  bf16* q2 = w.get<bf16>(Slot::Q2, int64_t(in.B) * in.Lq * s.heads * D);
  bf16* k2 = w.get<bf16>(Slot::K2, int64_t(in.B) * in.Lk * s.kv_heads * D);
  // GOAT: the keys' side (key bias u, then the lanes) beside the queries' lanes.
  const bool two = is_goat(s.scheme);
  const cudaStream_t ks = two ? w.fork(st) : st;
  lanes::lanes_forward(side_args(s, l, prm, in, false, false, w, ks), k2, ks);
  const lanes::RowLaneArgs qa = side_args(s, l, prm, in, true, false, w, st);
  lanes::lanes_forward(qa, q2, st);
  if (two && s.goat.query_gate) lanes::goat_gate_forward(gate_args(l, prm, qa), q2, st);
  if (two) w.join(st);
  return P;
}

namespace {

// What lanes_backward_impl knows about the keys of the call: `complete` when they are every
// key its queries see (one attention_backward, not a ring chunk) and there is no softcap,
// so GOAT's du sums to a known total (goat_du_project); dsink: the sink gradient of the call
// (the total's source), null without a sink. Under GOAT's query gate row i's u lanes are
// g_i, not 1, so the total weighs row i's share of dsink by g_i: sink, lse [B, H, Lq] and
// delta let lanes_backward_impl form it.
struct KeyTotal {
  bool complete = false;
  const float* dsink = nullptr;
  const float *sink = nullptr, *lse = nullptr, *delta = nullptr;
};

// The lane gradients d q', d k' the lane maps' backward reads: fp32 (lcr's kernels, the
// ring) or bf16 as cuDNN leaves them (sdpa_backward_bf16_qk).
struct LaneGradsIn {
  const float *dq2 = nullptr, *dk2 = nullptr;
  const bf16 *dq16 = nullptr, *dk16 = nullptr;
};

// GOAT's key-bias parameter gradients (lambda, bump, the MLP) from du [Lk, Hkv], added to
// their slices of dparams, on stream st: du projected onto its known total (kt), per-chunk
// partials, their fixed-order reduction, the scatter.
void goat_key_backward(const AttentionSpec& s, const ParamLayout& l, const DeviceParams& prm,
                       const AttentionInputs& in, float* du, float* dparams, Workspace::Impl& w,
                       cudaStream_t st, const KeyTotal& kt) {
  const int H = s.heads, Hkv = s.kv_heads;
  const lanes::GoatKeyArgs ga = goat_key_args(s, l, prm.data, in.Lk, in.k_pos0, w, st);
  const int cols = lanes::goat_key_cols(ga), chunks = lanes::goat_key_chunks(in.Lk);
  float* part = w.get<float>(Slot::KeyPart, int64_t(chunks) * Hkv * cols);
  float* sums = w.get<float>(Slot::KeySums, int64_t(Hkv) * cols);
  if (kt.complete)
    lanes::goat_du_project(in.Lk, Hkv, H / Hkv, in.k_pos0, in.Lq, in.q_pos0, kt.dsink, du,
                           w.get<double>(Slot::DUSums, lanes::goat_du_project_doubles(Hkv)), st);
  lanes::goat_key_param_partials(ga, du, part, st);
  LCR_CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(float) * Hkv * cols, st));
  lanes::reduce_partials(part, chunks, Hkv, cols, 0, cols, false, 1.0, sums, st);
  lanes::GoatKeyGradSlices g;
  g.lambda = slice(dparams, l, "goat.lambda");
  g.bump = slice(dparams, l, "goat.bump");
  g.w1 = slice(dparams, l, "goat.mlp_w1");
  g.b1 = slice(dparams, l, "goat.mlp_b1");
  g.w2 = slice(dparams, l, "goat.mlp_w2");
  lanes::goat_key_param_scatter(ga, sums, g, st);
}

void lanes_backward_impl(const AttentionSpec& s, const DeviceParams& prm, const AttentionInputs& in,
                         const LaneGradsIn& lg, float* dq, float* dk, float* dparams, Workspace& ws,
                         cudaStream_t st, const KeyTotal& kt) {
  if (authors_recipe(s)) {  // the lane parameters' gradients, then mapped back to theirs
    const goat::RecipeMap m = goat::recipe_map(s);
    const DeviceParams lane = goat_lane_params(s, prm, ws.impl(), st);
    float* dlane = ws.impl().get<float>(Slot::GoatLaneGrad, m.lane_total());
    LCR_CUDA_CHECK(cudaMemsetAsync(dlane, 0, sizeof(float) * m.lane_total(), st));
    lanes_backward_impl(goat::lane_spec(s), lane, in, lg, dq, dk, dlane, ws, st, kt);
    lanes::goat_recipe_contract(m, prm.data, dlane, dparams, st);
    return;
  }
  const int qd = input_qk_dim(s);
  const float *dq2 = lg.dq2, *dk2 = lg.dk2;
  if (lanes_are_inputs(s)) {
    require(dq2 && dk2, "cuda attention: a scheme without lanes takes fp32 lane gradients");
    if (dq != dq2)
      LCR_CUDA_CHECK(cudaMemcpyAsync(dq, dq2, sizeof(float) * in.B * in.Lq * s.heads * qd,
                                     cudaMemcpyDeviceToDevice, st));
    if (dk != dk2)
      LCR_CUDA_CHECK(cudaMemcpyAsync(dk, dk2, sizeof(float) * in.B * in.Lk * s.kv_heads * qd,
                                     cudaMemcpyDeviceToDevice, st));
    return;
  }
  Workspace::Impl& w = ws.impl();
  const ParamLayout l = attention_param_layout(s);
  const lanes::RowLaneArgs qa = side_args(s, l, prm, in, true, true, w, st);
  const lanes::RowLaneArgs ka = side_args(s, l, prm, in, false, true, w, st);
  const int cq = lanes::position_chunks(in.Lq), ck = lanes::position_chunks(in.Lk);
  const int H = s.heads, Hkv = s.kv_heads, R = s.goat.modes;
  const bool norm = s.numerics.qk_norm, goat = is_goat(s.scheme), pope = s.scheme == Scheme::PoPE;

  lanes::RowLaneGrads gq, gk;
  gq.dy = dq2;
  gq.dy16 = lg.dq16;
  gq.dx = dq;
  gk.dy = dk2;
  gk.dy16 = lg.dk16;
  gk.dx = dk;
  if (norm) {
    gq.gain_part = w.get<float>(Slot::GainQ, int64_t(cq) * H * qd);
    gk.gain_part = w.get<float>(Slot::GainK, int64_t(ck) * Hkv * qd);
  }
  if (goat) {
    gq.mode_part = w.get<float>(Slot::ModePart, int64_t(cq) * H * 2 * R);
    gk.du = w.get<float>(Slot::DU, int64_t(in.Lk) * Hkv);
  }
  if (pope) gk.delta_part = w.get<float>(Slot::DeltaPart, int64_t(ck) * Hkv * qd);
  // Keys first: GOAT's key-bias parameter chain starts from du and runs beside the queries'
  // lane backward.
  lanes::lanes_backward(ka, gk, st);
  KeyTotal kg = kt;
  if (goat && s.goat.query_gate && kt.complete && kt.dsink) {
    float* g = w.get<float>(Slot::GateValues, int64_t(in.B) * in.Lq * H);
    float* total = w.get<float>(Slot::GateTotal, H);
    lanes::goat_gate_values(gate_args(l, prm, qa), g, st);
    lanes::sink_backward(in.B, in.Lq, H, kt.sink, kt.lse, kt.delta, total, st, g);
    kg.dsink = total;
  }
  const cudaStream_t ks = goat ? w.fork(st) : st;
  if (goat) goat_key_backward(s, l, prm, in, gk.du, dparams, w, ks, kg);
  if (goat && s.goat.query_gate) {  // the gate's share first; the query lanes read dz
    const lanes::GoatGateArgs ga = gate_args(l, prm, qa);
    const int64_t rows = int64_t(in.B) * in.Lq * H;
    float* dz = w.get<float>(Slot::GateDZ, rows * qa.dp);
    float* gr = w.get<float>(Slot::GateRows, 2 * rows);
    lanes::goat_gate_backward(ga, gq.dy, gq.dy16, dz, gr, st);
    lanes::goat_gate_param_grads(ga, gr, slice(dparams, l, "goat.gate_scale"),
                                 slice(dparams, l, "goat.gate_bias"), st);
    gq.dy = dz;
    gq.dy16 = nullptr;
  }
  lanes::lanes_backward(qa, gq, st);

  if (norm) {
    lanes::reduce_partials(gq.gain_part, cq, H, qd, 0, qd, true, 1.0,
                           slice(dparams, l, "qk_norm.q_gain"), st);
    lanes::reduce_partials(gk.gain_part, ck, Hkv, qd, 0, qd, true, 1.0,
                           slice(dparams, l, "qk_norm.k_gain"), st);
  }
  if (goat) {
    // d alpha = sqrt(d_h) sum (g0 cos + g1 sin), d beta = sqrt(d_h) sum (g0 sin - g1 cos)
    const double ls = std::sqrt(double(s.head_dim));
    lanes::reduce_partials(gq.mode_part, cq, H, 2 * R, 0, R, false, ls,
                           slice(dparams, l, "goat.alpha"), st);
    lanes::reduce_partials(gq.mode_part, cq, H, 2 * R, R, R, false, ls,
                           slice(dparams, l, "goat.beta"), st);
  }
  if (pope)
    lanes::reduce_partials(gk.delta_part, ck, Hkv, qd, 0, qd, false, 1.0,
                           slice(dparams, l, "pope.delta"), st);
  if (goat) w.join(st);
}

}  // namespace

void prepared_backward(const AttentionSpec& s, const DeviceParams& prm, const AttentionInputs& in,
                       const float* dq2, const float* dk2, float* dq, float* dk, float* dparams,
                       Workspace& ws, cudaStream_t st) {
  check_inputs(s, in, prm);
  // A ring chunk's keys are a part of what its queries see: no known total for du.
  lanes_backward_impl(s, prm, in, LaneGradsIn{dq2, dk2}, dq, dk, dparams, ws, st, KeyTotal{});
}

void apply_sink(const AttentionSpec& s, const DeviceParams& prm, int B, int Lq, float* o_f32,
                float* lse, bf16* o, cudaStream_t st) {
  const ParamLayout l = attention_param_layout(s);
  lanes::finish_output(B, Lq, s.heads, s.v_dim(), slice(prm.data, l, "sink"), o_f32, lse, o, st);
}

void sink_backward(const AttentionSpec& s, const DeviceParams& prm, int B, int Lq, const float* lse,
                   const float* delta, float* dparams, cudaStream_t st) {
  const ParamLayout l = attention_param_layout(s);
  lanes::sink_backward(B, Lq, s.heads, slice(prm.data, l, "sink"), lse, delta,
                       slice(dparams, l, "sink"), st);
}

namespace {

// Parameter and FoX-lane gradients sum dS over up to B L rows, where the bf16 rounding of O
// inside delta = <dO, O> adds to their error. On lcr's kernels those schemes keep O in fp32
// (OF32) and the backward takes delta from it; NoPE/RoPE/ALiBi without options keep the
// plain bf16 path (no extra pass). On cuDNN (impl cudnn, and auto where cuDNN serves the
// call) o is bf16 and delta comes from it: over 24 fresh draws of the GOAT and PoPE cases at
// L = 129 and 1000 (scripts/dev/replay.sh repeats such draws) the median error of each parameter
// gradient over the naive bf16 error was 0.5-2.1 on lcr's kernels and 0.6-2.1 on cuDNN
// (docs/cuda.md, "GOAT and PoPE on cuDNN by default"), the same accuracy, and cuDNN trains
// faster.
bool keeps_f32_output(const AttentionSpec& s) {
  return uses_fox(s.scheme) || attention_param_layout(s).total() > 0;
}

// impl = cudnn asks cuDNN to run every scheme's product, GOAT's and PoPE's too: their o
// is then bf16 and their parameter gradients take delta from it (as NoPE's do). cuDNN's
// graph has no sink, whose rescale needs the fp32 output: an error names the choices.
bool all_on_cudnn(const AttentionSpec& s, const Workspace& ws) {
  if (ws.sdpa_impl() != SdpaImpl::Cudnn) return false;
  require(!s.numerics.has_sink(),
          "cuda attention: impl = cudnn (train.cuda_attention = \"cudnn\") cannot run a sink "
          "(cuDNN's attention has none); use auto (cuDNN where it can, lcr's kernels here) or lcr");
  return true;
}

std::string output_key(const std::string& call, const AttentionOutputs& out) {
  std::ostringstream o;
  o << call << ' ' << out.o << ' ' << out.lse;
  return o.str();
}

}  // namespace

void attention_forward(const AttentionSpec& s, const DeviceParams& prm, const AttentionInputs& in,
                       const AttentionOutputs& out, Workspace& ws, cudaStream_t st) {
  check_inputs(s, in, prm);
  require(out.lse && (out.o || in.Lq == 0),
          "cuda attention_forward: o and lse must be device "
          "buffers of [B, Lq, H, dv] bf16 and [B, H, Lq] fp32");
  Workspace::Impl& w = ws.impl();
  w.saved_out_key.clear();
  const PreparedAttention P = prepare_attention(s, prm, in, ws, st);
  // auto: cuDNN runs the product wherever it serves the call, the parameter schemes' too
  // (bf16 o); lcr's kernels, with the fp32 output where the scheme keeps one, elsewhere.
  const bool keeps_f32 = keeps_f32_output(s);
  bool on_cudnn = false;
  if (keeps_f32 && !s.numerics.has_sink() && ws.sdpa_impl() == SdpaImpl::Auto) {
    SdpaArgs a = P.sdpa;
    a.impl = SdpaImpl::Auto;
    on_cudnn = sdpa_forward_vendor(a, out.o, out.lse, st);
  }
  const bool f32_out = !on_cudnn && keeps_f32 && !all_on_cudnn(s, ws);
  if (f32_out) {
    float* of32 = w.get<float>(Slot::OF32, int64_t(in.B) * in.Lq * s.heads * s.v_dim());
    const float* sink =
        s.numerics.has_sink() ? slice(prm.data, attention_param_layout(s), "sink") : nullptr;
    // Without a sink the SDPA writes both outputs (o = o_f32 rounded to bf16), which saves
    // finish_output's pass over o; a sink rescales the rows there first.
    sdpa_forward(P.sdpa, sink ? nullptr : out.o, of32, out.lse, st);
    if (sink) lanes::finish_output(in.B, in.Lq, s.heads, s.v_dim(), sink, of32, out.lse, out.o, st);
  } else if (!on_cudnn) {
    SdpaArgs a = P.sdpa;
    a.impl = ws.sdpa_impl();
    sdpa_forward(a, out.o, nullptr, out.lse, st);
  }
  const std::string call = call_key(s, prm, in, w);
  w.saved_lanes_key = call;
  if (f32_out) w.saved_out_key = output_key(call, out);
}

void attention_backward(const AttentionSpec& s, const DeviceParams& prm, const AttentionInputs& in,
                        const AttentionOutputs& out, const bf16* dout, const AttentionGrads& g,
                        Workspace& ws, cudaStream_t st) {
  check_inputs(s, in, prm);
  require(out.o && out.lse && dout,
          "cuda attention_backward: needs the forward's o and lse and "
          "dout [B, Lq, H, dv] bf16");
  require(g.dq && g.dk && g.dv, "cuda attention_backward: dq, dk and dv must be device buffers");
  const ParamLayout l = attention_param_layout(s);
  const int64_t total = l.total();
  require(total == 0 || g.dparams, "cuda attention_backward: dparams is null but the scheme has ",
          total, " parameters");
  Workspace::Impl& w = ws.impl();
  const std::string call = call_key(s, prm, in, w);
  // The forward on this workspace left its lanes in Q2/K2 and (for schemes with
  // parameters) its fp32 output in OF32: reuse them (autograd contract).
  const bool saved_lanes = !w.saved_lanes_key.empty() && w.saved_lanes_key == call;
  const bool saved_out = !w.saved_out_key.empty() && w.saved_out_key == output_key(call, out);
  const PreparedAttention P =
      saved_lanes ? lanes_in_place(s, in, w, st) : prepare_attention(s, prm, in, ws, st);
  SdpaArgs a = P.sdpa;
  // cuDNN (impl cudnn / auto) forms delta from the bf16 o itself: offered only o's calls.
  if (!saved_out) a.impl = ws.sdpa_impl();
  const bool fox = uses_fox(s.scheme);
  const float* sink = s.numerics.has_sink() ? slice(prm.data, l, "sink") : nullptr;
  // All keys of the queries are in this call: GOAT's du sums to a known total unless softcap
  // bends the logits (goat_du_project).
  KeyTotal kt;
  kt.complete = is_goat(s.scheme) && s.numerics.softcap == 0;
  const int64_t nq2 = int64_t(in.B) * in.Lq * a.H * a.D, nk2 = int64_t(in.B) * in.Lk * a.Hkv * a.D;
  // On cuDNN, schemes with lanes take cuDNN's bf16 d q', d k' straight into the lane maps'
  // backward (no widening pass), and nothing here needs delta unless a sink or FoX does.
  if (a.impl != SdpaImpl::Lcr && !P.lanes_are_inputs && !sink && !fox && in.Lq > 0 && in.Lk > 0) {
    bf16* dq16 = w.get<bf16>(Slot::DQ2, nq2);
    bf16* dk16 = w.get<bf16>(Slot::DK2, nk2);
    if (sdpa_backward_bf16_qk(a, out.lse, out.o, dout, dq16, dk16, g.dv, st)) {
      if (total > 0) LCR_CUDA_CHECK(cudaMemsetAsync(g.dparams, 0, sizeof(float) * total, st));
      LaneGradsIn lg;
      lg.dq16 = dq16, lg.dk16 = dk16;
      lanes_backward_impl(s, prm, in, lg, g.dq, g.dk, g.dparams, ws, st, kt);
      return;
    }
    a.impl = SdpaImpl::Lcr;  // auto, and cuDNN cannot serve the call: lcr's kernels, below
  }
  const bool need_delta = saved_out || sink || fox || a.impl == SdpaImpl::Lcr;
  float* delta = need_delta ? w.get<float>(Slot::Delta, int64_t(in.B) * s.heads * in.Lq) : nullptr;
  if (saved_out)
    lanes::row_delta_f32(in.B, in.Lq, s.heads, s.v_dim(),
                         w.get<float>(Slot::OF32, int64_t(in.B) * in.Lq * s.heads * s.v_dim()),
                         dout, delta, st);
  else if (delta)
    sdpa_row_delta(in.B, in.Lq, s.heads, s.v_dim(), out.o, dout, delta, st);
  float* dq2 = P.lanes_are_inputs ? g.dq : w.get<float>(Slot::DQ2, nq2);
  float* dk2 = P.lanes_are_inputs ? g.dk : w.get<float>(Slot::DK2, nk2);
  // The FoX query lane's gradient sum_j dS_ij nearly cancels, so it is not taken from the
  // SDPA's dbias_q (which inherits the bf16 P of the forward's O through delta, sdpa.hpp):
  // without softcap it has a closed form (fox_query_grad); with softcap it is A - D C from
  // the SDPA's fp32 row sums (fox_query_grad_from_sums).
  const bool fox_exact_q = fox && s.numerics.softcap == 0;
  float* fox_sums = fox && !fox_exact_q && g.dfox_cq
                        ? w.get<float>(Slot::FoxRowSums, 3 * int64_t(in.B) * in.Lq * s.heads)
                        : nullptr;
  // delta null (cuDNN likely, nothing else needs it): sdpa_backward forms it if it falls back.
  sdpa_backward(a, out.lse, delta, dout, dq2, dk2, g.dv, nullptr, fox ? g.dfox_ck : nullptr, false,
                st, fox_sums, saved_out ? nullptr : out.o);
  if (fox_exact_q && g.dfox_cq)
    lanes::fox_query_grad(in.B, in.Lq, s.heads, delta, out.lse, sink, g.dfox_cq, st);
  if (fox_sums) lanes::fox_query_grad_from_sums(in.B, in.Lq, s.heads, fox_sums, g.dfox_cq, st);
  if (total > 0) LCR_CUDA_CHECK(cudaMemsetAsync(g.dparams, 0, sizeof(float) * total, st));
  if (sink) sink_backward(s, prm, in.B, in.Lq, out.lse, delta, g.dparams, st);
  if (!P.lanes_are_inputs) {
    kt.dsink = sink ? slice(g.dparams, l, "sink") : nullptr;
    kt.sink = sink;
    kt.lse = out.lse;
    kt.delta = delta;
    lanes_backward_impl(s, prm, in, LaneGradsIn{dq2, dk2}, g.dq, g.dk, g.dparams, ws, st, kt);
  }
}

// ---- FoX gates ----

void fox_cumulative_log_gates(int B, int L, int H, const float* x, const float* offset, float* c,
                              Workspace& ws, cudaStream_t st) {
  require(B >= 1 && L >= 0 && H >= 1,
          "fox_cumulative_log_gates: need B >= 1, L >= 0, H >= 1; "
          "got B=",
          B, " L=", L, " H=", H);
  require(L == 0 || (x && c), "fox_cumulative_log_gates: x and c must be device buffers [B, L, H]");
  double* scratch = ws.impl().get<double>(Slot::FoxScratch, lanes::fox_scratch_doubles(B, L, H));
  lanes::fox_cumulative(B, L, H, x, offset, c, scratch, st);
}

void fox_cumulative_log_gates_backward(int B, int L, int H, const float* x, const float* dc,
                                       float* dx, float* doffset, Workspace& ws, cudaStream_t st) {
  require(B >= 1 && L >= 0 && H >= 1,
          "fox_cumulative_log_gates_backward: need B >= 1, L >= 0, "
          "H >= 1; got B=",
          B, " L=", L, " H=", H);
  require(L == 0 || (x && dc && dx),
          "fox_cumulative_log_gates_backward: x, dc and dx must be device buffers [B, L, H]");
  double* scratch = ws.impl().get<double>(Slot::FoxScratch, lanes::fox_scratch_doubles(B, L, H));
  lanes::fox_cumulative_backward(B, L, H, x, dc, dx, doffset, scratch, st);
}

}  // namespace lcr::cuda
