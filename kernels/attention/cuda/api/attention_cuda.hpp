#pragma once
// The CUDA attention API of the dot-product family (NoPE, RoPE, ALiBi, GOAT, GOAT2D,
// PoPE, FoX; QK-RMSNorm, softcap, sink, GQA, global offsets): the GPU twin of
// kernels/attention/attention.hpp, same shapes, same math, same parameter layout.
//
//   q, k --QK-RMSNorm--> lanes (RoPE / GOAT / PoPE, lane_kernels.hpp) --> cuda::sdpa_*
//   (scale, ALiBi, FoX bias lanes, softcap) --> sink
//
// Storage: q, k, v, o, dout bf16; lse, FoX lanes, parameters and every gradient fp32.
// Tensors are row-major device arrays:
//   q [B, Lq, H, input_qk_dim(spec)]  k [B, Lk, Hkv, input_qk_dim(spec)]  v [B, Lk, Hkv, dv]
//   o [B, Lq, H, dv]  lse [B, H, Lq]  fox_cq [B, Lq, H]  fox_ck [B, Lk, H]
// Parameters: ONE fp32 device buffer laid out by attention_param_layout(spec)
// (kernels/attention/params.hpp: goat.*, pope.delta, sink, qk_norm.*), the same offsets
// as the CPU ParamSet, so the host copy and the device copy are one memcpy apart; the
// gradients dparams use the same layout.
// All calls are stream-ordered (no host synchronisation) and check their arguments,
// throwing lcr::Error with the problem and the fix. dv must be a multiple of 8; the
// lanes are padded to a multiple of 8 with zeros, so any even RoPE width works.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "kernels/attention/cuda/sdpa.hpp"
#include "kernels/attention/spec.hpp"

namespace lcr::cuda {

using bf16 = __nv_bfloat16;

struct DeviceParams {
  const float* data = nullptr;  // device, attention_param_layout(spec).total() floats
  int64_t size = 0;
};

struct AttentionInputs {
  int B = 0, Lq = 0, Lk = 0;
  const bf16* q = nullptr;
  const bf16* k = nullptr;
  const bf16* v = nullptr;
  int64_t q_pos0 = 0, k_pos0 = 0;  // GLOBAL position of query row 0 / key row 0
  const float* fox_cq = nullptr;   // FoX: cumulative log gates c at the query positions
  const float* fox_ck = nullptr;   // FoX: c at the key positions
};

struct AttentionOutputs {
  bf16* o = nullptr;
  float* lse = nullptr;  // sink included
};

// Every pointer overwritten. dfox_* only for FoX (may be null: then not computed).
struct AttentionGrads {
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  float* dparams = nullptr;  // layout of the parameters; null allowed when it is empty
  float* dfox_cq = nullptr;
  float* dfox_ck = nullptr;
};

// Device scratch reused across calls (grown on demand, freed with the object): lanes,
// position tables, lane gradients, reduction partials. One Workspace per stream; not
// thread-safe. The forward keeps its lanes here and, for schemes with parameters or FoX
// when lcr's kernels run the product, its output in fp32; a backward on the same workspace
// with the same spec, pointers, shapes and positions reuses the lanes instead of
// recomputing them and takes the softmax row term delta = <dO, O> from the fp32 output
// (else from the bf16 o, as cuDNN does: the parameter gradients a little noisier,
// docs/cuda.md "GOAT and PoPE on cuDNN by default"). The autograd contract: q, k, the parameters
// and the outputs must not change in between; call workspace.forget() after changing
// them in place.
class Workspace {
 public:
  Workspace();
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void forget();          // drops saved lanes and cached tables
  int64_t bytes() const;  // device memory held

  struct Impl;
  Impl& impl() { return *impl_; }

