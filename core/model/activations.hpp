#pragma once
// The buffers of one forward pass (llm.c style: every intermediate the backward needs is
// kept, nothing is recomputed except inside the attention kernel). R = B L local rows; a
// [B, L, H, d] tensor is the same memory as [R, H d].
#include <vector>

#include "core/model/params.hpp"
#include "kernels/attention/attention.hpp"

namespace lcr {

template <class T>
struct LayerActivations {
  View2<T> xn1;           // [R, D] attention RMSNorm output
  View1<T> rstd1;         // [R]
  View4<T> q, k, v;       // [B, L, H, dq], [B, L, Hkv, dq], [B, L, Hkv, dv]
  View3<T> fox_z, fox_c;  // [B, L, H] gate pre-activation, cumulative log gate (FoX only)
  // PaTH only (core/model/path.hpp): u = xn1 Wu and w = normalize(conv3(u)) [B, L, Hkv, d];
  // beta logits z = xn1 Wb + b and beta [B, L, Hkv]; per runner segment, u at the two
  // global positions before it [B, 2, Hkv, d] (empty = zeros), which the backward re-reads.
  View4<T> path_u, path_w;
  View3<T> path_z, path_beta;
  std::vector<View4<T>> path_prefix;
  View4<T> o;            // [B, L, H, dv] attention output
  View3<T> lse;          // [B, H, L]
  View2<T> x_mid;        // [R, D] residual after the attention branch
  View2<T> xn2;          // [R, D] MLP RMSNorm output
  View1<T> rstd2;        // [R]
  View2<T> gate, up, h;  // [R, F] SwiGLU: h = silu(gate) * up
};

template <class T>
struct Activations {
  int64_t B = 0, L = 0;
  View2<int32_t> tokens, labels;  // [B, L] copies of the batch (backward needs the tokens)
  std::vector<View2<T>> x;        // n_layers + 1 residual streams [R, D]; x[0] = embeddings
  std::vector<LayerActivations<T>> layers;
  View2<T> xf;        // [R, D] final RMSNorm output
  View1<T> rstdf;     // [R]
  View2<T> logits;    // [R, V]; backward overwrites it with dloss/dlogits
  View1<T> lse;       // [R] log-sum-exp of each row of logits
  View1<T> row_loss;  // [R]
};

// Scratch of the backward pass, reused layer after layer.
template <class T>
struct BackwardWork {
  View2<T> dres;            // [R, D] gradient of the residual stream at the current depth
  View2<T> dxn;             // [R, D] gradient of an RMSNorm output
  View2<T> dh, dgate, dup;  // [R, F]
  View4<T> dout;            // [B, L, H, dv] gradient of the attention output
  AttentionGrads<T> attn;   // dq, dk, dv, dparams (one layer's attn.* block), dfox_cq/ck
  View3<T> dfox_c, dfox_z;  // [B, L, H] (FoX only)
  View4<T> dpath_u;         // [B, L, Hkv, d] (PaTH only)
  View3<T> dpath_z;         // [B, L, Hkv] (PaTH only)
};

template <class T>
Activations<T> make_activations(const ModelLayout& layout, int64_t B, int64_t L);
template <class T>
BackwardWork<T> make_backward_work(const ModelLayout& layout, int64_t B, int64_t L);

}  // namespace lcr
