// Host orchestration of the PaTH kernels, compiled twice: by nvcc into lcr_cuda_path (path.cu)
// and by the host compiler for the SIMT emulator (emu/path_emu.cpp). The including file
// defines, in the enclosing namespace:
//   namespace K = <kernel namespace>;                      (pathk or pathk_emu)
//   launch(name, kernel, Grid3 grid, int threads, size_t smem, cudaStream_t, Params...)
//   zero(void* ptr, size_t bytes, cudaStream_t)
// Kernel order and what each produces: docs/cuda.md (PaTH section) and device/*.cuh.

namespace launch_detail {

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

using detail::Plan;

template <class T>
T* at(void* ws, std::size_t off) {
  return off == SIZE_MAX ? nullptr : reinterpret_cast<T*>(static_cast<unsigned char*>(ws) + off);
}

inline K::Params make_params(const Args& a, const Plan& pl, void* ws) {
  K::Params p;
  p.B = a.B, p.L = a.L, p.H = a.H, p.Hkv = a.Hkv, p.D = a.D;
  p.Lp = pl.Lp, p.nb = pl.nb, p.R = pl.R, p.nS = pl.nS, p.zrows = pl.zrows;
  p.scale = pl.scale, p.softcap = a.softcap;
  p.q = a.q, p.k = a.k, p.v = a.v, p.w = a.w, p.beta = a.beta;
  p.fox_q = a.fox_q, p.fox_k = a.fox_k;
  p.qf = at<float>(ws, pl.qf);
  p.kf = at<__nv_bfloat16>(ws, pl.kf);
  p.ks = at<__nv_bfloat16>(ws, pl.ks);
  p.pf = at<__nv_bfloat16>(ws, pl.pf);
  p.ps = at<__nv_bfloat16>(ws, pl.ps);
  p.o_part = at<float>(ws, pl.o_part);
  p.m_part = at<float>(ws, pl.m_part);
  p.l_part = at<float>(ws, pl.l_part);
  p.suf = at<__nv_bfloat16>(ws, pl.suf);
  p.delta = at<float>(ws, pl.delta);
  p.xf = at<__nv_bfloat16>(ws, pl.xf);
  p.gf = at<__nv_bfloat16>(ws, pl.gf);
  p.zc = at<__nv_bfloat16>(ws, pl.zc);
  p.gc = at<__nv_bfloat16>(ws, pl.gc);
  p.dqf = at<float>(ws, pl.dqf);
  p.dks = at<float>(ws, pl.dks);
  p.dkf = at<float>(ws, pl.dkf);
  p.dpf = at<float>(ws, pl.dpf);
  p.dps = at<float>(ws, pl.dps);
  p.utg = at<float>(ws, pl.utg);
  p.utl = at<float>(ws, pl.utl);
  p.ute = at<__nv_bfloat16>(ws, pl.ute);
  p.rg = pl.rg, p.ng = pl.ng;
  p.fpre = at<float>(ws, pl.fpre);
  p.fsuf = at<float>(ws, pl.fsuf);
  p.flp = at<float>(ws, pl.flp);
  p.fls = at<float>(ws, pl.fls);
  p.fgg = at<float>(ws, pl.fgg);
  p.fgp = at<float>(ws, pl.fgp);
  p.fgs = at<float>(ws, pl.fgs);
  p.fdgg = at<float>(ws, pl.fdgg);
  p.fdgp = at<float>(ws, pl.fdgp);
  p.fdgs = at<float>(ws, pl.fdgs);
  p.fold_p = at<float>(ws, pl.ftot);  // the backward's scratch; forward points it at Folds::p
  return p;
}

template <class Smem>
std::size_t smem_bytes() {
  K::SmemCarver c;
  return Smem::carve(c, nullptr);
}

// f(std::integral_constant<int, mode>) with the problem's logit mode (device/params.cuh):
// the scan, dq and dkv kernels are compiled per mode.
template <class F>
void with_logit_mode(const Args& a, F&& f) {
  switch (K::logit_mode(a.softcap, a.fox_q != nullptr)) {
    case K::kPlainLogit:
      return f(std::integral_constant<int, K::kPlainLogit>{});
    case K::kFoxLogit:
      return f(std::integral_constant<int, K::kFoxLogit>{});
    default:
      return f(std::integral_constant<int, K::kCapLogit>{});
  }
}

template <int D>
void prep_and_chain(const K::Params& p, const Plan& pl, bool forward, cudaStream_t s) {
  launch("prep", K::prep_kernel<D>, Grid3{pl.nb, p.Hkv, p.B}, 256, smem_bytes<K::PrepSmem<D>>(), s,
         p, forward);
  launch("chain", K::chain_kernel<D>, Grid3{pl.nS, p.Hkv, p.B}, 256, smem_bytes<K::ChainSmem<D>>(),
         s, p, !forward);
}

// The span's boundary products (device/fold.cuh), from prep's pf: lp, ls, gg, gp, gs, the
// total (fold_p), Pre and Suf.
template <int D>
void fold_chains(const K::Params& p, const Plan& pl, cudaStream_t s) {
  const std::size_t three = smem_bytes<K::FoldSmem<D>>();  // three Splits
  launch("fold_local", K::fold_local_kernel<D>, Grid3{pl.ng, p.Hkv, p.B}, 256, three, s, p);
  launch("fold_group", K::fold_group_kernel<D>, Grid3{1, p.Hkv, p.B}, 256, three, s, p);
  launch("fold_combine", K::fold_combine_kernel<D>, Grid3{pl.nb, p.Hkv, p.B}, 256, three, s, p);
}

// Reverse mode of fold_chains plus the folds' application: adds to dqf, dkf and dpf (before
// block_backward reads them).
template <int D>
void fold_backward(const K::Params& p, const Plan& pl, cudaStream_t s) {
  fold_chains<D>(p, pl, s);
  const std::size_t three = smem_bytes<K::FoldSmem<D>>();  // three Splits
  launch("fold_apply_backward", K::fold_apply_backward_kernel<D>, Grid3{pl.nb, p.Hkv, p.B}, 256,
         smem_bytes<K::FoldApplyBwdSmem<D>>(), s, p);
  launch("fold_combine_backward", K::fold_combine_backward_kernel<D>, Grid3{pl.ng, p.Hkv, p.B}, 256,
         smem_bytes<K::FoldAccSmem<D>>(), s, p);
  launch("fold_group_backward", K::fold_group_backward_kernel<D>, Grid3{1, p.Hkv, p.B}, 256, three,
         s, p);
  launch("fold_local_backward", K::fold_local_backward_kernel<D>, Grid3{pl.ng, p.Hkv, p.B}, 256,
         three, s, p);
}

template <int D, int kMode>
void run_forward(const K::Params& p, const Plan& pl, cudaStream_t s) {
  prep_and_chain<D>(p, pl, true, s);
  launch("forward_scan", K::forward_kernel<D, kMode>, Grid3{pl.nb, p.H, p.B}, 128,
         smem_bytes<K::FwdSmem<D>>(), s, p);
  if (p.fold_q) {
    fold_chains<D>(p, pl, s);
    launch("fold_apply", K::fold_apply_kernel<D>, Grid3{pl.nb, p.H + p.Hkv, p.B}, 256,
           smem_bytes<K::FoldSmem<D>>(), s, p);
  }
}

template <int D, int MT, int kMode>
void run_backward(const K::Params& p, const Plan& pl, cudaStream_t s) {
  // dk and dw: block_backward's first products store them (no zeroing).
  zero(p.dpf, std::size_t(p.B) * p.Hkv * pl.nb * D * D * sizeof(float), s);
  zero(p.dps, std::size_t(p.B) * p.Hkv * pl.nS * D * D * sizeof(float), s);
  const int64_t rows = int64_t(p.B) * p.H * pl.Lp;
  launch("row_delta", K::row_delta_kernel, Grid3{int((rows + 7) / 8), 1, 1}, 256, 0, s, p);
  prep_and_chain<D>(p, pl, false, s);
  const int tiles = pl.Lp / 128;
  launch("carry", K::carry_kernel<D, MT>, Grid3{tiles, p.H, p.B}, 256 / MT,
         smem_bytes<K::CarrySmem<D, MT>>(), s, p);
  launch("dq", K::dq_kernel<D, kMode>, Grid3{pl.nb, p.H, p.B}, 128, smem_bytes<K::DqSmem<D>>(), s,
         p);
  K::SmemCarver dkv;
  launch("dkv", K::dkv_kernel<D, kMode>, Grid3{pl.nb, p.Hkv, p.B}, 128,
         K::DkvSmem<D>::carve(dkv, nullptr, p.H / p.Hkv), s, p);
  const int S = 64 * pl.R;
  if (pl.nS >= 3)
    launch("outer_coarse", K::outer_kernel<D>,
           Grid3{(pl.Lp - 2 * S + K::kOuterChunk - 1) / K::kOuterChunk, pl.nS - 2, p.B * p.H}, 256,
           smem_bytes<K::OuterSmem<D>>(), s, p, true);
  launch("outer_fine", K::outer_kernel<D>, Grid3{pl.nb, 1, p.B * p.H}, 256,
         smem_bytes<K::OuterSmem<D>>(), s, p, false);
  launch("chain_backward", K::chain_backward_kernel<D>, Grid3{pl.nS, p.Hkv, p.B}, 256,
         smem_bytes<K::ChainBwdSmem<D>>(), s, p);
  if (pl.ng > 0) fold_backward<D>(p, pl, s);
  launch("block_backward", K::block_backward_kernel<D>, Grid3{pl.nb, p.Hkv, p.B}, 256,
         smem_bytes<K::BlockBwdSmem<D>>(), s, p);
}

}  // namespace launch_detail

