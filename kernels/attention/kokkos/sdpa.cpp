#include "kernels/attention/kokkos/sdpa.hpp"

#include <limits>
#include <string>

#include "kernels/attention/kokkos/sdpa_backward_gpu.hpp"
#include "kernels/attention/kokkos/sdpa_forward_gpu.hpp"
#include "kernels/attention/kokkos/sdpa_team.hpp"
#include "kernels/base/error.hpp"

namespace lcr {
namespace {

using namespace sdpa_detail;
template <class T>
struct Forward {
  SdpaArgs<T> a;
  View4<const T> kt;  // [B Hkv, Lk tiles, D, bk]: K transposed per key tile
  View4<T> o;
  View3<T> lse;
  int H, Hkv, Lq, Lk, D, Dv, nqt, level;
  T neg_inf;

  static size_t scratch_bytes(int D, int Dv) {
    const int Dvp = tile::round_up(Dv, tile::block_cols<T>());
    return scratch2<T>(kTileQ, D) + scratch2<T>(kTileK, Dvp) + scratch2<T>(kTileQ, Dvp) +
           scratch2<T>(kTileQ, kTileK) + 2 * Scratch1<T>::shmem_size(kTileQ);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    constexpr int CB = tile::block_cols<T>(), R = tile::kBlockRows;
    constexpr int bq = kTileQ, bk = kTileK;
    const auto w = tile_of(t.league_rank(), t.league_size(), nqt, true);
    const int h = w.bh % H, b = w.bh / H, hk = h / (H / Hkv), bhk = b * Hkv + hk;
    const int i0 = w.tile * bq;
    const int nq = (Lq - i0) < bq ? (Lq - i0) : bq;
    const int mq = tile::round_up(nq, R), Dvp = tile::round_up(Dv, CB);
    const int ldq = D, lda = Dvp, lds = bk;
    // Qs [bq, ldq], Vs [bk, Dvp], acc [bq, lda] (the unnormalised output), S [bq, lds]
    // (logits, then P); m, l: the rows' running max and sum. K^T is read in place.
    Scratch2<T> Qs(t.team_scratch(level), bq, ldq);
    Scratch2<T> Vs(t.team_scratch(level), bk, Dvp), acc(t.team_scratch(level), bq, lda);
    Scratch2<T> S(t.team_scratch(level), bq, lds);
    Scratch1<T> m(t.team_scratch(level), bq), l(t.team_scratch(level), bq);
    const Logit<T> logit{a};

    load_rows(t, Qs.data(), ldq, mq, nq, D, [&](int r) { return &a.q(b, i0 + r, h, 0); });
    zero_rows(t, acc.data(), lda, mq);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
      m(r) = neg_inf;
      l(r) = T(0);
    });
    // Keys past the tile's last query position are masked for every row: stop there.
    int64_t jend = a.q_pos0 + i0 + nq - a.k_pos0;
    if (jend > Lk) jend = Lk;
    for (int j0 = 0; j0 < jend; j0 += bk) {
      const int nk = (jend - j0) < bk ? int(jend - j0) : bk;
      const int nkp = tile::round_up(nk, CB);
      const T* const kblock = &kt(bhk, j0 / bk, 0, 0);
      t.team_barrier();
      load_rows(t, Vs.data(), Dvp, nk, nk, Dv, [&](int c) { return &a.v(b, j0 + c, hk, 0); });
      tile::gemm<false>(t, S.data(), lds, Qs.data(), ldq, kblock, bk, mq, nkp, D);
      t.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, mq), [&](int r) {
        T* KOKKOS_RESTRICT srow = &S(r, 0);
        // Keys c < nvis are visible to this row (causal: p_j <= p_i); padding rows see none.
        const int64_t pi = a.q_pos0 + i0 + r, pj0 = a.k_pos0 + j0;
        const int64_t vis = r < nq ? pi - pj0 + 1 : 0;
        const int nvis = vis < 0 ? 0 : (vis < nk ? int(vis) : nk);
        logit.query_row(srow, 0, nvis, b, h, i0 + r, pi, j0, pj0);
        const T m0 = r < nq ? m(r) : neg_inf;
        const T mx = tile::max_of(srow, nvis, m0);
        // s - max, masked -inf: P; a row with nothing visible yet gets P = 0.
        for (int c = 0; c < nkp; ++c) srow[c] = c < nvis && mx != neg_inf ? srow[c] - mx : neg_inf;
        tile::exp_or_zero(srow, nkp);
        if (nvis == 0 || mx == neg_inf) return;
        const T corr = m0 == neg_inf ? T(0) : kmath::exp(m0 - mx);
        l(r) = l(r) * corr + tile::sum_of(srow, nvis);
        m(r) = mx;
        T* KOKKOS_RESTRICT arow = &acc(r, 0);
        for (int d = 0; d < Dvp; ++d) arow[d] *= corr;
      });
      t.team_barrier();
      tile::gemm<true>(t, acc.data(), lda, S.data(), lds, Vs.data(), Dvp, mq, Dvp, nk);
    }
    t.team_barrier();
    store_rows(
        t, acc.data(), lda, nq, Dv, [&](int r) { return &o(b, i0 + r, h, 0); },
        [&](int r) { return l(r) == T(0) ? T(0) : T(1) / l(r); });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
      lse(b, h, i0 + r) = l(r) == T(0) ? neg_inf : m(r) + kmath::log(l(r));
    });
  }
};

