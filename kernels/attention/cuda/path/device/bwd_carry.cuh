#pragma once
// Backward, first two kernels.
//
// row_delta: delta[b, h, i] = <dO_i, O_i> (fp32, padded rows 0), one warp per row.
//
// carry: the forward scan's query transport again, storing every carried query the
// backward needs (the scan's adjoint runs left to right while the scan runs right to left,
// and P is not invertible, so the carried queries are kept rather than recomputed):
//   fine:   x^(c) for c = a-1 .. first(s), slot c - first of xf  (x^(c): query at block c's
//           right end; x^(a-1) = q~)
//   coarse: z^(u) for u = s-1 .. 0, slot u of zc                 (z^(s-1) = y, the query at
//           the superchunk's left boundary; z^(u-1) = P^u z^(u))
// The forward scan's step order (forward.cuh), without keys, on 128-row tiles of mma.sync
// warps (16 or 32 rows each: Args::warp_rows); the transition matrices are double-buffered, each
// warp's queries transformed in place (one buffer: 102 KiB at D = 128, two CTAs per SM).
#include "kernels/attention/cuda/path/device/params.cuh"
#include "kernels/attention/cuda/path/device/tile.cuh"

namespace lcr::cuda::LCR_PATHK {

constexpr int kTileRows = 128;  // query rows per CTA of the carry kernel (two fine blocks)

// x <- P x in place for a warp's 16 MT rows (X = X P^T): each 16-row group's whole output
// (16 x D fp32, D / 2 registers per lane) is formed before any of it is written back.
template <int D, int MT>
LCR_DEV void warp_transition_in_place(bf16* x, const bf16* P) {
  const int g = lane() >> 2, tq = lane() & 3;
  LCR_NO_UNROLL
  for (int mt = 0; mt < MT; ++mt) {
    float t[D / 8][4];
    LCR_UNROLL
    for (int j = 0; j < D / 8; ++j) LCR_UNROLL
    for (int i = 0; i < 4; ++i) t[j][i] = 0.f;
    LCR_UNROLL
    for (int k0 = 0; k0 < D; k0 += 16) {
      uint32_t a[4];
      load_a(a, op(x, pad(D)), mt * 16, k0);
      LCR_UNROLL
      for (int np = 0; np < D / 16; ++np) {
        uint32_t bb[4];
        load_b(bb, op(P, pad(D), true), k0, np * 16);
        mma_bf16(t[2 * np], a, bb);
        mma_bf16(t[2 * np + 1], a, bb + 2);
      }
    }
    sync_warp();  // every lane's fragments of these rows are read before any is overwritten
    LCR_UNROLL
    for (int j = 0; j < D / 8; ++j) LCR_UNROLL
    for (int hh = 0; hh < 2; ++hh) {
      const int r = mt * 16 + g + 8 * hh, c = j * 8 + 2 * tq;
      *reinterpret_cast<uint32_t*>(x + r * pad(D) + c) = pack_bf16(t[j][2 * hh], t[j][2 * hh + 1]);
    }
  }
}

LCR_KERNEL_BOUNDS(256, 1) void row_delta_kernel(Params p) {
  const int64_t row = int64_t(bid_x()) * 8 + warp();  // over B * H * Lp, [B, H, Lp] order
  if (row >= int64_t(p.B) * p.H * p.Lp) return;
  const int i = int(row % p.Lp), h = int(row / p.Lp % p.H), b = int(row / (int64_t(p.Lp) * p.H));
  float s = 0.f;
  if (i < p.L) {
    const int64_t off = ((int64_t(b) * p.L + i) * p.H + h) * p.D;
    for (int c = lane() * 2; c < p.D; c += 64) {
      s += to_f(p.dout[off + c]) * to_f(p.o_in[off + c]) +
           to_f(p.dout[off + c + 1]) * to_f(p.o_in[off + c + 1]);
    }
  }
  for (int m = 16; m >= 1; m >>= 1) s += shfl_xor(s, m);
  if (lane() == 0) p.delta[row] = s;
}

// One step of the carry of a 128-row tile: where to store the current x, and the transition
// applied afterwards.
struct CarryStep {
  bf16* store;        // destination of row 0 of the tile (rows consecutive), or null
  const bf16* trans;  // D x D matrix, or null
  bool a1_only;
};

LCR_DEV CarryStep carry_step(const Params& p, int i, int t, int h, int b) {
  const int a0 = 2 * t, sg = a0 / p.R, first = sg * p.R, nfine = a0 - first, D = p.D;
  const int64_t bh = int64_t(b) * p.H + h, bh_kv = int64_t(b) * p.Hkv + h / p.G();
  const int row0 = t * kTileRows;
  CarryStep st;
  st.a1_only = i == 0;
  if (i <= nfine) {
    const int c = a0 - i;
    st.store = p.xf + ((bh * p.R + (c - first)) * p.Lp + row0) * D;
    st.trans = (i == 0 || c > first || sg > 0) ? p.pf + (bh_kv * p.nb + c) * D * D : nullptr;
  } else {
    const int u = sg - 1 - (i - 1 - nfine);
    st.store = p.zc + (bh * p.zrows + p.zrow(u, row0)) * D;
    st.trans = u > 0 ? p.ps + (bh_kv * p.nS + u) * D * D : nullptr;
  }
  return st;
}
LCR_DEV int carry_steps(const Params& p, int t) {
  const int a0 = 2 * t, sg = a0 / p.R;
  return 1 + (a0 - sg * p.R) + sg;
}

template <int D, int MT>
struct CarrySmem {
  static constexpr int kWarps = kTileRows / (16 * MT);
  bf16 *X, *P;  // X: [warp][16 MT x pad(D)]; P: [2][D x pad(D)]
  static LCR_HD std::size_t carve(SmemCarver& c, CarrySmem* s) {
    CarrySmem t;
    t.X = c.take<bf16>(kWarps * 16 * MT * pad(D));
    t.P = c.take<bf16>(2 * D * pad(D));
    if (s) *s = t;
    return c.off;
  }
  LCR_DEV bf16* x(int w) const { return X + w * 16 * MT * pad(D); }
};

template <int D, int MT>
LCR_KERNEL_BOUNDS(256 / MT, 2)
void carry_kernel(Params p) {
  using Smem = CarrySmem<D, MT>;
  constexpr int NW = Smem::kWarps, RW = 16 * MT;
  Smem s;
  SmemCarver carver{smem_base()};
  Smem::carve(carver, &s);
  const int t = bid_x(), h = bid_y(), b = bid_z(), w = warp();
  const int64_t bh = int64_t(b) * p.H + h;
  for (int e = tid(); e < kTileRows * D / 2; e += nthreads()) {
    const int r = e / (D / 2), c = (e % (D / 2)) * 2;
    const float* src = p.qf + (bh * p.Lp + t * kTileRows + r) * D + c;
    *reinterpret_cast<uint32_t*>(s.x(r / RW) + (r % RW) * pad(D) + c) = pack_bf16(src[0], src[1]);
  }
  const int nsteps = carry_steps(p, t);
  CarryStep st = carry_step(p, 0, t, h, b);
  if (st.trans) async_rows<D, D, 256 / MT>(s.P, pad(D), st.trans, D, D);
  cp_async_commit();
  for (int i = 0; i < nsteps; ++i) {
    cp_async_wait<0>();
    sync_cta();
    if (i + 1 < nsteps) {
      const CarryStep nx = carry_step(p, i + 1, t, h, b);
      if (nx.trans)
        async_rows<D, D, 256 / MT>(s.P + ((i + 1) & 1) * D * pad(D), pad(D), nx.trans, D, D);
    }
    cp_async_commit();
    const bool active = !st.a1_only || w >= NW / 2;
    if (active) {
      bf16* x = s.x(w);
      bf16* dst = st.store + int64_t(w) * RW * D;
      for (int e = lane(); e < RW * D / 8; e += 32) {
        const int r = e / (D / 8), c = (e % (D / 8)) * 8;
        *reinterpret_cast<uint4*>(dst + r * D + c) =
            *reinterpret_cast<const uint4*>(x + r * pad(D) + c);
      }
      if (st.trans) warp_transition_in_place<D, MT>(x, s.P + (i & 1) * D * pad(D));
    }
    if (i + 1 < nsteps) st = carry_step(p, i + 1, t, h, b);
  }
}

}  // namespace lcr::cuda::LCR_PATHK
