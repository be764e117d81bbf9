#include "sdpa_reference.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "../bf16_round.hpp"  // tests/bf16_round.hpp

namespace lcr::cuda::test {
namespace {

using lcr::test::nearest_bf16;

// One (b, KV head) group: every query head of the group, every row. R is the working
// precision (double or float); `naive` adds the bf16 roundings of a plain implementation.
template <class R>
void group(const RefProblem& p, bool naive, int b, int hk, RefResult& out) {
  const int G = p.H / p.Hkv, D = p.D, Dv = p.Dv;
  auto rnd = [&](R x) { return naive ? R(nearest_bf16(float(x))) : x; };
  std::vector<R> s(p.Lk), pr(p.Lk), ds(p.Lk), o(Dv);
  std::vector<char> vis(p.Lk);
  for (int g = 0; g < G; ++g) {
    const int h = hk * G + g;
    for (int i = 0; i < p.Lq; ++i) {
      const float* q = &p.q[((int64_t(b) * p.Lq + i) * p.H + h) * D];
      const float* dout = &p.dout[((int64_t(b) * p.Lq + i) * p.H + h) * Dv];
      const int64_t pi = p.q_pos0 + i;
      // Logits of the row.
      R mx = -std::numeric_limits<R>::infinity();
      for (int j = 0; j < p.Lk; ++j) {
        const int64_t pj = p.k_pos0 + j;
        vis[j] = pj <= pi;
        if (!vis[j]) continue;
        const float* k = &p.k[((int64_t(b) * p.Lk + j) * p.Hkv + hk) * D];
        R dot = 0;
        for (int d = 0; d < D; ++d) dot += R(q[d]) * R(k[d]);
        R x = R(p.scale) * dot;
        if (!p.slopes.empty()) x -= R(p.slopes[h]) * R(pi - pj);
        if (!p.bias_q.empty()) x += R(p.bias_q[(int64_t(b) * p.Lq + i) * p.H + h]);
        if (!p.bias_k.empty()) x -= R(p.bias_k[(int64_t(b) * p.Lk + j) * p.H + h]);
        if (p.softcap > 0) x = R(p.softcap) * std::tanh(x / R(p.softcap));
        s[j] = x;
        if (x > mx) mx = x;
      }
      const int64_t lrow = (int64_t(b) * p.H + h) * p.Lq + i;
      const int64_t orow = ((int64_t(b) * p.Lq + i) * p.H + h) * Dv;
      if (mx == -std::numeric_limits<R>::infinity()) {  // sees no key
        out.lse[lrow] = -std::numeric_limits<double>::infinity();
        for (int d = 0; d < Dv; ++d) out.o[orow + d] = 0;
        continue;  // and every gradient of this row is zero
      }
      R sum = 0;
      for (int j = 0; j < p.Lk; ++j)
        if (vis[j]) sum += std::exp(s[j] - mx);
      const R lse = mx + std::log(sum);
      out.lse[lrow] = double(lse);
      std::fill(o.begin(), o.end(), R(0));
      for (int j = 0; j < p.Lk; ++j) {
        pr[j] = vis[j] ? std::exp(s[j] - lse) : R(0);
        if (!vis[j]) continue;
        const float* v = &p.v[((int64_t(b) * p.Lk + j) * p.Hkv + hk) * Dv];
        const R pj = rnd(pr[j]);
        for (int d = 0; d < Dv; ++d) o[d] += pj * R(v[d]);
      }
      R delta = 0;
      for (int d = 0; d < Dv; ++d) {
        o[d] = rnd(o[d]);
        out.o[orow + d] = double(o[d]);
        delta += R(dout[d]) * o[d];
      }
      // Backward of the row: dS_j = P_j (dP_j - delta) dsoftcap_j.
      for (int j = 0; j < p.Lk; ++j) {
        ds[j] = 0;
        if (!vis[j]) continue;
        const float* v = &p.v[((int64_t(b) * p.Lk + j) * p.Hkv + hk) * Dv];
        R dp = 0;
        for (int d = 0; d < Dv; ++d) dp += R(dout[d]) * R(v[d]);
        R dcap = 1;
        if (p.softcap > 0) {
          const R t = s[j] / R(p.softcap);
          dcap = 1 - t * t;
        }
        ds[j] = pr[j] * (dp - delta) * dcap;
      }
      double dbq = 0;
      for (int j = 0; j < p.Lk; ++j) {
        if (!vis[j]) continue;
        const int64_t kr = (int64_t(b) * p.Lk + j) * p.Hkv + hk;
        const float* k = &p.k[kr * D];
        const R dsr = rnd(ds[j]), pj = rnd(pr[j]);
        for (int d = 0; d < D; ++d) {
          out.dq[((int64_t(b) * p.Lq + i) * p.H + h) * D + d] += double(R(p.scale) * dsr * R(k[d]));
          out.dk[kr * D + d] += double(R(p.scale) * dsr * R(q[d]));
        }
        for (int d = 0; d < Dv; ++d) out.dv[kr * Dv + d] += double(pj * R(dout[d]));
        dbq += double(ds[j]);
        out.dbk[(int64_t(b) * p.Lk + j) * p.H + h] -= double(ds[j]);
      }
      out.dbq[(int64_t(b) * p.Lq + i) * p.H + h] = dbq;
    }
  }
}

}  // namespace

RefResult sdpa_reference(const RefProblem& p, RefMode mode) {
  RefResult r;
  r.o.assign(size_t(p.B) * p.Lq * p.H * p.Dv, 0.0);
  r.lse.assign(size_t(p.B) * p.H * p.Lq, 0.0);
  r.dq.assign(size_t(p.B) * p.Lq * p.H * p.D, 0.0);
  r.dk.assign(size_t(p.B) * p.Lk * p.Hkv * p.D, 0.0);
  r.dv.assign(size_t(p.B) * p.Lk * p.Hkv * p.Dv, 0.0);
  r.dbq.assign(size_t(p.B) * p.Lq * p.H, 0.0);
  r.dbk.assign(size_t(p.B) * p.Lk * p.H, 0.0);
  // (b, hk) groups write disjoint slices of every output, so they run in parallel.
  std::vector<std::thread> pool;
  for (int b = 0; b < p.B; ++b)
    for (int hk = 0; hk < p.Hkv; ++hk)
      pool.emplace_back([&, b, hk] {
        if (mode == RefMode::kExact)
          group<double>(p, false, b, hk, r);
        else
          group<float>(p, true, b, hk, r);
      });
  for (auto& t : pool) t.join();
  return r;
}

}  // namespace lcr::cuda::test