// dK, dV (and dbias_k) for one key tile of one KV head, summed over the query heads of
// its GQA group and over every query tile that can see the key tile. With dq_acc (the single
// pass), a team takes a whole KV head, key tile after key tile, and also adds each pair's
// scale dS K to its heads' dQ rows (and dS's row sums to dbias_q): it alone writes them, so
// there are no atomics, and the 2 products of S and dP that BackwardQ would redo are saved.
template <class T>
struct BackwardKV {
  SdpaArgs<T> a;
  View4<const T> qt, dot;  // [B H, Lq tiles, D or Dv, kTileQ]: Q, dO transposed per tile
  View3<const T> lse, delta;
  View4<const T> dout;
  View4<T> dk, dv;
  View3<T> dbias_k;
  View3<T> dq_acc;   // [B H, Lq rounded to kTileQ, Dp] or empty: the single pass's dQ
  View3<T> dbias_q;  // the single pass's (else BackwardQ's)
  int H, Hkv, Lq, Lk, D, Dv, nkt, level;
  T neg_inf;

  static size_t scratch_bytes(int D, int Dv) {
    const int CB = tile::block_cols<T>();
    const int Dp = tile::round_up(D, CB), Dvp = tile::round_up(Dv, CB);
    return scratch2<T>(kTileK, Dp) + scratch2<T>(kTileK, Dv) + scratch2<T>(kTileK, Dp) +
           scratch2<T>(kTileK, Dvp) + scratch2<T>(kTileQ, Dp) + scratch2<T>(kTileQ, Dvp) +
           2 * scratch2<T>(kTileK, kTileQ) + Scratch1<T>::shmem_size(kTileK) +
           2 * Scratch1<T>::shmem_size(kTileQ);
  }