void forward_impl(const Args& a, __nv_bfloat16* o, float* lse, void* ws, std::size_t ws_bytes,
                  cudaStream_t s, const Folds* folds) {
  using namespace launch_detail;
  check(a);
  require(o != nullptr && lse != nullptr, "cuda path forward: o and lse must be given");
  require(!folds || (folds->q && folds->k && folds->p),
          "cuda path forward: Folds needs all of q, k and p (or pass no Folds)");
  const Plan pl = detail::make_plan(a, false, folds != nullptr);
  require(ws != nullptr && ws_bytes >= pl.bytes, "cuda path forward: workspace of ", ws_bytes,
          " bytes is too small; forward_workspace_bytes(args, ", folds != nullptr, ") says ",
          pl.bytes);
  K::Params p = make_params(a, pl, ws);
  p.o = o;
  p.lse = lse;
  if (folds) p.fold_q = folds->q, p.fold_k = folds->k, p.fold_p = folds->p;
  with_logit_mode(a, [&](auto mode) {
    constexpr int M = decltype(mode)::value;
    if (a.D == 64)
      run_forward<64, M>(p, pl, s);
    else
      run_forward<128, M>(p, pl, s);
  });
}

void backward_impl(const Args& a, const __nv_bfloat16* o, const float* lse,
                   const __nv_bfloat16* dout, const Grads& g, void* ws, std::size_t ws_bytes,
                   cudaStream_t s, const FoldGrads* fg) {
  using namespace launch_detail;
  check(a);
  require(o && lse && dout, "cuda path backward: o, lse and dout must be given");
  require(g.dq && g.dk && g.dv && g.dw && g.dbeta,
          "cuda path backward: dq, dk, dv, dw and dbeta must all be given");
  require(a.fox_q == nullptr || (g.dfox_q && g.dfox_k),
          "cuda path backward: PaTH-FoX needs dfox_q and dfox_k");
  auto aligned8 = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 8 == 0; };
  require(aligned8(g.dq) && aligned8(g.dk) && aligned8(g.dv) && aligned8(g.dw),
          "cuda path backward: dq, dk, dv and dw must be 8-byte aligned (the kernels write and "
          "add them as float pairs); pass the start of a cudaMalloc'd buffer or an offset of an "
          "even number of floats");
  const Plan pl = detail::make_plan(a, true, fg != nullptr);
  require(ws != nullptr && ws_bytes >= pl.bytes, "cuda path backward: workspace of ", ws_bytes,
          " bytes is too small; backward_workspace_bytes(args, ", fg != nullptr, ") says ",
          pl.bytes);
  K::Params p = make_params(a, pl, ws);
  if (fg) p.dfold_q = fg->dq, p.dfold_k = fg->dk, p.dfold_p = fg->dp;
  p.o_in = o;
  p.lse_in = lse;
  p.dout = dout;
  p.dq = g.dq, p.dk = g.dk, p.dv = g.dv, p.dw = g.dw, p.dbeta = g.dbeta;
  p.dfox_q = g.dfox_q, p.dfox_k = g.dfox_k;
  with_logit_mode(a, [&](auto mode) {
    constexpr int M = decltype(mode)::value;
    if (a.D == 64) {
      if (pl.mt == 1) run_backward<64, 1, M>(p, pl, s);
      if (pl.mt == 2) run_backward<64, 2, M>(p, pl, s);
    } else {
      if (pl.mt == 1) run_backward<128, 1, M>(p, pl, s);
      if (pl.mt == 2) run_backward<128, 2, M>(p, pl, s);
    }
  });
}

