// Backward of the block quantities (blocks.hpp), per (batch, KV head, block), by
// recomputing T, E and the Gram matrix. Reverse-mode rules used (n x n matrices are
// lower / strictly lower as in blocks.hpp; masks applied where the forward applies them):
//   q~ = Q - C W, C = M T:        dC = -dq~ W^T, dW -= C^T dq~, dM += dC T^T, dT += M^T dC
//   intra S = Q K^T - M E:        dQ += G K, dK += G^T Q, dM -= G E^T, dE -= M^T G
//   M = lower(Q W^T):             dQ += dM W, dW += dM^T Q
//   k~ = K - E^T W:               dE -= W dk~^T, dW -= E dk~
//   E = T Nk, Nk = sLower(W K^T): dT += dE Nk^T, dNk = sLower(T^T dE), dW += dNk K,
//                                 dK += dNk^T W
//   P = I - W^T Y, Y = T^T W:     dY = -W dP, dW -= Y dP^T, dT += W dY^T, dW += T dY
//   T = Lam D:                    dLam = dT D, dbeta_c += sum_r dT_rc Lam_rc
//   Lam = (I + A)^-1:             dA = sLower(-Lam^T dLam Lam^T)
//   A = sLower(D Gm), Gm = W W^T: dbeta_r += sum_c dA_rc Gm_rc, dGm = D dA,
//                                 dW += (dGm + dGm^T) W
#include "kernels/schemes/path/blocks.hpp"
#include "kernels/schemes/path/logit.hpp"
#include "kernels/schemes/path/team_la.hpp"

namespace lcr::path {
namespace {

using la::Member;
using la::N;
using la::Tr;

template <class T>
struct BackwardKernel {
  View4<const T> w, q, k;
  View3<const T> beta;
  BlockAttention<T> att;
  BlockGrads<T> g;
  int L, H, Hkv, d, dv, blk, nb, level;
  bool has_q, has_k, has_att, has_fox, has_dqf, has_dkf, has_dp;

  static size_t scratch_bytes(int n, int d, int dv) {
    return 7 * Scratch2<T>::shmem_size(n, d) + 11 * Scratch2<T>::shmem_size(n, n) +
           3 * Scratch2<T>::shmem_size(n, dv) + 4 * Scratch1<T>::shmem_size(n);
  }