  // Ks [kTileK, Dp] (zero past D: the dQ product's right operand), Vs [kTileK, Dv];
  // dKs [kTileK, Dp], dVs [kTileK, Dvp] accumulate; Qs [kTileQ, Dp], dOs [kTileQ, Dvp];
  // S, dP [kTileK, kTileQ]: the logits and dP of (key, query) pairs, then P and scale * dS;
  // lse_s, del_s: the query tile's rows.
  struct Tiles {
    Scratch2<T> Ks, Vs, dKs, dVs, Qs, dOs, S, dP;
    Scratch1<T> dbk, lse_s, del_s;
  };

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    constexpr int CB = tile::block_cols<T>();
    const int Dp = tile::round_up(D, CB), Dvp = tile::round_up(Dv, CB);
    const auto sp = t.team_scratch(level);
    const Tiles s{Scratch2<T>(sp, kTileK, Dp),     Scratch2<T>(sp, kTileK, Dv),
                  Scratch2<T>(sp, kTileK, Dp),     Scratch2<T>(sp, kTileK, Dvp),
                  Scratch2<T>(sp, kTileQ, Dp),     Scratch2<T>(sp, kTileQ, Dvp),
                  Scratch2<T>(sp, kTileK, kTileQ), Scratch2<T>(sp, kTileK, kTileQ),
                  Scratch1<T>(sp, kTileK),         Scratch1<T>(sp, kTileQ),
                  Scratch1<T>(sp, kTileQ)};
    if (dq_acc.extent(0) > 0) {
      for (int jt = 0; jt < nkt; ++jt) key_tile(t, s, t.league_rank(), jt);
    } else {
      // First key tile first: under a causal mask the most queries see it.
      const auto w = tile_of(t.league_rank(), t.league_size(), nkt, false);
      key_tile(t, s, w.bh, w.tile);
    }
  }

  KOKKOS_FUNCTION void key_tile(const Member& t, const Tiles& s, int bhk, int jt) const {
    constexpr int CB = tile::block_cols<T>(), R = tile::kBlockRows;
    const int hk = bhk % Hkv, b = bhk / Hkv, G = H / Hkv;
    const int j0 = jt * kTileK;
    const int nk = (Lk - j0) < kTileK ? (Lk - j0) : kTileK;
    const int mk = tile::round_up(nk, R);
    const int Dp = tile::round_up(D, CB), Dvp = tile::round_up(Dv, CB);
    const bool single = dq_acc.extent(0) > 0;
    const Logit<T> logit{a};

    t.team_barrier();  // the last key tile's stores are done with the tiles
    load_rows(t, s.Ks.data(), Dp, mk, nk, D, [&](int c) { return &a.k(b, j0 + c, hk, 0); });
    load_rows(t, s.Vs.data(), Dv, mk, nk, Dv, [&](int c) { return &a.v(b, j0 + c, hk, 0); });
    zero_rows(t, s.dKs.data(), Dp, mk);
    zero_rows(t, s.dVs.data(), Dvp, mk);
    // First query row whose position reaches this tile's first key.
    int64_t istart = a.k_pos0 + j0 - a.q_pos0;
    if (istart < 0) istart = 0;
    const int qt0 = int(istart / kTileQ);
    for (int g = 0; g < G; ++g) {
      const int h = hk * G + g, bh = b * H + h;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, mk), [&](int c) { s.dbk(c) = T(0); });
      for (int i0 = qt0 * kTileQ; i0 < Lq; i0 += kTileQ) {
        const int nq = (Lq - i0) < kTileQ ? (Lq - i0) : kTileQ;
        const int nqp = tile::round_up(nq, CB);
        t.team_barrier();
        load_rows(t, s.Qs.data(), Dp, nq, nq, D, [&](int r) { return &a.q(b, i0 + r, h, 0); });
        load_rows(t, s.dOs.data(), Dvp, nq, nq, Dv, [&](int r) { return &dout(b, i0 + r, h, 0); });
        // An empty row (lse -inf) and the padding get lse +inf: P = exp(s - inf) = 0.
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nqp), [&](int r) {
          const T l = r < nq ? lse(b, h, i0 + r) : neg_inf;
          s.lse_s(r) = l == neg_inf ? -neg_inf : l;
          s.del_s(r) = r < nq ? delta(b, h, i0 + r) : T(0);
        });
        tile::gemm<false>(t, s.S.data(), kTileQ, s.Ks.data(), Dp, &qt(bh, i0 / kTileQ, 0, 0),
                          kTileQ, mk, nqp, D);
        tile::gemm<false>(t, s.dP.data(), kTileQ, s.Vs.data(), Dv, &dot(bh, i0 / kTileQ, 0, 0),
                          kTileQ, mk, nqp, Dv);
        t.team_barrier();
        // Row c: key c against the tile's queries r >= lo (causal: p_i >= p_j).
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, mk), [&](int c) {
          const int64_t pj = a.k_pos0 + j0 + c, pi0 = a.q_pos0 + i0;
          const int64_t first = pj - pi0;
          const int lo = first < 0 ? 0 : (first < nq ? int(first) : nq);
          const int hi = c < nk ? nq : lo;
          logit.key_row(&s.S(c, 0), lo, hi, b, h, j0 + c, pj, i0, pi0);
          s.dbk(c) -=
              softmax_grad_row<true>(&s.S(c, 0), &s.dP(c, 0), lo, hi, nqp, &s.lse_s(0), &s.del_s(0),
                                     a.scale, a.softcap, dbias_k.extent(0) > 0);
        });
        t.team_barrier();
        tile::gemm<true>(t, s.dVs.data(), Dvp, s.S.data(), kTileQ, s.dOs.data(), Dvp, mk, Dvp, nq);
        tile::gemm<true>(t, s.dKs.data(), Dp, s.dP.data(), kTileQ, s.Qs.data(), Dp, mk, Dp, nq);
        if (single) {
          // dQ rows i0.. += (scale dS) K: dS read transposed from dP [key, query].
          tile::gemm<true>(t, &dq_acc(bh, i0, 0), Dp, s.dP.data(), 1, kTileQ, s.Ks.data(), Dp,
                           tile::round_up(nq, R), Dp, nk);
          if (dbias_q.extent(0) > 0)  // += sum_j dS_ij, over keys in order
            Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
              T sum = T(0);
              for (int c = 0; c < nk; ++c) sum += s.dP(c, r);
              dbias_q(b, i0 + r, h) += sum / a.scale;
            });
        }
      }
      t.team_barrier();
      if (dbias_k.extent(0) > 0)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk),
                             [&](int c) { dbias_k(b, j0 + c, h) = s.dbk(c); });
    }
    t.team_barrier();
    const auto one = [](int) { return T(1); };
    store_rows(
        t, s.dKs.data(), Dp, nk, D, [&](int c) { return &dk(b, j0 + c, hk, 0); }, one);
    store_rows(
        t, s.dVs.data(), Dvp, nk, Dv, [&](int c) { return &dv(b, j0 + c, hk, 0); }, one);
  }
};

