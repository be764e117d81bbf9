// Argument checks and workspace plan of the CUDA PaTH (path.hpp, plan.hpp); host only, shared
// by the GPU build and the emulator build.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/attention/cuda/path/plan.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda::path {

void check(const Args& a) {
  require(a.B >= 1 && a.L >= 1, "cuda path: need B >= 1 and L >= 1; got B=", a.B, " L=", a.L);
  require(a.H >= 1 && a.Hkv >= 1 && a.H % a.Hkv == 0, "cuda path: H=", a.H,
          " query heads must be a positive multiple of Hkv=", a.Hkv,
          " (GQA: query head h uses KV head h / (H/Hkv) and its transitions)");
  require(a.D == 64 || a.D == 128, "cuda path: head width D=", a.D,
          " is not supported; the PaTH kernels are built for D = 64 and D = 128 "
          "(pad the heads, or use the Kokkos path for other widths)");
  require(a.q && a.k && a.v && a.w && a.beta, "cuda path: q, k, v, w and beta must all be given");
  require((a.fox_q == nullptr) == (a.fox_k == nullptr),
          "cuda path: give both FoX gate tensors (fox_q and fox_k) for PaTH-FoX, or neither");
  auto aligned = [](const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; };
  require(aligned(a.q) && aligned(a.k) && aligned(a.v) && aligned(a.w),
          "cuda path: q, k, v and w must be 16-byte aligned (cudaMalloc gives 256 bytes; an "
          "offset into a buffer must be a multiple of 8 bf16 / 4 fp32 elements)");
  require(a.q_pos0 == a.k_pos0,
          "cuda path: PaTH is self-attention over one span: q_pos0=", a.q_pos0,
          " differs from k_pos0=", a.k_pos0,
          "; pass the same span (a context-parallel ring uses the chunk functions)");
  require(a.scale >= 0.f && std::isfinite(a.scale), "cuda path: scale=", a.scale,
          " must be finite and >= 0 (0 = 1/sqrt(D))");
  require(a.softcap >= 0.f && std::isfinite(a.softcap), "cuda path: softcap=", a.softcap,
          " must be >= 0 (0 = off)");
  require(a.superchunk == 0 || (a.superchunk >= 128 && a.superchunk % 128 == 0),
          "cuda path: superchunk=", a.superchunk,
          " must be 0 (automatic) or a positive multiple of 128 positions");
  require(a.warp_rows == 0 || a.warp_rows == 16 || a.warp_rows == 32,
          "cuda path: warp_rows=", a.warp_rows, " must be 0 (automatic), 16 or 32");
}

namespace detail {

Plan make_plan(const Args& a, bool backward, bool folds) {
  Plan p;
  p.Lp = (a.L + 127) / 128 * 128;
  p.nb = p.Lp / 64;
  if (a.superchunk > 0) {
    p.R = a.superchunk / 64;
  } else {
    const int r = int(std::ceil(std::sqrt(double(p.nb))));
    p.R = r < 2 ? 2 : r + (r & 1);
  }
  p.nS = (p.nb + p.R - 1) / p.R;
  // Automatic choice: 32-row warps in the carry kernel (bench_cuda_path times both; docs/cuda.md
  // PaTH section has the figures).
  p.mt = (a.warp_rows ? a.warp_rows : 32) == 32 ? 2 : 1;
  p.scale = a.scale > 0.f ? a.scale : float(1.0 / std::sqrt(double(a.D)));
  const int64_t S = 64 * int64_t(p.R);
  p.zrows = int64_t(p.nS - 1) * p.Lp - S * (p.nS - 1) * p.nS / 2;
  const std::size_t B = a.B, H = a.H, Hkv = a.Hkv, D = a.D, Lp = p.Lp;
  const std::size_t nb = p.nb, nS = p.nS, R = p.R, zr = std::size_t(p.zrows);
  std::size_t off = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t at = off;
    off += (bytes + 255) / 256 * 256;
    return at;
  };
  const std::size_t none = SIZE_MAX;
  p.qf = take(B * H * Lp * D * 4);
  p.kf = take(B * Hkv * Lp * D * 2);
  p.ks = take(B * Hkv * Lp * D * 2);
  p.pf = take(B * Hkv * nb * D * D * 2);
  p.ps = take(B * Hkv * nS * D * D * 2);
  if (!backward) {
    p.o_part = take(B * H * Lp * D * 4);
    p.m_part = take(B * H * Lp * 4);
    p.l_part = take(B * H * Lp * 4);
    p.suf = p.delta = p.xf = p.gf = p.zc = p.gc = none;
    p.dqf = p.dks = p.dkf = p.dpf = p.dps = p.utg = p.utl = p.ute = none;
  } else {
    p.o_part = p.m_part = p.l_part = none;
    p.suf = take(B * Hkv * nb * D * D * 2);
    p.delta = take(B * H * Lp * 4);
    p.xf = take(B * H * R * Lp * D * 2);
    p.gf = take(B * H * R * Lp * D * 2);
    p.zc = take(B * H * zr * D * 2);
    p.gc = take(B * H * zr * D * 2);
    p.dqf = take(B * H * Lp * D * 4);
    p.dks = take(B * Hkv * Lp * D * 4);
    p.dkf = take(B * Hkv * Lp * D * 4);
    p.dpf = take(B * Hkv * nb * D * D * 4);
    p.dps = take(B * Hkv * nS * D * D * 4);
    p.utg = take(B * Hkv * nb * 64 * 64 * 4);
    p.utl = take(B * Hkv * nb * 64 * 64 * 4);
    p.ute = take(B * Hkv * nb * 64 * 64 * 2);
  }
  p.fpre = p.fsuf = p.flp = p.fls = p.fgg = p.fgp = p.fgs = p.fdgg = p.fdgp = p.fdgs = p.ftot =
      none;
  if (folds) {  // groups of about sqrt(nb) blocks (device/fold.cuh)
    p.rg = std::max(1, int(std::ceil(std::sqrt(double(p.nb)))));
    p.ng = (p.nb + p.rg - 1) / p.rg;
    const std::size_t per_block = B * Hkv * nb * D * D * 4, per_group = B * Hkv * p.ng * D * D * 4;
    p.fpre = take(per_block);
    p.fsuf = take(per_block);
    p.flp = take(per_block);
    p.fls = take(per_block);
    p.fgg = take(per_group);
    p.fgp = take(per_group);
    p.fgs = take(per_group);
    if (backward) {
      p.fdgg = take(per_group);
      p.fdgp = take(per_group);
      p.fdgs = take(per_group);
      p.ftot = take(B * Hkv * D * D * 4);
    }
  }
  p.bytes = off;
  return p;
}

}  // namespace detail

std::size_t forward_workspace_bytes(const Args& a, bool folds) {
  check(a);
  return detail::make_plan(a, false, folds).bytes;
}
std::size_t backward_workspace_bytes(const Args& a, bool folds) {
  check(a);
  return detail::make_plan(a, true, folds).bytes;
}

}  // namespace lcr::cuda::path
