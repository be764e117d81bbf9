#include "kernels/attention/kokkos/sdpa.hpp"

#include <limits>
#include <type_traits>

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/base/error.hpp"
#include "kernels/base/team_policy.hpp"

namespace lcr {
namespace {

using TeamPolicy = DynamicTeamPolicy;
using Member = TeamPolicy::member_type;
template <class T>
using Scratch2 = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace::scratch_memory_space,
                              Kokkos::MemoryUnmanaged>;
template <class T>
using Scratch1 =
    Kokkos::View<T*, Kokkos::LayoutRight, ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;

constexpr int kTileQ = 32;  // query rows per team
constexpr int kTileK = 64;  // key rows per scratch tile

// Level-0 scratch is small on GPUs (~48 KiB); anything bigger goes to level 1.
int scratch_level(size_t bytes) { return bytes <= 32 * 1024 ? 0 : 1; }

// Logit of one (query row, key row) pair before masking; shared by all three passes so
// forward and backward recompute exactly the same number.
template <class T>
struct Logit {
  SdpaArgs<T> a;
  KOKKOS_INLINE_FUNCTION T operator()(T dot, int b, int h, int i, int j, int64_t pi,
                                      int64_t pj) const {
    T x = a.scale * dot;
    if (a.alibi_slopes.extent(0) > 0) x -= a.alibi_slopes(h) * T(pi - pj);
    if (a.bias_q.extent(0) > 0) x += a.bias_q(b, i, h) - a.bias_k(b, j, h);
    if (a.softcap > T(0)) x = a.softcap * kmath::tanh(x / a.softcap);
    return x;
  }
  // d s / d x: 1 without softcap, 1 - tanh^2 with it.
  KOKKOS_INLINE_FUNCTION T dcap(T s) const {
    if (a.softcap <= T(0)) return T(1);
    const T t = s / a.softcap;
    return T(1) - t * t;
  }
};

// Below this exponent exp() is subnormal: such a probability is treated as 0. Its terms
// would be below half an ulp of any normal accumulator, and subnormal arithmetic runs tens
// of times slower on CPUs (GOAT's long-range prior pushes most logits there at L >= 4K).
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T exp_floor() {
  return std::is_same_v<T, float> ? T(-87.33) : T(-708.39);  // ln of the smallest normal
}

// out[c] = sum_d x[d] Mt(d, c) for c < n, each sum taken over d in order (the plain dot
// product's rounding); the inner loop runs along Mt's contiguous rows.
template <class T, class M>
KOKKOS_INLINE_FUNCTION void dots(T* KOKKOS_RESTRICT out, const T* KOKKOS_RESTRICT x, const M& Mt,
                                 int D, int n) {
  for (int c = 0; c < n; ++c) out[c] = T(0);
  for (int d = 0; d < D; ++d) {
    const T xd = x[d];
    const T* KOKKOS_RESTRICT row = &Mt(d, 0);
    for (int c = 0; c < n; ++c) out[c] += xd * row[c];
  }
}

// y[d] += alpha x[d] for d < n.
template <class T>
KOKKOS_INLINE_FUNCTION void axpy(T* KOKKOS_RESTRICT y, T alpha, const T* KOKKOS_RESTRICT x, int n) {
  for (int d = 0; d < n; ++d) y[d] += alpha * x[d];
}

template <class T>
struct Forward {
  SdpaArgs<T> a;
  View4<T> o;
  View3<T> lse;
  int H, Hkv, Lq, Lk, D, Dv, nqt, level;
  T neg_inf;

