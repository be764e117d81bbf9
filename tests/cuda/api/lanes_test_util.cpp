#include "lanes_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "cuda_test_util.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"

namespace lcr::cuda::test {

using lcr::test::H3;
using lcr::test::H4;
using lcr::test::Problem;
using lcr::test::Result;

namespace {

template <class V>
std::vector<float> to_float(const V& v) {
  std::vector<float> out(v.span());
  for (size_t i = 0; i < v.span(); ++i) out[i] = float(v.data()[i]);
  return out;
}

std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

template <class V>
V copy_rounded(const V& v, bool bf16) {
  V out(v.label(), v.layout());
  for (size_t i = 0; i < v.span(); ++i) {
    const float f = float(v.data()[i]);
    out.data()[i] = bf16 ? round_bf16(f) : f;
  }
  return out;
}

}  // namespace

uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* s = std::getenv("LCR_TEST_SEED"))
      return uint64_t(std::strtoull(s, nullptr, 10));
    return uint64_t(std::random_device{}()) << 32 | std::random_device{}();
  }();
  return seed;
}

Problem rounded_problem(const Problem& p) {
  Problem r;
  r.c = p.c;
  r.q = copy_rounded(p.q, true);
  r.k = copy_rounded(p.k, true);
  r.v = copy_rounded(p.v, true);
  r.dout = copy_rounded(p.dout, true);
  if (uses_fox(p.c.spec.scheme)) {
    r.fox_cq = copy_rounded(p.fox_cq, false);
    r.fox_ck = copy_rounded(p.fox_ck, false);
  }
  r.params = ParamSet<double, HostSpace>(p.params.layout, "params");
  r.params.data = copy_rounded(p.params.data, false);
  return r;
}

Result naive_run(const Problem& p) {
  Result r = lcr::test::run_kokkos<float>(rounded_problem(p), true, true);
  for (double& x : r.o) x = round_bf16(float(x));  // the API's o is bf16
  return r;
}

Result gpu_run(const Problem& p, bool backward, bool recompute_lanes, SdpaImpl impl) {
  const AttentionSpec& s = p.c.spec;
  const int B = p.c.B, Lq = p.c.Lq, Lk = p.c.Lk, H = s.heads, dv = s.v_dim();
  auto q = upload_bf16(to_float(p.q)), k = upload_bf16(to_float(p.k));
  auto v = upload_bf16(to_float(p.v)), dout = upload_bf16(to_float(p.dout));
  DeviceBuffer<float> params(to_float(p.params.data));
  DeviceBuffer<float> cq, ck;
  AttentionInputs in;
  in.B = B, in.Lq = Lq, in.Lk = Lk;
  in.q = q.data(), in.k = k.data(), in.v = v.data();
  in.q_pos0 = p.c.q_pos0, in.k_pos0 = p.c.k_pos0;
  if (uses_fox(p.c.spec.scheme)) {
    cq = DeviceBuffer<float>(to_float(p.fox_cq));
    ck = DeviceBuffer<float>(to_float(p.fox_ck));
    in.fox_cq = cq.data(), in.fox_ck = ck.data();
  }
  const DeviceParams prm{params.size() ? params.data() : nullptr, int64_t(params.size())};
  DeviceBuffer<__nv_bfloat16> o(size_t(B) * Lq * H * dv);
  DeviceBuffer<float> lse(size_t(B) * H * Lq);
  o.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  Workspace ws;
  ws.set_sdpa_impl(impl);
  attention_forward(s, prm, in, {o.data(), lse.data()}, ws);
  Result r;
  r.o = to_double(download_bf16(o));
  r.lse = to_double(lse.download());
  if (!backward) return r;
  DeviceBuffer<float> dq(p.q.span()), dk(p.k.span()), dv_(p.v.span());
  DeviceBuffer<float> dparams(p.params.data.span()), dcq(p.fox_cq.span()), dck(p.fox_ck.span());
  for (auto* b : {&dq, &dk, &dv_, &dparams, &dcq, &dck}) b->fill_bytes(0xFF);
  AttentionGrads g{dq.data(),
                   dk.data(),
                   dv_.data(),
                   dparams.size() ? dparams.data() : nullptr,
                   dcq.size() ? dcq.data() : nullptr,
                   dck.size() ? dck.data() : nullptr};
  if (recompute_lanes) prepare_attention(s, prm, in, ws, nullptr);
  attention_backward(s, prm, in, {o.data(), lse.data()}, dout.data(), g, ws);
  r.grad["q"] = to_double(dq.download());
  r.grad["k"] = to_double(dk.download());
  r.grad["v"] = to_double(dv_.download());
  if (uses_fox(p.c.spec.scheme)) {
    r.grad["fox_cq"] = to_double(dcq.download());
    r.grad["fox_ck"] = to_double(dck.download());
  }
  const auto all = to_double(dparams.download());
  for (const auto& e : p.params.layout.entries())
    r.grad[e.name] = std::vector<double>(all.begin() + e.offset, all.begin() + e.offset + e.size());
  return r;
}

double expect_within_naive(const std::string& what, const std::vector<double>& x,
                           const std::vector<double>& naive, const std::vector<double>& ref,
                           double factor, double rel_floor, double abs_floor) {
  const double ex = lcr::test::max_abs_diff(x, ref), en = lcr::test::max_abs_diff(naive, ref);
  const double floor = rel_floor * lcr::test::max_abs(ref) + abs_floor;
  EXPECT_LE(ex, factor * en + floor) << what << ": error " << ex << ", naive bf16 error " << en
                                     << ", max|ref| " << lcr::test::max_abs(ref);
  return ex / std::max(en, floor);
}

double grad_factor(const std::string& name) {
  if (name == "q" || name == "k" || name == "v") return kGradFactor;
  return kSumGradFactor;
}

double grad_floor(const std::string& name, int keys) {
  if (name != "q" && name != "k" && name != "v") return kSumFloor;
  return keys == 1 ? kSingleKeyFloor : kFloor;
}

double l2_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    const double d = a[i] - b[i];
    if (std::isnan(d)) return INFINITY;
    s += d * d;
  }
  return std::sqrt(s);
}

double l2_norm(const std::vector<double>& a) {
  double s = 0;
  for (double x : a)
    if (std::isfinite(x)) s += x * x;
  return std::sqrt(s);
}

}  // namespace lcr::cuda::test
