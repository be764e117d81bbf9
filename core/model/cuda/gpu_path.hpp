#pragma once
// PaTH's per-layer parameterisation on the GPU: the CUDA twins of the pointwise maps of
// kernels/schemes/path/params.hpp (core/model/path.hpp has the model's side), same math,
// same "ADDED / overwritten" contract. The projections (u = xn1 Wu, z = xn1 Wb + b) are the
// caller's GEMMs; these kernels do what follows them:
//   w_t  = y_t / |y_t|,  y = act(conv3(u)) per KV head and channel, act = SiLU or identity,
//        conv3: y_t[h, c] = sum_{k=0..2} conv[h, c, k] u_{t-2+k}[h, c]  (k = 2: the current
//        position; positions before a sequence's first row are zeros: whole sequences only)
//   beta = min(2 sigmoid(z), kBetaMax)
// fp32 device pointers, rows r = b L + t; u, w [B, L, Hkv, d], z, beta [B, L, Hkv],
// conv [Hkv, d, 3]. Every call is stream-ordered and checks its launch (lcr::Error).
//
// A row whose conv output has norm <= kMinWNorm (or a non-finite norm) has no direction: the
// CPU throws; here, with no synchronisation, its w row is set to NaN so the loss turns NaN and
// GpuModel::locate_nonfinite names the layer's PaTH w.
//
// Determinism: dconv is summed without atomics (one partial per block of kRowBlock rows and
// (h, c, k), each summed in row order, then the partials in block order).
#include <cuda_runtime.h>

#include <cstdint>

namespace lcr::cuda::model {

// kernels/schemes/path/params.hpp's constants (gpu_model.cpp checks that they agree):
// beta's cap 2 - 2^-10 and the smallest conv-output norm that gives w a direction.
constexpr double kPathBetaMax = 2.0 - 1.0 / 1024.0;
constexpr double kPathMinWNorm = 1e-12;

// Scratch floats path_w_backward needs for its dconv partials.
int64_t path_conv_partial_floats(int64_t R, int64_t Hkv, int64_t d);

// u -> w (d <= 128).
void path_w_forward(int64_t B, int64_t L, int64_t Hkv, int64_t d, bool silu, const float* u,
                    const float* conv, float* w, cudaStream_t s);

// dw (the attention's gradient with respect to w as a free vector) -> du overwritten,
// dconv ADDED. dw is used as scratch: on return it holds the gradient with respect to the
// conv's pre-activation. partial: path_conv_partial_floats(B L, Hkv, d) floats.
void path_w_backward(int64_t B, int64_t L, int64_t Hkv, int64_t d, bool silu, const float* u,
                     const float* conv, float* dw, float* du, float* dconv, float* partial,
                     cudaStream_t s);

// beta = min(2 sigmoid(z), kBetaMax) over n values.
void path_beta_forward(int64_t n, const float* z, float* beta, cudaStream_t s);
// dz = dbeta d beta / dz (0 where beta is clamped), overwritten; dz may alias dbeta.
void path_beta_backward(int64_t n, const float* z, const float* dbeta, float* dz, cudaStream_t s);

}  // namespace lcr::cuda::model