  static size_t scratch_bytes(int D, int Dv) {
    return Scratch2<T>::shmem_size(kTileQ, D) + Scratch2<T>::shmem_size(D, kTileK) +
           Scratch2<T>::shmem_size(kTileK, Dv) + Scratch2<T>::shmem_size(kTileQ, Dv) +
           Scratch2<T>::shmem_size(kTileQ, kTileK) + 2 * Scratch1<T>::shmem_size(kTileQ);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    // Tile-major, last query tile first: under a causal mask it has the most keys, so the
    // dynamic schedule hands out the longest work first and short tiles fill in at the end.
    const int nbh = t.league_size() / nqt;
    const int qt = nqt - 1 - t.league_rank() / nbh;
    const int bh = t.league_rank() % nbh;
    const int h = bh % H, b = bh / H, hk = h / (H / Hkv);
    const int i0 = qt * kTileQ;
    const int nq = (Lq - i0) < kTileQ ? (Lq - i0) : kTileQ;
    // Kt [D, kTileK]: the key tile transposed, so a row's logits over the tile's keys are
    // contiguous vector updates (S(r, :) += q_d Kt(d, :)) with each dot still summed over d
    // in order; the CPU vectorises them, the result is the plain loop's to the bit.
    Scratch2<T> Qs(t.team_scratch(level), kTileQ, D), Kt(t.team_scratch(level), D, kTileK);
    Scratch2<T> Vs(t.team_scratch(level), kTileK, Dv), acc(t.team_scratch(level), kTileQ, Dv);
    Scratch2<T> S(t.team_scratch(level), kTileQ, kTileK);
    Scratch1<T> m(t.team_scratch(level), kTileQ), l(t.team_scratch(level), kTileQ);
    const Logit<T> logit{a};

    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
      Kokkos::parallel_for(Kokkos::ThreadVectorRange(t, D),
                           [&](int d) { Qs(r, d) = a.q(b, i0 + r, h, d); });
    });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
      m(r) = neg_inf;
      l(r) = T(0);
      for (int d = 0; d < Dv; ++d) acc(r, d) = T(0);
    });
    // Keys past the tile's last query position are masked for every row: stop there.
    int64_t jend = a.q_pos0 + i0 + nq - a.k_pos0;
    if (jend > Lk) jend = Lk;
    for (int j0 = 0; j0 < jend; j0 += kTileK) {
      const int nk = (jend - j0) < kTileK ? int(jend - j0) : kTileK;
      t.team_barrier();
      // Key rows over the team's threads, a row's elements over vector lanes (no index
      // division per element).
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk), [&](int c) {
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(t, D),
                             [&](int d) { Kt(d, c) = a.k(b, j0 + c, hk, d); });
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(t, Dv),
                             [&](int d) { Vs(c, d) = a.v(b, j0 + c, hk, d); });
      });
      t.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
        const int64_t pi = a.q_pos0 + i0 + r;
        T* KOKKOS_RESTRICT srow = &S(r, 0);
        dots(srow, &Qs(r, 0), Kt, D, nk);
        T mx = m(r);
        for (int c = 0; c < nk; ++c) {
          const int64_t pj = a.k_pos0 + j0 + c;
          if (pj > pi) {
            srow[c] = neg_inf;
            continue;
          }
          const T s = logit(srow[c], b, h, i0 + r, j0 + c, pi, pj);
          srow[c] = s;
          if (s > mx) mx = s;
        }
        if (mx == neg_inf) return;  // nothing visible to this row yet
        const T corr = m(r) == neg_inf ? T(0) : kmath::exp(m(r) - mx);
        T lsum = l(r) * corr;
        T* KOKKOS_RESTRICT arow = &acc(r, 0);
        for (int d = 0; d < Dv; ++d) arow[d] *= corr;
        for (int c = 0; c < nk; ++c) {
          if (srow[c] - mx < exp_floor<T>()) continue;  // masked (-inf) or underflowing
          const T p = kmath::exp(srow[c] - mx);
          lsum += p;
          axpy(arow, p, &Vs(c, 0), Dv);
        }
        l(r) = lsum;
        m(r) = mx;
      });
    }
    t.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
      const bool empty = l(r) == T(0);
      const T inv = empty ? T(0) : T(1) / l(r);
      for (int d = 0; d < Dv; ++d) o(b, i0 + r, h, d) = acc(r, d) * inv;
      lse(b, h, i0 + r) = empty ? neg_inf : m(r) + kmath::log(l(r));
    });
  }
};