void carry_impl(int B, int L, int H, int Hkv, int D, const float* M, const float* q,
                __nv_bfloat16* y, cudaStream_t s) {
  using namespace launch_detail;
  require(B > 0 && L >= 0 && Hkv > 0 && H % Hkv == 0 && (D == 64 || D == 128) && M && q && y,
          "cuda path carry: bad dimensions or a null tensor (B ", B, ", L ", L, ", H ", H, ", Hkv ",
          Hkv, ", D ", D, ")");
  require(
      aligned16(M) && aligned16(q),
      "cuda path carry: M and q must be 16-byte aligned (the kernel reads them in 16-byte "
      "pieces); pass the start of a cudaMalloc'd buffer or an offset of a multiple of 4 floats");
  if (L == 0) return;
  K::RingCarryArgs a;
  a.B = B, a.L = L, a.H = H, a.Hkv = Hkv, a.M = M, a.q = q, a.y = y;
  const Grid3 grid{(L + 64 * K::kCarryTiles - 1) / (64 * K::kCarryTiles), H, B};
  K::SmemCarver c;
  if (D == 64)
    launch("carry", K::ring_carry_kernel<64>, grid, 256,
           K::RingCarrySmem<64>::carve(c, nullptr, false), s, a);
  else
    launch("carry", K::ring_carry_kernel<128>, grid, 256,
           K::RingCarrySmem<128>::carve(c, nullptr, false), s, a);
}