// dQ (and dbias_q) for one query tile of one head.
template <class T>
struct BackwardQ {
  SdpaArgs<T> a;
  View4<const T> kt, vt;  // [B Hkv, Lk tiles, D or Dv, kTileK]: K, V transposed per tile
  View3<const T> lse, delta;
  View4<const T> dout;
  View4<T> dq;
  View3<T> dbias_q;
  int H, Hkv, Lq, Lk, D, Dv, nqt, level;
  T neg_inf;

  static size_t scratch_bytes(int D, int Dv) {
    const int Dp = tile::round_up(D, tile::block_cols<T>());
    return scratch2<T>(kTileQ, D) + scratch2<T>(kTileQ, Dp) + scratch2<T>(kTileQ, Dv) +
           scratch2<T>(kTileK, Dp) + 2 * scratch2<T>(kTileQ, kTileK);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    constexpr int CB = tile::block_cols<T>(), R = tile::kBlockRows;
    const auto w = tile_of(t.league_rank(), t.league_size(), nqt, true);  // longest first
    const int h = w.bh % H, b = w.bh / H, hk = h / (H / Hkv), bhk = b * Hkv + hk;
    const int i0 = w.tile * kTileQ;
    const int nq = (Lq - i0) < kTileQ ? (Lq - i0) : kTileQ;
    const int mq = tile::round_up(nq, R), Dp = tile::round_up(D, CB);
    // Qs [kTileQ, D], dOs [kTileQ, Dv]; dQs [kTileQ, Dp] accumulates; Ks [kTileK, Dp] for
    // dQ += dS K; S, dP [kTileQ, kTileK].
    Scratch2<T> Qs(t.team_scratch(level), kTileQ, D), dQs(t.team_scratch(level), kTileQ, Dp);
    Scratch2<T> dOs(t.team_scratch(level), kTileQ, Dv), Ks(t.team_scratch(level), kTileK, Dp);
    Scratch2<T> S(t.team_scratch(level), kTileQ, kTileK), dP(t.team_scratch(level), kTileQ, kTileK);
    const Logit<T> logit{a};

    load_rows(t, Qs.data(), D, mq, nq, D, [&](int r) { return &a.q(b, i0 + r, h, 0); });
    load_rows(t, dOs.data(), Dv, mq, nq, Dv, [&](int r) { return &dout(b, i0 + r, h, 0); });
    zero_rows(t, dQs.data(), Dp, mq);
    int64_t jend = a.q_pos0 + i0 + nq - a.k_pos0;
    if (jend > Lk) jend = Lk;
    for (int j0 = 0; j0 < jend; j0 += kTileK) {
      const int nk = (jend - j0) < kTileK ? int(jend - j0) : kTileK;
      const int nkp = tile::round_up(nk, CB);
      t.team_barrier();
      load_rows(t, Ks.data(), Dp, nk, nk, D, [&](int c) { return &a.k(b, j0 + c, hk, 0); });
      tile::gemm<false>(t, S.data(), kTileK, Qs.data(), D, &kt(bhk, j0 / kTileK, 0, 0), kTileK, mq,
                        nkp, D);
      tile::gemm<false>(t, dP.data(), kTileK, dOs.data(), Dv, &vt(bhk, j0 / kTileK, 0, 0), kTileK,
                        mq, nkp, Dv);
      t.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, mq), [&](int r) {
        const int64_t pi = a.q_pos0 + i0 + r, pj0 = a.k_pos0 + j0;
        const T lse_r = r < nq ? lse(b, h, i0 + r) : neg_inf;
        const T del_r = r < nq ? delta(b, h, i0 + r) : T(0);
        // Keys c < hi are visible (causal); an empty row (lse -inf) or padding sees none.
        const int64_t vis = lse_r == neg_inf ? 0 : pi - pj0 + 1;
        const int hi = vis < 0 ? 0 : (vis < nk ? int(vis) : nk);
        logit.query_row(&S(r, 0), 0, hi, b, h, i0 + r, pi, j0, pj0);
        const T dsum = softmax_grad_row<false>(&S(r, 0), &dP(r, 0), 0, hi, nkp, &lse_r, &del_r,
                                               a.scale, a.softcap, dbias_q.extent(0) > 0);
        if (dbias_q.extent(0) > 0 && r < nq) dbias_q(b, i0 + r, h) += dsum;
      });
      t.team_barrier();
      tile::gemm<true>(t, dQs.data(), Dp, dP.data(), kTileK, Ks.data(), Dp, mq, Dp, nk);
    }
    t.team_barrier();
    store_rows(
        t, dQs.data(), Dp, nq, D, [&](int r) { return &dq(b, i0 + r, h, 0); },
        [](int) { return T(1); });
  }
};