// dK, dV (and dbias_k) for one key tile of one KV head, summed over the query heads of
// its GQA group and over every query tile that can see the key tile.
template <class T>
struct BackwardKV {
  SdpaArgs<T> a;
  View3<const T> lse, delta;
  View4<const T> dout;
  View4<T> dk, dv;
  View3<T> dbias_k;
  int H, Hkv, Lq, Lk, D, Dv, nkt, level;
  T neg_inf;

  static size_t scratch_bytes(int D, int Dv) {
    return Scratch2<T>::shmem_size(kTileK, D) + Scratch2<T>::shmem_size(kTileK, Dv) +
           Scratch2<T>::shmem_size(kTileK, D) + Scratch2<T>::shmem_size(kTileK, Dv) +
           Scratch2<T>::shmem_size(kTileQ, D) + Scratch2<T>::shmem_size(kTileQ, Dv) +
           Scratch2<T>::shmem_size(D, kTileQ) + Scratch2<T>::shmem_size(Dv, kTileQ) +
           2 * Scratch2<T>::shmem_size(kTileK, kTileQ) + Scratch1<T>::shmem_size(kTileK) +
           2 * Scratch1<T>::shmem_size(kTileQ);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    // Tile-major, first key tile first: under a causal mask the most queries see it.
    const int nbh = t.league_size() / nkt;
    const int kt = t.league_rank() / nbh;
    const int bh = t.league_rank() % nbh;
    const int hk = bh % Hkv, b = bh / Hkv, G = H / Hkv;
    const int j0 = kt * kTileK;
    const int nk = (Lk - j0) < kTileK ? (Lk - j0) : kTileK;
    Scratch2<T> Ks(t.team_scratch(level), kTileK, D), Vs(t.team_scratch(level), kTileK, Dv);
    Scratch2<T> dKs(t.team_scratch(level), kTileK, D), dVs(t.team_scratch(level), kTileK, Dv);
    Scratch2<T> Qs(t.team_scratch(level), kTileQ, D), dOs(t.team_scratch(level), kTileQ, Dv);
    // Qt [D, kTileQ], dOt [Dv, kTileQ]: the query tile transposed, so a key's logits and dP
    // over the tile's rows are vector updates (dots()); S, dP [kTileK, kTileQ] hold them.
    Scratch2<T> Qt(t.team_scratch(level), D, kTileQ), dOt(t.team_scratch(level), Dv, kTileQ);
    Scratch2<T> S(t.team_scratch(level), kTileK, kTileQ), dP(t.team_scratch(level), kTileK, kTileQ);
    Scratch1<T> dbk(t.team_scratch(level), kTileK);
    Scratch1<T> lse_s(t.team_scratch(level), kTileQ), del_s(t.team_scratch(level), kTileQ);
    const Logit<T> logit{a};

    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk), [&](int c) {
      for (int d = 0; d < D; ++d) {
        Ks(c, d) = a.k(b, j0 + c, hk, d);
        dKs(c, d) = T(0);
      }
      for (int d = 0; d < Dv; ++d) {
        Vs(c, d) = a.v(b, j0 + c, hk, d);
        dVs(c, d) = T(0);
      }
    });
    // First query row whose position reaches this tile's first key.
    int64_t istart = a.k_pos0 + j0 - a.q_pos0;
    if (istart < 0) istart = 0;
    const int qt0 = int(istart / kTileQ);
    for (int g = 0; g < G; ++g) {
      const int h = hk * G + g;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk), [&](int c) { dbk(c) = T(0); });
      for (int i0 = qt0 * kTileQ; i0 < Lq; i0 += kTileQ) {
        const int nq = (Lq - i0) < kTileQ ? (Lq - i0) : kTileQ;
        t.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
          for (int d = 0; d < D; ++d) Qt(d, r) = Qs(r, d) = a.q(b, i0 + r, h, d);
          for (int d = 0; d < Dv; ++d) dOt(d, r) = dOs(r, d) = dout(b, i0 + r, h, d);
          lse_s(r) = lse(b, h, i0 + r);
          del_s(r) = delta(b, h, i0 + r);
        });
        t.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk), [&](int c) {
          const int64_t pj = a.k_pos0 + j0 + c;
          T* KOKKOS_RESTRICT srow = &S(c, 0);
          T* KOKKOS_RESTRICT dprow = &dP(c, 0);
          dots(srow, &Ks(c, 0), Qt, D, nq);
          dots(dprow, &Vs(c, 0), dOt, Dv, nq);
          T* KOKKOS_RESTRICT dvrow = &dVs(c, 0);
          T* KOKKOS_RESTRICT dkrow = &dKs(c, 0);
          for (int r = 0; r < nq; ++r) {
            const int64_t pi = a.q_pos0 + i0 + r;
            if (pj > pi || lse_s(r) == neg_inf) continue;
            const T s = logit(srow[r], b, h, i0 + r, j0 + c, pi, pj);
            if (s - lse_s(r) < exp_floor<T>()) continue;
            const T p = kmath::exp(s - lse_s(r));
            axpy(dvrow, p, &dOs(r, 0), Dv);
            const T dx = p * (dprow[r] - del_s(r)) * logit.dcap(s);
            axpy(dkrow, a.scale * dx, &Qs(r, 0), D);
            dbk(c) -= dx;
          }
        });
      }
      t.team_barrier();
      if (dbias_k.extent(0) > 0)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk),
                             [&](int c) { dbias_k(b, j0 + c, h) = dbk(c); });
    }
    t.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk), [&](int c) {
      for (int d = 0; d < D; ++d) dk(b, j0 + c, hk, d) = dKs(c, d);
      for (int d = 0; d < Dv; ++d) dv(b, j0 + c, hk, d) = dVs(c, d);
    });
  }
};

