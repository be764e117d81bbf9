#pragma once
// What an attention call computes: the position scheme, its options and the shapes.
// Conventions (exact, from DESIGN.md section 3):
//   tensors q [B, Lq, H, dq], k [B, Lk, Hkv, dq], v [B, Lk, Hkv, dv], o [B, Lq, H, dv],
//   lse [B, H, Lq]; positions are GLOBAL: query row i sits at q_pos0 + i, key row j at
//   k_pos0 + j; causal means key position <= query position. H % Hkv == 0 (GQA: query
//   head h reads KV head h / (H / Hkv)).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace lcr {

enum class Scheme { NoPE, RoPE, ALiBi, GOAT, GOAT2D, PoPE, FoX, PaTH, PaTHFoX };

// What a scheme is made of: the one place the code asks these questions.
// PaTH transitions (w, beta per position); the rest are dot-product (SDPA) schemes.
constexpr bool is_path(Scheme s) { return s == Scheme::PaTH || s == Scheme::PaTHFoX; }
// FoX forget gates (the cumulative log-gate lanes fox_cq, fox_ck).
constexpr bool uses_fox(Scheme s) { return s == Scheme::FoX || s == Scheme::PaTHFoX; }
// GOAT's learned prior lanes, on a line (GOAT) or a grid (GOAT2D).
constexpr bool is_goat(Scheme s) { return s == Scheme::GOAT || s == Scheme::GOAT2D; }

const char* scheme_name(Scheme s);
// Parses "nope", "rope", "alibi", "goat", "goat2d", "pope", "fox", "path", "path_fox";
// an unknown name is an Error that lists the valid ones.
Scheme parse_scheme(const std::string& name);
std::vector<std::string> scheme_names();

enum class RopePairing { Interleaved, HalfSplit };  // (2m, 2m+1) vs (m, m + r/2)

// YaRN's NTK-by-parts ramp and temperature (seed 001; kernels/schemes/rope/rope.cpp).
// Released: the YaRN authors' code, which every released YaRN checkpoint and the model
// libraries use: the ramp is linear in the pair index m between floor(m(beta_fast)) and
// ceil(m(beta_slow)), m(b) = r ln(N / (2 pi b)) / (2 ln base), and the temperature
// multiplies the rotated dims only. Paper: the paper's gamma, linear in the number of turns
// N / lambda_m between beta_slow and beta_fast, and the temperature on the whole logit
// (partial RoPE's pass-through dims too). They agree only when no pair lies inside the ramp.
enum class YarnConvention { Released, Paper };

struct RopeOptions {
  RopePairing pairing = RopePairing::HalfSplit;
  int rotary_dim = 0;            // first r dims rotated (partial RoPE); 0 = the whole head
  double base = 10000.0;         // angle = pos * base^(-2m/r)
  double yarn_factor = 1.0;      // YaRN scale s = L'/L; 1 disables YaRN
  int yarn_original_len = 4096;  // N, the training context the frequencies were fitted to
  double yarn_beta_fast = 32.0;  // ramp upper edge (r > beta: no interpolation)
  double yarn_beta_slow = 1.0;   // ramp lower edge (r < alpha: interpolate only)
  YarnConvention yarn_convention = YarnConvention::Released;
};

// GOAT's parameterisation (kernels/schemes/goat/goat_recipe.hpp). Lcr: alpha, beta per
// query head, one key-bias MLP per KV head, a free recency slope lambda, all starting
// neutral. Authors: the GOAT authors' released package: alpha, beta per KV head, ONE MLP
// shared by all heads times a per-KV-head gain, a recency slope softplus(s) >= 0 seeded at
// ALiBi's slopes; R = 0 (no relative prior) is their GPT recipe. Both give the same logit
// form, so both run on the same lanes.
enum class GoatRecipe { Lcr, Authors };

struct GoatOptions {
  GoatRecipe recipe = GoatRecipe::Lcr;
  // The authors' optional query gate: g_i = sigmoid(b_h - softplus(a_h) |q_c,i|) multiplies
  // the query's prior lanes (the relative modes and u), so a query with a large content
  // norm can turn the prior down.
  bool query_gate = false;
  int modes = 4;             // R Fourier modes (0: none); d_p = 2R + 2, d_c = head_dim - d_p > 0
  double base = 10000.0;     // B in w_r = B^(-(r-1)/max(R-1,1))
  int mlp_hidden = 16;       // width of g_h's hidden SiLU layer
  int feature_freqs = 4;     // sin/cos pairs in phi(j)
  int64_t train_len = 1024;  // L_train in phi(j)
  int grid_width = 0;        // GOAT2D: position p sits at (y, x) = (p / W, p % W)
  int y_modes = 0;           // GOAT2D: modes on the y axis (rest on x); 0 = R / 2
};