void carry_backward_impl(int B, int L, int H, int Hkv, int D, const float* M, const float* q,
                         const float* dy, float* dq, float* dM, cudaStream_t s) {
  using namespace launch_detail;
  require(B > 0 && L >= 0 && Hkv > 0 && H % Hkv == 0 && (D == 64 || D == 128) && M && q && dy &&
              dq && dM,
          "cuda path carry_backward: bad dimensions or a null tensor");
  require(aligned16(M) && aligned16(q) && aligned16(dy),
          "cuda path carry_backward: M, q and dy must be 16-byte aligned (the kernel reads them "
          "in 16-byte pieces); pass the start of a cudaMalloc'd buffer or an offset of a multiple "
          "of 4 floats");
  if (L == 0) return;
  K::RingCarryArgs a;
  a.B = B, a.L = L, a.H = H, a.Hkv = Hkv, a.M = M, a.q = q, a.dy = dy, a.dq = dq, a.dM = dM;
  const Grid3 grid{(L + 64 * K::kCarryTiles - 1) / (64 * K::kCarryTiles), Hkv, B};
  K::SmemCarver c;
  if (D == 64)
    launch("carry_backward", K::ring_carry_backward_kernel<64>, grid, 256,
           K::RingCarrySmem<64>::carve(c, nullptr, true), s, a);
  else
    launch("carry_backward", K::ring_carry_backward_kernel<128>, grid, 256,
           K::RingCarrySmem<128>::carve(c, nullptr, true), s, a);
}

void mat_products_impl(int batch, int D, const float* A, bool ta, const float* B, bool tb, float* C,
                       bool accumulate, cudaStream_t s) {
  using namespace launch_detail;
  require(batch >= 0 && (D == 64 || D == 128) && A && B && C,
          "cuda path mat_products: bad dimensions or a null matrix");
  if (batch == 0) return;
  K::MatProductArgs a;
  a.A = A, a.B = B, a.C = C, a.ta = ta, a.tb = tb, a.accumulate = accumulate;
  if (D == 64)
    launch("mat_products", K::mat_product_kernel<64>, Grid3{batch, 1, 1}, 256,
           smem_bytes<K::FoldSmem<64>>(), s, a);
  else
    launch("mat_products", K::mat_product_kernel<128>, Grid3{batch, 1, 1}, 256,
           smem_bytes<K::FoldSmem<128>>(), s, a);
}

void wgmma_probe_impl(const __nv_bfloat16* A, const __nv_bfloat16* B, const __nv_bfloat16* P,
                      float* c1, float* c2, float* c3, bool fence) {
  using namespace launch_detail;
  launch("wgmma_probe", K::wgmma_probe_kernel, Grid3{1, 1, 1}, 128, smem_bytes<K::WgmmaProbeSmem>(),
         nullptr, A, B, P, c1, c2, c3, fence);
}