  KOKKOS_FUNCTION void operator()(const Member& t) const {
    const int m = t.league_rank() % nb, bh = t.league_rank() / nb;
    const int hk = bh % Hkv, b = bh / Hkv, s = m * blk, G = H / Hkv;
    const int n = L - s < blk ? L - s : blk;
    const auto lv = level;
    Scratch2<T> W(t.team_scratch(lv), blk, d), K(t.team_scratch(lv), blk, d);
    Scratch2<T> dW(t.team_scratch(lv), blk, d), dK(t.team_scratch(lv), blk, d);
    Scratch2<T> X1(t.team_scratch(lv), blk, d), X2(t.team_scratch(lv), blk, d);
    Scratch2<T> X3(t.team_scratch(lv), blk, d);
    Scratch2<T> Gm(t.team_scratch(lv), blk, blk), Lam(t.team_scratch(lv), blk, blk);
    Scratch2<T> Tm(t.team_scratch(lv), blk, blk), Nk(t.team_scratch(lv), blk, blk);
    Scratch2<T> Em(t.team_scratch(lv), blk, blk), dT(t.team_scratch(lv), blk, blk);
    Scratch2<T> dE(t.team_scratch(lv), blk, blk), A1(t.team_scratch(lv), blk, blk);
    Scratch2<T> A2(t.team_scratch(lv), blk, blk), A3(t.team_scratch(lv), blk, blk);
    Scratch2<T> A4(t.team_scratch(lv), blk, blk);
    Scratch2<T> V(t.team_scratch(lv), blk, dv), dV(t.team_scratch(lv), blk, dv);
    Scratch2<T> dO(t.team_scratch(lv), blk, dv);
    Scratch1<T> bt(t.team_scratch(lv), blk), dbt(t.team_scratch(lv), blk);
    Scratch1<T> lse(t.team_scratch(lv), blk), del(t.team_scratch(lv), blk);
    const Logit<T> logit{att.scale, att.softcap};

    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
      bt(i) = beta(b, s + i, hk);
      dbt(i) = T(0);
      for (int c = 0; c < d; ++c) {
        W(i, c) = w(b, s + i, hk, c);
        K(i, c) = has_k ? k(b, s + i, hk, c) : T(0);
        dW(i, c) = dK(i, c) = T(0);
      }
      for (int c = 0; c < dv && has_att; ++c) {
        V(i, c) = att.v(b, s + i, hk, c);
        dV(i, c) = T(0);
      }
      for (int c = 0; c < n; ++c) dT(i, c) = dE(i, c) = T(0);
    });
    t.team_barrier();
    la::gemm(t, N, Tr, n, n, d, T(1), W, W, T(0), Gm);
    la::ut_inverse<T>(t, n, Gm, bt, Lam);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int r) {
      for (int c = 0; c < n; ++c) Tm(r, c) = Lam(r, c) * bt(c);
    });
    t.team_barrier();
    if (has_k) {
      la::gemm(t, N, Tr, n, n, d, T(1), W, K, T(0), Nk);
      la::mask_lower<T>(t, n, true, Nk);
      la::gemm(t, N, N, n, n, n, T(1), Tm, Nk, T(0), Em);
    }

    for (int gi = 0; gi < G && has_q; ++gi) {
      const int h = hk * G + gi;
      // X1 = Q, X2 = dQ, A1 = M, A2 = dM
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
        for (int c = 0; c < d; ++c) {
          X1(i, c) = q(b, s + i, h, c);
          X2(i, c) = has_dqf ? g.dq_fold(b, s + i, h, c) : T(0);
        }
        for (int c = 0; c < n; ++c) A2(i, c) = T(0);
      });
      t.team_barrier();
      la::gemm(t, N, Tr, n, n, d, T(1), X1, W, T(0), A1);
      la::mask_lower<T>(t, n, false, A1);
      if (has_att)
        intra_attention(t, b, h, s, n, logit, X1, X2, K, Em, A1, A2, A3, A4, V, dV, dO, lse, del,
                        dK, dE);
      if (has_dqf) {
        Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
          for (int c = 0; c < d; ++c) X3(i, c) = g.dq_fold(b, s + i, h, c);
        });
        t.team_barrier();
        la::gemm(t, N, N, n, n, n, T(1), A1, Tm, T(0), A3);    // C = M T
        la::gemm(t, N, Tr, n, n, d, T(-1), X3, W, T(0), A4);   // dC = -dq~ W^T
        la::gemm(t, Tr, N, n, d, n, T(-1), A3, X3, T(1), dW);  // dW -= C^T dq~
        la::gemm(t, N, Tr, n, n, n, T(1), A4, Tm, T(1), A2);   // dM += dC T^T
        la::gemm(t, Tr, N, n, n, n, T(1), A1, A4, T(1), dT);   // dT += M^T dC
      }
      la::mask_lower<T>(t, n, false, A2);
      la::gemm(t, N, N, n, d, n, T(1), A2, W, T(1), X2);    // dQ += dM W
      la::gemm(t, Tr, N, n, d, n, T(1), A2, X1, T(1), dW);  // dW += dM^T Q
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
        for (int c = 0; c < d; ++c) g.dq(b, s + i, h, c) += X2(i, c);
      });
      t.team_barrier();
    }

    if (has_k && has_dkf) {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int j) {
        for (int c = 0; c < d; ++c) {
          X3(j, c) = g.dk_fold(b, s + j, hk, c);
          dK(j, c) += X3(j, c);
        }
      });
      t.team_barrier();
      la::gemm(t, N, Tr, n, n, d, T(-1), W, X3, T(1), dE);  // dE -= W dk~^T
      la::gemm(t, N, N, n, d, n, T(-1), Em, X3, T(1), dW);  // dW -= E dk~
    }
    if (has_k) {
      la::gemm(t, N, Tr, n, n, n, T(1), dE, Nk, T(1), dT);  // dT += dE Nk^T
      la::gemm(t, Tr, N, n, n, n, T(1), Tm, dE, T(0), A1);  // dNk = T^T dE
      la::mask_lower<T>(t, n, true, A1);
      la::gemm(t, N, N, n, d, n, T(1), A1, K, T(1), dW);   // dW += dNk K
      la::gemm(t, Tr, N, n, d, n, T(1), A1, W, T(1), dK);  // dK += dNk^T W
    }
    if (has_dp) {
      auto dP = Kokkos::subview(g.dp, b, hk, m, Kokkos::ALL, Kokkos::ALL);
      la::gemm(t, Tr, N, n, d, n, T(1), Tm, W, T(0), X1);    // Y = T^T W
      la::gemm(t, N, N, n, d, d, T(-1), W, dP, T(0), X2);    // dY = -W dP
      la::gemm(t, N, Tr, n, d, d, T(-1), X1, dP, T(1), dW);  // dW -= Y dP^T
      la::gemm(t, N, Tr, n, n, d, T(1), W, X2, T(1), dT);    // dT += W dY^T
      la::gemm(t, N, N, n, d, n, T(1), Tm, X2, T(1), dW);    // dW += T dY
    }
    // T = Lam D, Lam = (I + A)^-1, A = sLower(D Gm)
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int c) {
      T sum = T(0);
      for (int r = c; r < n; ++r) sum += dT(r, c) * Lam(r, c);
      dbt(c) += sum;
    });
    t.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int r) {
      for (int c = 0; c < n; ++c) A1(r, c) = dT(r, c) * bt(c);  // dLam
    });
    t.team_barrier();
    la::gemm(t, Tr, N, n, n, n, T(1), Lam, A1, T(0), A2);   // Lam^T dLam
    la::gemm(t, N, Tr, n, n, n, T(-1), A2, Lam, T(0), A3);  // dA = -Lam^T dLam Lam^T
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int r) {
      T sum = T(0);
      for (int c = 0; c < r; ++c) {
        sum += A3(r, c) * Gm(r, c);
        A3(r, c) *= bt(r);  // dGm = D dA
      }
      for (int c = r; c < n; ++c) A3(r, c) = T(0);
      dbt(r) += sum;
    });
    t.team_barrier();
    la::gemm(t, N, N, n, d, n, T(1), A3, W, T(1), dW);
    la::gemm(t, Tr, N, n, d, n, T(1), A3, W, T(1), dW);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
      g.dbeta(b, s + i, hk) += dbt(i);
      for (int c = 0; c < d; ++c) g.dw(b, s + i, hk, c) += dW(i, c);
      for (int c = 0; c < d && has_k; ++c) g.dk(b, s + i, hk, c) += dK(i, c);
      for (int c = 0; c < dv && has_att; ++c) att.dv(b, s + i, hk, c) += dV(i, c);
    });
  }

  // The softmax among query and key rows of this block, for query head h. In: Q (X1),
  // M (A1). Out: dQ (X2) += G K, dM (A2) -= G E^T, dE -= M^T G, dK += G^T Q, dV += P^T dO,
  // FoX lane gradients. A3, A4 are work space.
  template <class S2, class S1>
  KOKKOS_FUNCTION void intra_attention(const Member& t, int b, int h, int s, int n,
                                       const Logit<T>& logit, const S2& Q, const S2& dQ,
                                       const S2& K, const S2& Em, const S2& M, const S2& dM,
                                       const S2& P, const S2& Gx, const S2& V, const S2& dV,
                                       const S2& dO, const S1& lse, const S1& del, const S2& dK,
                                       const S2& dE) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
      for (int c = 0; c < dv; ++c) dO(i, c) = att.dout(b, s + i, h, c);
      lse(i) = att.lse(b, h, s + i);
      del(i) = att.delta(b, h, s + i);
    });
    t.team_barrier();
    la::gemm(t, N, Tr, n, n, d, T(1), Q, K, T(0), P);     // raw logits Q K^T ...
    la::gemm(t, N, N, n, n, n, T(-1), M, Em, T(1), P);    // ... - M E
    la::gemm(t, N, Tr, n, n, dv, T(1), dO, V, T(0), Gx);  // dO V^T
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int i) {
      const T fq = has_fox ? att.fox_q(b, s + i, h) : T(0);
      T rowsum = T(0);
      for (int j = 0; j < n; ++j) {
        if (j > i) {
          P(i, j) = Gx(i, j) = T(0);
          continue;
        }
        const T fk = has_fox ? att.fox_k(b, s + j, h) : T(0);
        const T sc = logit(P(i, j), fq, fk);
        const T p = kmath::exp(sc - lse(i));
        const T gx = p * (Gx(i, j) - del(i)) * logit.dcap(sc);
        P(i, j) = p;
        Gx(i, j) = gx;
        rowsum += gx;
      }
      if (has_fox) att.dfox_q(b, s + i, h) += rowsum;
    });
    t.team_barrier();
    if (has_fox) {
      Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](int j) {
        T colsum = T(0);
        for (int i = j; i < n; ++i) colsum += Gx(i, j);
        att.dfox_k(b, s + j, h) -= colsum;
      });
      t.team_barrier();
    }
    const T sc = logit.scale;
    la::gemm(t, Tr, N, n, dv, n, T(1), P, dO, T(1), dV);  // dV += P^T dO
    la::gemm(t, N, N, n, d, n, sc, Gx, K, T(1), dQ);      // dQ += G K
    la::gemm(t, Tr, N, n, d, n, sc, Gx, Q, T(1), dK);     // dK += G^T Q
    la::gemm(t, N, Tr, n, n, n, -sc, Gx, Em, T(1), dM);   // dM -= G E^T
    la::gemm(t, Tr, N, n, n, n, -sc, M, Gx, T(1), dE);    // dE -= M^T G
  }
};

}  // namespace

