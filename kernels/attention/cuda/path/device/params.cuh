#pragma once
// What every PaTH kernel receives: the problem's dimensions, the user's tensors and the
// workspace arrays, all by value in one struct. The algorithm (docs/cuda.md, PaTH section):
//
//  - fine blocks of 64 positions (block m spans 64m .. 64m+63): UT transform T_m, keys
//    folded to the block's right end k~ (kf), queries folded to its left end q~ (qf), the
//    block transition P_m = H_{64m} ... H_{64m+63} (pf);
//  - superchunks of R fine blocks (S = 64 R positions): keys folded to the superchunk's right
//    end K^S = Suf_m^T k~ with Suf_m = P_{m+1} ... P_last (ks) and the superchunk transition
//    P^s (ps);
//  - a query in block a of superchunk s first meets the keys of its own block (intra-block
//    UT form), then the earlier blocks of s with one fine transition per block, then every
//    earlier superchunk as a plain dot product with K^S, one superchunk transition each.
// Sequences are padded to Lp = a multiple of 128 positions (w = beta = k = v = 0 there); the
// padded positions are masked by causality (a real query never sees a later key).
#include <cstdint>

#include "kernels/attention/cuda/device/simt.cuh"

namespace lcr::cuda::LCR_PATHK {

constexpr int kBlk = 64;  // fine block size (positions)
constexpr int kFld = 65;  // leading dimension of 64 x 64 fp32 tiles (odd: no bank conflicts)

struct Params {
  // Dimensions.
  int B = 0, L = 0, H = 0, Hkv = 0, D = 0;
  int Lp = 0;  // L rounded up to 128
  int nb = 0;  // fine blocks, Lp / 64 (even)
  int R = 0;   // fine blocks per superchunk (even)
  int nS = 0;  // superchunks, ceil(nb / R)
  float scale = 1.f, softcap = 0.f;

  // User tensors (row-major). Forward inputs:
  const bf16* q = nullptr;       // [B, L, H, D]
  const bf16* k = nullptr;       // [B, L, Hkv, D]
  const bf16* v = nullptr;       // [B, L, Hkv, D]
  const float* w = nullptr;      // [B, L, Hkv, D]
  const float* beta = nullptr;   // [B, L, Hkv]
  const float* fox_q = nullptr;  // [B, L, H] or null
  const float* fox_k = nullptr;  // [B, L, H] or null
  bf16* o = nullptr;             // [B, L, H, D]
  float* lse = nullptr;          // [B, H, L]
  // Backward inputs / outputs (fp32 gradients, [B, L, ...] like their inputs):
  const bf16* dout = nullptr;
  const bf16* o_in = nullptr;
  const float* lse_in = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr, *dw = nullptr, *dbeta = nullptr;
  float *dfox_q = nullptr, *dfox_k = nullptr;

  // Workspace (head-major, padded). Forward and backward:
  float* qf = nullptr;  // [B, H, Lp, D]         q~
  bf16* kf = nullptr;   // [B, Hkv, Lp, D]       k~
  bf16* ks = nullptr;   // [B, Hkv, Lp, D]       K^S
  bf16* pf = nullptr;   // [B, Hkv, nb, D, D]    P_m (row-major)
  bf16* ps = nullptr;   // [B, Hkv, nS, D, D]    P^s
  // Forward: the intra-block softmax state handed to the scan.
  float* o_part = nullptr;  // [B, H, Lp, D] unnormalised
  float* m_part = nullptr;  // [B, H, Lp]    row max (natural log units)
  float* l_part = nullptr;  // [B, H, Lp]    row sum
  // Backward.
  bf16* suf = nullptr;     // [B, Hkv, nb, D, D]   Suf_m
  float* delta = nullptr;  // [B, H, Lp]           <dO_i, O_i>
  bf16* xf = nullptr;      // [B, H, R, Lp, D]     carried queries x^(c), slot c - first
  bf16* gf = nullptr;      // [B, H, R, Lp, D]     adjoints g^(c-1), slot c - first
  bf16* zc = nullptr;      // [B, H, zrows, D]     carried queries z^(t), triangular slots
  bf16* gc = nullptr;      // [B, H, zrows, D]     adjoints g^(t-1), slot t (t >= 1)
  float* dqf = nullptr;    // [B, H, Lp, D]        d q~
  float* dks = nullptr;    // [B, Hkv, Lp, D]      d K^S
  float* dkf = nullptr;    // [B, Hkv, Lp, D]      d k~
  float* dpf = nullptr;    // [B, Hkv, nb, D, D]   d P_m
  float* dps = nullptr;    // [B, Hkv, nS, D, D]   d P^s
  // The UT transform of every fine block as prep computes it (ut.cuh), for block_backward,
  // which would otherwise compute it twice more per block (its setup and its UT backward):
  // 64 x 64.
  float* utg = nullptr;  // [B, Hkv, nb, 64, 64]  Gm = strictLower(W W^T)
  float* utl = nullptr;  // [B, Hkv, nb, 64, 64]  Lam
  bf16* ute = nullptr;   // [B, Hkv, nb, 64, 64]  E = T Nk
  int64_t zrows = 0;