SdpaForm g_form = SdpaForm::Automatic;

bool gpu_form() {
  return g_form == SdpaForm::Gpu || (g_form == SdpaForm::Automatic && tile::kGpuLayout);
}

// a CPU team takes what its backend allows (one thread on Serial).
template <class F>
void launch(F f, int league, size_t bytes) {
  TeamPolicy policy(league, Kokkos::AUTO);
  policy.set_scratch_size(f.level, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for("lcr::sdpa", policy, f);
}

// The first of `shapes` whose scratch (bytes(shape)) fits level 0, else the last (then in
// level 1). A CPU (the GPU form under test) takes CUDA's usual cap, so the tests reach the
// shapes that wide heads and float64 take on a GPU.
template <class Bytes>
GpuShape fitting_shape(std::initializer_list<GpuShape> shapes, Bytes bytes) {
  constexpr size_t kCudaLevel0 = 48 * 1024 - 1026 * 8 - 8;
  const size_t cap =
      tile::kGpuLayout ? Kokkos::TeamPolicy<ExecSpace>::scratch_size_max(0) : kCudaLevel0;
  for (const GpuShape& c : shapes)
    if (bytes(c) <= cap) return c;
  return *(shapes.end() - 1);
}

// A GPU-form kernel over `league` teams of sh.threads() (one on a CPU, which plays them all),
// compiled for at most kMaxThreads a team and kMinTeams teams an SM: the register cap that
// sets (65536 / (kMaxThreads kMinTeams)) trades occupancy against spills. Kokkos CUDA refuses
// that launch ("requested too large team size") where kMinTeams teams' scratch does not fit
// an SM's shared memory (about 40 KiB a team: 4 fit an H100's or an A100's, 2 an L40's);
// there the kernel runs compiled for one team an SM, its registers capped only by the ISA.
template <int kMaxThreads, int kMinTeams, class F>
void launch_gpu_form(const char* name, const F& f, int league, size_t bytes, const GpuShape& sh) {
  const int threads = tile::kGpuLayout ? sh.threads() : 1;
  auto run = [&](auto policy) {
    policy.set_scratch_size(f.level, Kokkos::PerTeam(bytes));
    if (policy.team_size_max(f, Kokkos::ParallelForTag()) < threads) return false;
    Kokkos::parallel_for(name, policy, f);
    return true;
  };
  using Dynamic = Kokkos::Schedule<Kokkos::Dynamic>;
  if (run(Kokkos::TeamPolicy<ExecSpace, Dynamic, Kokkos::LaunchBounds<kMaxThreads, kMinTeams>>(
          league, threads)))
    return;
  if constexpr (tile::kGpuLayout && kMinTeams > 1) {
    if (run(Kokkos::TeamPolicy<ExecSpace, Dynamic, Kokkos::LaunchBounds<kMaxThreads, 1>>(league,
                                                                                         threads)))
      return;
  }
  throw Error(std::string(name) + ": no team of " + std::to_string(threads) + " threads with " +
              std::to_string(bytes) + " bytes of scratch fits this GPU; report it with the GPU's " +
              "name (nvidia-smi -L)");
}

// Register chunks NC of a GPU-form thread (4 NC columns a pass of 32 NC): two up to 64
// columns, else four (more would spill), in passes past 128.
inline int register_chunks(int width) { return width <= 64 ? 2 : 4; }

// f(std::integral_constant<int, SC>, std::integral_constant<int, NC>) for run-time sc (one
// of SCs) and nc (2 or 4): the kernels instantiated are those.
template <int... SCs, class F>
void with_blocks(int sc, int nc, F&& f) {
  auto on_nc = [&](auto s) {
    if (nc == 2)
      f(s, std::integral_constant<int, 2>{});
    else
      f(s, std::integral_constant<int, 4>{});
  };
  ((sc == SCs ? on_nc(std::integral_constant<int, SCs>{}) : void()), ...);
}

// The GPU-form forward (sdpa_forward_gpu.hpp).
template <class T>
void sdpa_forward_gpu_form(const SdpaArgs<T>& a, const View4<T>& o, const View3<T>& lse) {
  const int B = a.q.extent(0), Lq = a.q.extent(1), H = a.q.extent(2), D = a.q.extent(3);
  const int Dv = a.v.extent(3), nc = register_chunks(Dv);
  const GpuShape sh = fitting_shape({{16, 4}, {16, 2}, {8, 4}, {8, 2}}, [&](const GpuShape& c) {
    return ForwardGpu<T, 4, 4>::scratch_bytes(c, D, 32 * nc);
  });
  with_blocks<4, 2>(sh.sc, nc, [&](auto sc, auto ncc) {
    using F = ForwardGpu<T, decltype(sc)::value, decltype(ncc)::value>;
    const int nqt = ceil_div(Lq, sh.rows()), npass = ceil_div(Dv, F::kDvc);
    const size_t bytes = F::scratch_bytes(sh, D, F::kDvc);
    const F f{a,
              transpose_heads(a.k, sh.cols()),
              o,
              lse,
              H,
              int(a.k.extent(2)),
              Lq,
              int(a.k.extent(1)),
              D,
              Dv,
              nqt,
              npass,
              scratch_level(bytes),
              sh,
              -std::numeric_limits<T>::infinity()};
    launch_gpu_form<128, 4>("lcr::sdpa_forward_gpu", f, B * H * nqt * npass, bytes, sh);
  });
}

// The GPU-form backward (sdpa_backward_gpu.hpp): the dK/dV kernel, then the dQ kernel. The
// dK/dV kernel keeps two gradient blocks in registers: uncapped it takes ~230 registers, and
// any cap that fits a fifth team on an SM spills.
template <class T>
void sdpa_backward_gpu_form(const SdpaArgs<T>& a, const View3<const T>& lse,
                            const View3<const T>& delta, const View4<const T>& dout,
                            const View4<T>& dq, const View4<T>& dk, const View4<T>& dv,
                            const View3<T>& dbias_q, const View3<T>& dbias_k) {
  const int B = a.q.extent(0), Lq = a.q.extent(1), H = a.q.extent(2), D = a.q.extent(3);
  const int Lk = a.k.extent(1), Hkv = a.k.extent(2), Dv = a.v.extent(3);
  const T ninf = -std::numeric_limits<T>::infinity();
  const std::initializer_list<GpuShape> shapes{{8, 2}, {4, 2}, {4, 1}};
  if (Lk > 0) {
    const int nc = register_chunks(D > Dv ? D : Dv);
    const GpuShape sh = fitting_shape(shapes, [&](const GpuShape& c) {
      return BackwardKVGpu<T, 1, 4>::scratch_bytes(c, D, Dv, 32 * nc);
    });
    with_blocks<2, 1>(sh.sc, nc, [&](auto sc, auto ncc) {
      using F = BackwardKVGpu<T, decltype(sc)::value, decltype(ncc)::value>;
      const int nkt = ceil_div(Lk, sh.rows());
      const int npass = ceil_div(D > Dv ? D : Dv, F::kDc);
      const size_t bytes = F::scratch_bytes(sh, D, Dv, F::kDc);
      const F f{a,
                transpose_heads(a.k, sh.rows()),
                transpose_heads(a.v, sh.rows()),
                transpose_heads(a.q, sh.cols()),
                transpose_heads(dout, sh.cols()),
                lse,
                delta,
                dout,
                dk,
                dv,
                dbias_k,
                H,
                Hkv,
                Lq,
                Lk,
                D,
                Dv,
                nkt,
                npass,
                scratch_level(bytes),
                sh,
                ninf};
      launch_gpu_form<64, 4>("lcr::sdpa_backward_kv_gpu", f, B * Hkv * nkt * npass, bytes, sh);
    });
  }
  if (Lq > 0) {
    const int nc = register_chunks(D);
    const GpuShape sh = fitting_shape(shapes, [&](const GpuShape& c) {
      return BackwardQGpu<T, 1, 4>::scratch_bytes(c, D, Dv, 32 * nc);
    });
    with_blocks<2, 1>(sh.sc, nc, [&](auto sc, auto ncc) {
      using F = BackwardQGpu<T, decltype(sc)::value, decltype(ncc)::value>;
      const int nqt = ceil_div(Lq, sh.rows()), npass = ceil_div(D, F::kDc);
      const size_t bytes = F::scratch_bytes(sh, D, Dv, F::kDc);
      const F f{a,
                transpose_heads(a.k, sh.cols()),
                transpose_heads(a.v, sh.cols()),
                transpose_heads(a.q, sh.rows()),
                transpose_heads(dout, sh.rows()),
                lse,
                delta,
                dq,
                dbias_q,
                H,
                Hkv,
                Lq,
                Lk,
                D,
                Dv,
                nqt,
                npass,
                scratch_level(bytes),
                sh,
                ninf};
      launch_gpu_form<64, 4>("lcr::sdpa_backward_q_gpu", f, B * H * nqt * npass, bytes, sh);
    });
  }
}

}  // namespace