  // Which SDPA implementation attention_forward / attention_backward on this workspace ask
  // for (sdpa.hpp, SdpaImpl; default lcr's kernels):
  //   auto   cuDNN runs the product of every scheme where it can (no ALiBi, bias lanes,
  //          softcap, sink; self-attention or a past block), GOAT's and PoPE's too (bf16 o,
  //          their parameter gradients take delta from it); lcr's kernels run the rest, with
  //          the fp32 output the parameter schemes and FoX take delta from;
  //   cudnn  cuDNN runs every product; an lcr::Error names what it cannot run (ALiBi, FoX's
  //          lanes, softcap, sink);
  //   lcr    lcr's kernels only (the parameter schemes' gradients a little closer to exact:
  //          docs/cuda.md, "GOAT and PoPE on cuDNN by default").
  void set_sdpa_impl(SdpaImpl impl) { sdpa_impl_ = impl; }
  SdpaImpl sdpa_impl() const { return sdpa_impl_; }

 private:
  std::unique_ptr<Impl> impl_;
  SdpaImpl sdpa_impl_ = SdpaImpl::Lcr;
};

// Checks shapes and options against the spec (PaTH: an Error pointing to the PaTH CUDA
// kernel); throws lcr::Error naming the problem and the fix.
void check_inputs(const AttentionSpec& spec, const AttentionInputs& in, const DeviceParams& params);

void attention_forward(const AttentionSpec& spec, const DeviceParams& params,
                       const AttentionInputs& in, const AttentionOutputs& out, Workspace& ws,
                       cudaStream_t stream = nullptr);

// out: the forward's result for the same inputs; dout [B, Lq, H, dv] bf16.
void attention_backward(const AttentionSpec& spec, const DeviceParams& params,
                        const AttentionInputs& in, const AttentionOutputs& out, const bf16* dout,
                        const AttentionGrads& grads, Workspace& ws, cudaStream_t stream = nullptr);

// ---- kernel-level form, for the context-parallel ring (like prepare_attention on CPU) ----
// prepare_attention runs QK-RMSNorm and the lanes and fills the SDPA arguments (q', k'
// live in the workspace until its next prepare). prepared_backward maps the lane
// gradients dq2 [B, Lq, H, sdpa.D], dk2 [B, Lk, Hkv, sdpa.D] (fp32, from sdpa_backward)
// back to dq, dk (overwritten) and ADDS the lane and QK-norm parameter gradients into
// dparams. The sink is not part of it: apply_sink / sink_backward once after merging.
struct PreparedAttention {
  SdpaArgs sdpa;
  bool lanes_are_inputs = false;  // q' = q, k' = k: dq2 IS dq (no backward pass needed)
};
PreparedAttention prepare_attention(const AttentionSpec& spec, const DeviceParams& params,
                                    const AttentionInputs& in, Workspace& ws, cudaStream_t stream);
void prepared_backward(const AttentionSpec& spec, const DeviceParams& params,
                       const AttentionInputs& in, const float* dq2, const float* dk2, float* dq,
                       float* dk, float* dparams, Workspace& ws, cudaStream_t stream);
// Sink forward: lse <- logaddexp(lse, s_h), o_f32 *= exp(lse_old - lse_new) in place and
// o (bf16) = o_f32.
void apply_sink(const AttentionSpec& spec, const DeviceParams& params, int B, int Lq, float* o_f32,
                float* lse, bf16* o, cudaStream_t stream);
// dparams' sink slice (overwritten) from the final lse and delta = <dO, O> [B, H, Lq].
void sink_backward(const AttentionSpec& spec, const DeviceParams& params, int B, int Lq,
                   const float* lse, const float* delta, float* dparams, cudaStream_t stream);

// ---- FoX gates (kernels/schemes/fox/fox.hpp on the GPU) ----
// x [B, L, H] gate logits, offset [B, H] or null -> c [B, L, H] = offset + running sum of
// log sigmoid(x) over GLOBAL positions (kept in double, stored fp32).
void fox_cumulative_log_gates(int B, int L, int H, const float* x, const float* offset, float* c,
                              Workspace& ws, cudaStream_t stream);
// dx [B, L, H] overwritten; doffset [B, H] overwritten when not null.
void fox_cumulative_log_gates_backward(int B, int L, int H, const float* x, const float* dc,
                                       float* dx, float* doffset, Workspace& ws,
                                       cudaStream_t stream);

// Lane width the SDPA sees for this spec (before / after padding to a multiple of 8).
int lane_width(const AttentionSpec& spec);
int padded_lane_width(const AttentionSpec& spec);

}  // namespace lcr::cuda