  // Span boundary folds (fold.cuh; path.hpp Folds / FoldGrads), when asked for. Groups of rg
  // fine blocks, ng of them. fp32 [B, Hkv, nb, D, D]: fpre (Pre_m, then dPre_m, then d lp_m),
  // fsuf (likewise Suf_m), flp, fls; [B, Hkv, ng, D, D]: fgg, fgp, fgs, fdgg, fdgp, fdgs.
  int rg = 0, ng = 0;
  float *fpre = nullptr, *fsuf = nullptr, *flp = nullptr, *fls = nullptr;
  float *fgg = nullptr, *fgp = nullptr, *fgs = nullptr;
  float *fdgg = nullptr, *fdgp = nullptr, *fdgs = nullptr;
  float* fold_q = nullptr;  // [B, L, H, D]    out: queries folded to the span's left end
  bf16* fold_k = nullptr;   // [B, L, Hkv, D]  out: keys folded to its right end
  float* fold_p = nullptr;  // [B, Hkv, D, D]  out: the span's transition (workspace in backward)
  const float* dfold_q = nullptr;  // gradients of those (backward; null = zero)
  const float* dfold_k = nullptr;
  const float* dfold_p = nullptr;

  LCR_HD int G() const { return H / Hkv; }
  LCR_HD int S() const { return 64 * R; }
  LCR_HD bool fox() const { return fox_q != nullptr; }
  // Coarse slot t holds the rows of every query whose superchunk is > t, i.e. rows
  // (t+1) S .. Lp-1, stacked slot after slot.
  LCR_HD int64_t zslot(int t) const { return int64_t(t) * Lp - int64_t(S()) * t * (t + 1) / 2; }
  LCR_HD int64_t zrow(int t, int i) const { return zslot(t) + i - int64_t(t + 1) * S(); }
};

// The logit of one (query, key) pair in log2 units from the raw dot product, and d s / d x:
//   x = scale raw + fq - fk,  s = softcap ? cap tanh(x / cap) : x,  returns s log2(e).
// Mode: which terms there are, fixed at compile time in the hot kernels (forward scan, dq,
// dkv). With the runtime test (kAnyLogit) every element of a tile is its own branch around
// tanh, so the compiler cannot interleave the elements' dependent chains: the scan then
// issues ~11 instructions per tensor-core product (ncu) against the SDPA's ~4.
enum LogitMode : int { kPlainLogit = 0, kFoxLogit = 1, kCapLogit = 2, kAnyLogit = 3 };

template <int kMode>
struct LogitOf {
  float scale, cap, inv_cap;
  LCR_HD LogitOf(float s, float c) : scale(s), cap(c), inv_cap(c > 0.f ? 1.f / c : 0.f) {}
  LCR_DEV float operator()(float raw, float fq, float fk) const {
    if constexpr (kMode == kPlainLogit) {
      return raw * (scale * kLog2e);
    } else if constexpr (kMode == kFoxLogit) {
      return (scale * raw + fq - fk) * kLog2e;
    } else {
      const float x = scale * raw + fq - fk;
      if constexpr (kMode == kCapLogit) return cap * kLog2e * fast_tanh(x * inv_cap);
      return (cap > 0.f ? cap * fast_tanh(x * inv_cap) : x) * kLog2e;
    }
  }
  // ds/dx from s2 = s log2(e): 1 - (s / cap)^2.
  LCR_DEV float dcap(float s2) const {
    if constexpr (kMode == kPlainLogit || kMode == kFoxLogit) {
      return 1.f;
    } else {
      if (kMode == kAnyLogit && cap <= 0.f) return 1.f;
      const float u = s2 * kLn2 * inv_cap;
      return 1.f - u * u;
    }
  }
  // Whether the FoX lanes can be non-zero (kAnyLogit and kCapLogit: when p.fox()).
  static constexpr bool kMayFox = kMode != kPlainLogit;
};
using Logit = LogitOf<kAnyLogit>;  // the per-block kernels (prep, block_backward)

// The mode of a problem: softcap first (it may come with FoX), then FoX, then plain.
LCR_HD int logit_mode(float softcap, bool fox) {
  return softcap > 0.f ? kCapLogit : fox ? kFoxLogit : kPlainLogit;
}

}  // namespace lcr::cuda::LCR_PATHK