void sdpa_use_form(SdpaForm form) { g_form = form; }
SdpaForm sdpa_form() { return g_form; }

template <class T>
void check_sdpa_args(const SdpaArgs<T>& a) {
  const auto B = a.q.extent(0), H = a.q.extent(2), D = a.q.extent(3);
  const auto Lk = a.k.extent(1), Hkv = a.k.extent(2);
  require(a.k.extent(0) == B && a.v.extent(0) == B, "q, k, v batch sizes differ: q ",
          shape_string(shape_of(a.q)), ", k ", shape_string(shape_of(a.k)), ", v ",
          shape_string(shape_of(a.v)));
  require(a.k.extent(3) == D, "q and k head widths differ: q ", shape_string(shape_of(a.q)), ", k ",
          shape_string(shape_of(a.k)));
  require(a.v.extent(1) == Lk && a.v.extent(2) == Hkv, "k and v shapes disagree: k ",
          shape_string(shape_of(a.k)), ", v ", shape_string(shape_of(a.v)));
  require(Hkv > 0 && H % Hkv == 0, "query heads (", H, ") must be a multiple of KV heads (", Hkv,
          ")");
  require(a.alibi_slopes.extent(0) == 0 || a.alibi_slopes.extent(0) == H,
          "alibi_slopes must have one slope per query head (", H, ")");
  require((a.bias_q.extent(0) == 0) == (a.bias_k.extent(0) == 0),
          "bias_q and bias_k must be given together");
  if (a.bias_q.extent(0) > 0)
    require(a.bias_q.extent(0) == B && a.bias_q.extent(1) == a.q.extent(1) &&
                a.bias_q.extent(2) == H && a.bias_k.extent(0) == B && a.bias_k.extent(1) == Lk &&
                a.bias_k.extent(2) == H,
            "bias lanes must be [B, Lq, H] and [B, Lk, H]");
  require(a.q_pos0 >= 0 && a.k_pos0 >= 0, "positions must be non-negative");
}