// ALiBi's slopes. Published: the ALiBi authors' recipe (their code, BLOOM and the model
// libraries): for H a power of two 2^(-8 (h+1) / H); otherwise, with P the largest power of
// two below H, the P slopes of P heads followed by every other slope of 2P heads
// (2^(-8 (2k+1) / (2P)), k < H - P). Geometric: 2^(-8 (h+1) / H) for every H. The two agree
// when H is a power of two.
enum class AlibiSlopes { Published, Geometric };

struct AlibiOptions {
  AlibiSlopes slopes = AlibiSlopes::Published;
};

struct PopeOptions {
  double base = 10000.0;  // theta_c = base^(-(c-1)/d)
};

// PaTH / PaTH-FoX (kernels/schemes/path): the kernel works on blocks of block_size
// positions (UT transform inside a block, a right-to-left scan over earlier blocks).
// Any block_size >= 1 gives the same result up to rounding; it trades the O(L^2 d^2 / B)
// transition work against the O(L B (B + d)) work inside blocks.
struct PathOptions {
  int block_size = 64;
};

// FoX forget gates' scale (FoX and PaTH-FoX). The model multiplies the cumulative log gates
// c by it before attention, which adds c_i - c_j to the logit. Unscaled: the logit is
// scale * q.k + c_i - c_j, as the FoX and PaTH papers write it and fla's FoX reference
// computes it. SoftmaxScale: softmax(scale * (q.k + c_i - c_j)), a weaker gate, as fla's
// PaTH-FoX kernels compute it: those kernels trained the PaTH paper's models.
enum class FoxGateScale { Unscaled, SoftmaxScale };

struct FoxOptions {
  FoxGateScale gate_scale = FoxGateScale::Unscaled;
};

struct NumericsOptions {
  bool qk_norm = false;  // per-head RMSNorm of q and k (gain [dq] shared by heads),
                         // applied before the position scheme
  double qk_norm_eps = 1e-6;
  double softcap = 0.0;  // logit <- c tanh(logit / c); 0 disables
  bool sink = false;     // learned per-head logit s_h added to the softmax denominator
  // Softmax-off-by-one: a unit added to the denominator, i.e. the sink with every s_h fixed
  // at 0. The "sink" parameter [H] is laid out as for a learned sink and must hold zeros;
  // the trainer initialises it to 0 and never updates it (its gradient is zeroed).
  bool off_by_one = false;
  // Whether a sink logit enters the softmax (learned or fixed at 0): the "sink" parameter.
  bool has_sink() const { return sink || off_by_one; }
};

struct AttentionSpec {
  Scheme scheme = Scheme::NoPE;
  int heads = 1;      // H, query heads
  int kv_heads = 1;   // Hkv, divides H
  int head_dim = 64;  // d_h: the kernel's head width (GOAT: d_c + d_p; PoPE: d)
  int value_dim = 0;  // dv; 0 = head_dim
  RopeOptions rope;
  AlibiOptions alibi;
  GoatOptions goat;
  PopeOptions pope;
  PathOptions path;
  FoxOptions fox;
  NumericsOptions numerics;

  int v_dim() const { return value_dim > 0 ? value_dim : head_dim; }
  int group() const { return heads / kv_heads; }
};

// Throws an Error naming the first problem and its fix (GOAT with d_c <= 0, odd RoPE
// width, heads not divisible by kv_heads, ...).
void validate(const AttentionSpec& spec);

// Width of the q and k the caller passes in (the "content" width): d_h for
// NoPE/RoPE/ALiBi/FoX/PaTH, d_c = d_h - 2R - 2 for GOAT, d for PoPE.
int input_qk_dim(const AttentionSpec& spec);

// The factor on FoX's cumulative log gates: 1, or 1 / sqrt(head_dim) with SoftmaxScale.
double fox_gate_scale(const AttentionSpec& spec);

// ALiBi slope of head h (0-based) out of H, by the AlibiSlopes convention. Host and device:
// the CUDA lanes compute the slopes on the GPU with this same function.
#if defined(__CUDACC__)
#define LCR_SPEC_HOST_DEVICE __host__ __device__
#else
#define LCR_SPEC_HOST_DEVICE
#endif
LCR_SPEC_HOST_DEVICE inline double alibi_slope(int h, int heads, AlibiSlopes slopes) {
  if (slopes == AlibiSlopes::Geometric) return ::exp2(-8.0 * (h + 1) / heads);
  int p = 1;  // the largest power of two <= heads
  while (2 * p <= heads) p *= 2;
  return h < p ? ::exp2(-8.0 * (h + 1) / p) : ::exp2(-8.0 * (2 * (h - p) + 1) / (2 * p));
}

}  // namespace lcr