template <class T>
void block_backward(const View4<const T>& w, const View3<const T>& beta, const View4<const T>& q,
                    const View4<const T>& k, int block, const BlockAttention<T>& att,
                    const BlockGrads<T>& g) {
  const int B = w.extent(0), L = w.extent(1), Hkv = w.extent(2), d = w.extent(3);
  const int H = q.extent(0) > 0 ? int(q.extent(2)) : Hkv;
  const int dv = att.dout.extent(0) > 0 ? int(att.dout.extent(3)) : 1;
  const int nb = num_blocks(L, block);
  if (B == 0 || L == 0 || Hkv == 0) return;
  BackwardKernel<T> f;
  f.w = w;
  f.q = q;
  f.k = k;
  f.beta = beta;
  f.att = att;
  f.g = g;
  f.L = L;
  f.H = H;
  f.Hkv = Hkv;
  f.d = d;
  f.dv = dv;
  f.blk = block;
  f.nb = nb;
  f.has_q = q.extent(0) > 0;
  f.has_k = k.extent(0) > 0;
  f.has_att = att.dout.extent(0) > 0;
  f.has_fox = f.has_att && att.fox_q.extent(0) > 0;
  f.has_dqf = g.dq_fold.extent(0) > 0;
  f.has_dkf = g.dk_fold.extent(0) > 0;
  f.has_dp = g.dp.extent(0) > 0;
  const size_t bytes = BackwardKernel<T>::scratch_bytes(block, d, dv);
  f.level = scratch_level(bytes);
  la::TeamPolicy policy(B * Hkv * nb, Kokkos::AUTO);
  policy.set_scratch_size(f.level, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for("lcr::path_block_backward", policy, f);
}

#define LCR_INSTANTIATE(T)                                                           \
  template void block_backward<T>(const View4<const T>&, const View3<const T>&,      \
                                  const View4<const T>&, const View4<const T>&, int, \
                                  const BlockAttention<T>&, const BlockGrads<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr::path