template <class T>
void sdpa_forward(const SdpaArgs<T>& a, const View4<T>& o, const View3<T>& lse) {
  check_sdpa_args(a);
  const int B = a.q.extent(0), Lq = a.q.extent(1), H = a.q.extent(2), D = a.q.extent(3);
  const int Lk = a.k.extent(1), Hkv = a.k.extent(2), Dv = a.v.extent(3);
  require(o.extent(0) == size_t(B) && o.extent(1) == size_t(Lq) && o.extent(2) == size_t(H) &&
              o.extent(3) == size_t(Dv),
          "output o must be [B, Lq, H, Dv]");
  if (B == 0 || Lq == 0 || H == 0) return;
  if (gpu_form()) {
    sdpa_forward_gpu_form(a, o, lse);
    return;
  }
  const int nqt = ceil_div(Lq, kTileQ);
  const size_t bytes = Forward<T>::scratch_bytes(D, Dv);
  Forward<T> f{a,
               transpose_heads(a.k, kTileK),
               o,
               lse,
               H,
               Hkv,
               Lq,
               Lk,
               D,
               Dv,
               nqt,
               scratch_level(bytes),
               -std::numeric_limits<T>::infinity()};
  launch(f, B * H * nqt, bytes);
}

template <class T>
void sdpa_row_delta(const View4<const T>& o, const View4<const T>& dout, const View3<T>& delta) {
  const int B = o.extent(0), L = o.extent(1), H = o.extent(2), Dv = o.extent(3);
  Kokkos::parallel_for(
      "lcr::sdpa_row_delta",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, H, L}),
      KOKKOS_LAMBDA(int b, int h, int i) {
        T s = T(0);
        for (int d = 0; d < Dv; ++d) s += o(b, i, h, d) * dout(b, i, h, d);
        delta(b, h, i) = s;
      });
}