// dQ (and dbias_q) for one query tile of one head.
template <class T>
struct BackwardQ {
  SdpaArgs<T> a;
  View3<const T> lse, delta;
  View4<const T> dout;
  View4<T> dq;
  View3<T> dbias_q;
  int H, Hkv, Lq, Lk, D, Dv, nqt, level;
  T neg_inf;

  static size_t scratch_bytes(int D, int Dv) {
    return 2 * Scratch2<T>::shmem_size(kTileQ, D) + Scratch2<T>::shmem_size(kTileQ, Dv) +
           Scratch2<T>::shmem_size(kTileK, D) + Scratch2<T>::shmem_size(D, kTileK) +
           Scratch2<T>::shmem_size(Dv, kTileK) + 2 * Scratch2<T>::shmem_size(kTileQ, kTileK);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    // Tile-major, last query tile first: under a causal mask it has the most keys, so the
    // dynamic schedule hands out the longest work first and short tiles fill in at the end.
    const int nbh = t.league_size() / nqt;
    const int qt = nqt - 1 - t.league_rank() / nbh;
    const int bh = t.league_rank() % nbh;
    const int h = bh % H, b = bh / H, hk = h / (H / Hkv);
    const int i0 = qt * kTileQ;
    const int nq = (Lq - i0) < kTileQ ? (Lq - i0) : kTileQ;
    // Ks [kTileK, D] for dQ += dx K; Kt [D, kTileK] and Vt [Dv, kTileK] (the tile
    // transposed) so a row's logits and dP over the tile's keys are vector updates (dots()).
    Scratch2<T> Qs(t.team_scratch(level), kTileQ, D), dQs(t.team_scratch(level), kTileQ, D);
    Scratch2<T> dOs(t.team_scratch(level), kTileQ, Dv);
    Scratch2<T> Ks(t.team_scratch(level), kTileK, D), Kt(t.team_scratch(level), D, kTileK);
    Scratch2<T> Vt(t.team_scratch(level), Dv, kTileK);
    Scratch2<T> S(t.team_scratch(level), kTileQ, kTileK), dP(t.team_scratch(level), kTileQ, kTileK);
    const Logit<T> logit{a};

    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
      for (int d = 0; d < D; ++d) {
        Qs(r, d) = a.q(b, i0 + r, h, d);
        dQs(r, d) = T(0);
      }
      for (int d = 0; d < Dv; ++d) dOs(r, d) = dout(b, i0 + r, h, d);
    });
    int64_t jend = a.q_pos0 + i0 + nq - a.k_pos0;
    if (jend > Lk) jend = Lk;
    for (int j0 = 0; j0 < jend; j0 += kTileK) {
      const int nk = (jend - j0) < kTileK ? int(jend - j0) : kTileK;
      t.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nk), [&](int c) {
        for (int d = 0; d < D; ++d) Kt(d, c) = Ks(c, d) = a.k(b, j0 + c, hk, d);
        for (int d = 0; d < Dv; ++d) Vt(d, c) = a.v(b, j0 + c, hk, d);
      });
      t.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
        const int64_t pi = a.q_pos0 + i0 + r;
        const T lse_r = lse(b, h, i0 + r), del_r = delta(b, h, i0 + r);
        if (lse_r == neg_inf) return;
        T* KOKKOS_RESTRICT srow = &S(r, 0);
        T* KOKKOS_RESTRICT dprow = &dP(r, 0);
        dots(srow, &Qs(r, 0), Kt, D, nk);
        dots(dprow, &dOs(r, 0), Vt, Dv, nk);
        T* KOKKOS_RESTRICT dqrow = &dQs(r, 0);
        T dbq = T(0);
        for (int c = 0; c < nk; ++c) {
          const int64_t pj = a.k_pos0 + j0 + c;
          if (pj > pi) continue;
          const T s = logit(srow[c], b, h, i0 + r, j0 + c, pi, pj);
          if (s - lse_r < exp_floor<T>()) continue;
          const T p = kmath::exp(s - lse_r);
          const T dx = p * (dprow[c] - del_r) * logit.dcap(s);
          axpy(dqrow, a.scale * dx, &Ks(c, 0), D);
          dbq += dx;
        }
        if (dbias_q.extent(0) > 0) dbias_q(b, i0 + r, h) += dbq;
      });
    }
    t.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, nq), [&](int r) {
      for (int d = 0; d < D; ++d) dq(b, i0 + r, h, d) = dQs(r, d);
    });
  }
};

int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }

template <class F>
void launch(F f, int league, size_t bytes) {
  TeamPolicy policy(league, Kokkos::AUTO);
  policy.set_scratch_size(f.level, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for("lcr::sdpa", policy, f);
}

}  // namespace

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
  const int nqt = ceil_div(Lq, kTileQ);
  const size_t bytes = Forward<T>::scratch_bytes(D, Dv);
  Forward<T> f{a,
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
  if (Lk > 0) {
    const int nkt = ceil_div(Lk, kTileK);
    const size_t bytes = BackwardKV<T>::scratch_bytes(D, Dv);
    BackwardKV<T> f{
        a,   lse, delta, dout, dk, dv, dbias_k, H, Hkv, Lq, Lk, D, Dv, nkt, scratch_level(bytes),
        ninf};
    launch(f, B * Hkv * nkt, bytes);
  }
  if (Lq > 0) {
    const int nqt = ceil_div(Lq, kTileQ);
    const size_t bytes = BackwardQ<T>::scratch_bytes(D, Dv);
    BackwardQ<T> f{
        a, lse, delta, dout, dq, dbias_q, H, Hkv, Lq, Lk, D, Dv, nqt, scratch_level(bytes), ninf};
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