template <class T>
void sdpa_backward(const SdpaArgs<T>& a, const View3<const T>& lse, const View3<const T>& delta,
                   const View4<const T>& dout, const View4<T>& dq, const View4<T>& dk,
                   const View4<T>& dv, const View3<T>& dbias_q, const View3<T>& dbias_k) {
  check_sdpa_args(a);
  const int B = a.q.extent(0), Lq = a.q.extent(1), H = a.q.extent(2), D = a.q.extent(3);
  const int Lk = a.k.extent(1), Hkv = a.k.extent(2), Dv = a.v.extent(3);
  const T ninf = -std::numeric_limits<T>::infinity();
  if (dbias_q.extent(0) > 0) Kokkos::deep_copy(dbias_q, T(0));
  if (B == 0) return;
  if (gpu_form()) {
    sdpa_backward_gpu_form(a, lse, delta, dout, dq, dk, dv, dbias_q, dbias_k);
    return;
  }
  // One pass (BackwardKV adds dQ too) when one team a KV head keeps every thread busy:
  // one thread, or at least two heads a thread. Else a team a key tile, then BackwardQ.
  const int threads = ExecSpace().concurrency();
  const bool one_pass =
      g_form == SdpaForm::CpuOnePass ||
      (g_form == SdpaForm::Automatic && (threads == 1 || int64_t(B) * Hkv >= 2 * int64_t(threads)));
  const bool single = Lk > 0 && Lq > 0 && one_pass;
  const int Dp = tile::round_up(D, tile::block_cols<T>());
  View3<T> dq_acc;
  if (single) dq_acc = View3<T>("lcr::sdpa_dq", B * H, ceil_div(Lq, kTileQ) * kTileQ, Dp);
  if (Lk > 0) {
    const int nkt = ceil_div(Lk, kTileK);
    const size_t bytes = BackwardKV<T>::scratch_bytes(D, Dv);
    BackwardKV<T> f{a,
                    transpose_heads(a.q),
                    transpose_heads(dout),
                    lse,
                    delta,
                    dout,
                    dk,
                    dv,
                    dbias_k,
                    dq_acc,
                    dbias_q,
                    H,
                    Hkv,
                    Lq,
                    Lk,
                    D,
                    Dv,
                    nkt,
                    scratch_level(bytes),
                    ninf};
    launch(f, single ? B * Hkv : B * Hkv * nkt, bytes);
  }
  if (single) {
    Kokkos::parallel_for(
        "lcr::sdpa_dq_store",
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B * H, Lq, D}),
        KOKKOS_LAMBDA(int bh, int i, int d) { dq(bh / H, i, bh % H, d) = dq_acc(bh, i, d); });
    return;
  }
  if (Lq > 0) {
    const int nqt = ceil_div(Lq, kTileQ);
    const size_t bytes = BackwardQ<T>::scratch_bytes(D, Dv);
    BackwardQ<T> f{a,
                   transpose_heads(a.k),
                   transpose_heads(a.v),
                   lse,
                   delta,
                   dout,
                   dq,
                   dbias_q,
                   H,
                   Hkv,
                   Lq,
                   Lk,
                   D,
                   Dv,
                   nqt,
                   scratch_level(bytes),
                   ninf};
    launch(f, B * H * nqt, bytes);
  }
}

template <class T>
void sdpa_apply_sink(const View1<const T>& sink, const View4<T>& o, const View3<T>& lse) {
  const int B = o.extent(0), L = o.extent(1), H = o.extent(2), Dv = o.extent(3);
  const T ninf = -std::numeric_limits<T>::infinity();
  Kokkos::parallel_for(
      "lcr::sdpa_apply_sink",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>({0, 0, 0}, {B, H, L}),
      KOKKOS_LAMBDA(int b, int h, int i) {
        const T old = lse(b, h, i), s = sink(h);
        const T mx = old > s ? old : s;
        const T nl = mx + kmath::log(kmath::exp(old - mx) + kmath::exp(s - mx));
        const T f = old == ninf ? T(0) : kmath::exp(old - nl);
        for (int d = 0; d < Dv; ++d) o(b, i, h, d) *= f;
        lse(b, h, i) = nl;
      });
}

template <class T>
void sdpa_sink_backward(const View1<const T>& sink, const View3<const T>& lse,
                        const View3<const T>& delta, const View1<T>& dsink) {
  const int B = lse.extent(0), H = lse.extent(1), L = lse.extent(2);
  Kokkos::parallel_for(
      "lcr::sdpa_sink_backward", Kokkos::RangePolicy<ExecSpace>(0, H), KOKKOS_LAMBDA(int h) {
        T g = T(0);
        for (int b = 0; b < B; ++b)
          for (int i = 0; i < L; ++i) g -= kmath::exp(sink(h) - lse(b, h, i)) * delta(b, h, i);
        dsink(h) = g;
      });
}

#define LCR_INSTANTIATE(T)                                                                         \
  template void check_sdpa_args<T>(const SdpaArgs<T>&);                                            \
  template void sdpa_forward<T>(const SdpaArgs<T>&, const View4<T>&, const View3<T>&);             \
  template void sdpa_row_delta<T>(const View4<const T>&, const View4<const T>&, const View3<T>&);  \
  template void sdpa_backward<T>(const SdpaArgs<T>&, const View3<const T>&, const View3<const T>&, \
                                 const View4<const T>&, const View4<T>&, const View4<T>&,          \
                                 const View4<T>&, const View3<T>&, const View3<T>&);               \
  template void sdpa_apply_sink<T>(const View1<const T>&, const View4<T>&, const View3<T>&);       \
  template void sdpa_sink_backward<T>(const View1<const T>&, const View3<const T>&,                \
                                      const View3<const T>&, const View1<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
