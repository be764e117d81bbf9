// The CUDA lane stages alone, against the CPU scheme units they mirror (no SDPA involved):
//  - prepare_attention's q', k' vs the CPU prepare_attention<double> on the same
//    bf16-rounded inputs: equal up to the one bf16 rounding of the output (2^-8 relative:
//    one bf16 ulp, since fp32 vs fp64 arithmetic may flip a rounding) — except GOAT's key
//    bias, which the GPU carries as a bf16 head + tail pair against q' = 1 (lane_kernels.cu)
//    and is checked as that pair's sum to 2^-14;
//  - prepared_backward's dq, dk and parameter gradients vs the CPU prepared_backward<double>
//    for the same lane gradients: fp32 against fp64 arithmetic, sums over <= 10^4 terms
//    kept in fp32 per warp and double across blocks: 1e-4 of the tensor's largest value;
//  - the FoX cumulative gates and their backward vs kernels/schemes/fox in double;
//  - argument checks (these need no GPU and always run).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.hpp"
#include "kernels/attention/attention.hpp"
#include "kernels/schemes/fox/fox.hpp"
#include "lanes_test_util.hpp"

namespace lcr::cuda::test {
namespace {

using lcr::test::Case;
using lcr::test::Problem;

template <class V>
auto to_mem(const V& h) {
  Kokkos::View<typename V::data_type, Kokkos::LayoutRight, MemSpace> d(h.label(), h.layout());
  Kokkos::deep_copy(d, h);
  return d;
}

template <class V>
std::vector<double> flat(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.span());
}

struct LaneCase {
  std::string name;
  Case c;
};
void PrintTo(const LaneCase& c, std::ostream* os) { *os << c.name; }

std::vector<LaneCase> lane_cases() {
  std::vector<LaneCase> out;
  auto add = [&](const std::string& n, Scheme sc, int d, auto edit) {
    LaneCase lc{n, Case{}};
    auto& s = lc.c.spec;
    s.scheme = sc;
    s.heads = 4, s.kv_heads = 2, s.head_dim = d;
    edit(s);
    lc.c.B = 2, lc.c.Lq = 37, lc.c.Lk = 41, lc.c.q_pos0 = 1000003, lc.c.k_pos0 = 999999;
    lc.c.seed = std::hash<std::string>{}(n) ^ run_seed();
    out.push_back(lc);
  };
  auto none = [](AttentionSpec&) {};
  add("copy_odd_width_qknorm", Scheme::NoPE, 12, [](AttentionSpec& s) {
    s.numerics.qk_norm = true;
    s.value_dim = 16;
  });
  add("rope_half", Scheme::RoPE, 64, none);
  add("rope_interleaved_partial", Scheme::RoPE, 48, [](AttentionSpec& s) {
    s.rope.pairing = RopePairing::Interleaved;
    s.rope.rotary_dim = 20;
  });
  add("rope_yarn_qknorm", Scheme::RoPE, 32, [](AttentionSpec& s) {
    s.rope.yarn_factor = 8, s.rope.yarn_original_len = 64, s.numerics.qk_norm = true;
  });
  add("goat", Scheme::GOAT, 64, none);
  add("goat_qknorm_r7", Scheme::GOAT, 40,
      [](AttentionSpec& s) { s.goat.modes = 7, s.numerics.qk_norm = true, s.value_dim = 24; });
  add("goat2d", Scheme::GOAT2D, 48,
      [](AttentionSpec& s) { s.goat.grid_width = 13, s.goat.modes = 5, s.goat.y_modes = 2; });
  add("pope", Scheme::PoPE, 64, none);
  add("pope_qknorm", Scheme::PoPE, 20,
      [](AttentionSpec& s) { s.numerics.qk_norm = true, s.value_dim = 24; });
  return out;
}

class CudaLaneTest : public ::testing::TestWithParam<LaneCase> {};

// The GOAT key-bias lane index (the CPU's u lane; the GPU's bf16 head, tail next to it).
int goat_u_lane(const AttentionSpec& s) {
  return is_goat(s.scheme) ? input_qk_dim(s) + 2 * s.goat.modes : -1;
}

struct CpuSide {
  lcr::AttentionInputs<double> in;
  ParamSet<double> params;
};

CpuSide cpu_side(const Problem& r) {
  CpuSide c;
  c.in.q = to_mem(r.q);
  c.in.k = to_mem(r.k);
  c.in.v = to_mem(r.v);
  c.in.q_pos0 = r.c.q_pos0;
  c.in.k_pos0 = r.c.k_pos0;
  c.params = ParamSet<double>(r.params.layout);
  c.params.data = to_mem(r.params.data);
  return c;
}

// Device copies of a problem's bf16 inputs and fp32 parameters.
struct GpuSide {
  DeviceBuffer<__nv_bfloat16> q, k, v;
  DeviceBuffer<float> params;
  AttentionInputs in;
  DeviceParams prm;
};
std::unique_ptr<GpuSide> gpu_side(const Problem& r) {
  auto g = std::make_unique<GpuSide>();
  auto f = [](const auto& v) { return std::vector<float>(v.data(), v.data() + v.span()); };
  g->q = upload_bf16(f(r.q)), g->k = upload_bf16(f(r.k)), g->v = upload_bf16(f(r.v));
  g->params = DeviceBuffer<float>(f(r.params.data));
  g->in.B = r.c.B, g->in.Lq = r.c.Lq, g->in.Lk = r.c.Lk;
  g->in.q = g->q.data(), g->in.k = g->k.data(), g->in.v = g->v.data();
  g->in.q_pos0 = r.c.q_pos0, g->in.k_pos0 = r.c.k_pos0;
  g->prm = {g->params.size() ? g->params.data() : nullptr, int64_t(g->params.size())};
  return g;
}

// Compares GPU lanes y [rows, dp] with CPU lanes x [rows, w]; `key` selects the GOAT rule.
void expect_lanes(const std::vector<double>& gpu, const std::vector<double>& cpu, int rows, int dp,
                  int w, int u_lane, bool key, double dh) {
  int bad = 0;
  for (int r = 0; r < rows && bad < 5; ++r)
    for (int o = 0; o < dp; ++o) {
      const double g = gpu[size_t(r) * dp + o];
      if (o == u_lane || o == u_lane + 1) {
        if (o == u_lane + 1) continue;
        const double want = key ? std::sqrt(dh) * cpu[size_t(r) * w + o] : 1.0;
        const double got = key ? g + gpu[size_t(r) * dp + o + 1] : g;
        if (!(std::abs(got - want) <= std::ldexp(std::abs(want), -14) + 1e-6) ||
            (!key && gpu[size_t(r) * dp + o + 1] != 1.0))
          ++bad, ADD_FAILURE() << "GOAT u lane row " << r << ": " << got << " vs " << want;
        continue;
      }
      const double want = o < w ? cpu[size_t(r) * w + o] : 0.0;
      if (!(std::abs(g - want) <= std::ldexp(std::abs(want), -8) + 1e-6))
        ++bad, ADD_FAILURE() << "row " << r << " lane " << o << ": gpu " << g << " cpu " << want;
    }
}

TEST_P(CudaLaneTest, ForwardLanesMatchCpu) {
  LCR_REQUIRE_GPU();
  const LaneCase& lc = GetParam();
  SCOPED_TRACE("seed " + std::to_string(lc.c.seed));
  const AttentionSpec& s = lc.c.spec;
  const Problem r = rounded_problem(lcr::test::make_problem(lc.c));
  const CpuSide c = cpu_side(r);
  const auto P = lcr::prepare_attention<double>(s, c.in, c.params);
  auto g = gpu_side(r);
  Workspace ws;
  const auto G = prepare_attention(s, g->prm, g->in, ws, nullptr);
  const int dp = G.sdpa.D, w = P.sdpa.q.extent(3), u = goat_u_lane(s);
  ASSERT_EQ(dp, padded_lane_width(s));
  auto download = [&](const __nv_bfloat16* p, size_t n) {
    std::vector<__nv_bfloat16> h(n);
    LCR_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(h[0]), cudaMemcpyDeviceToHost));
    const std::vector<float> f = from_bf16(h);
    return std::vector<double>(f.begin(), f.end());
  };
  const int rq = lc.c.B * lc.c.Lq * s.heads, rk = lc.c.B * lc.c.Lk * s.kv_heads;
  expect_lanes(download(G.sdpa.q, size_t(rq) * dp), flat(P.sdpa.q), rq, dp, w, u, false,
               s.head_dim);
  expect_lanes(download(G.sdpa.k, size_t(rk) * dp), flat(P.sdpa.k), rk, dp, w, u, true, s.head_dim);
  EXPECT_NEAR(G.sdpa.scale, double(P.sdpa.scale), 1e-7);
}

TEST_P(CudaLaneTest, BackwardLanesMatchCpu) {
  LCR_REQUIRE_GPU();
  const LaneCase& lc = GetParam();
  SCOPED_TRACE("seed " + std::to_string(lc.c.seed));
  const AttentionSpec& s = lc.c.spec;
  const Problem r = rounded_problem(lcr::test::make_problem(lc.c));
  const CpuSide c = cpu_side(r);
  const auto P = lcr::prepare_attention<double>(s, c.in, c.params);
  const int w = P.sdpa.q.extent(3), dp = padded_lane_width(s), u = goat_u_lane(s);
  const int rq = lc.c.B * lc.c.Lq * s.heads, rk = lc.c.B * lc.c.Lk * s.kv_heads;
  // Random lane gradients; the GPU's extra lanes get values its backward must ignore, and
  // GOAT's u gradient is mapped to the GPU encoding (k'_hi + k'_lo = sqrt(d_h) u).
  std::mt19937_64 rng(lc.c.seed + 3);
  std::normal_distribution<float> n01;
  auto lane_grads = [&](int rows, bool key, View4<double>& cpu, std::vector<float>& gpu) {
    gpu.resize(size_t(rows) * dp);
    for (auto& x : gpu) x = n01(rng);
    auto h = Kokkos::create_mirror_view(cpu);
    for (int i = 0; i < rows; ++i)
      for (int o = 0; o < w; ++o) {
        double& x = h.data()[size_t(i) * w + o];
        x = gpu[size_t(i) * dp + o];
        if (key && o == u) {
          gpu[size_t(i) * dp + o] = gpu[size_t(i) * dp + o + 1] = float(x / std::sqrt(s.head_dim));
          x = double(gpu[size_t(i) * dp + o]) * std::sqrt(s.head_dim);
        }
      }
    Kokkos::deep_copy(cpu, h);
  };
  View4<double> dq2("dq2", P.sdpa.q.extent(0), P.sdpa.q.extent(1), P.sdpa.q.extent(2), w);
  View4<double> dk2("dk2", P.sdpa.k.extent(0), P.sdpa.k.extent(1), P.sdpa.k.extent(2), w);
  std::vector<float> gdq2, gdk2;
  lane_grads(rq, false, dq2, gdq2);
  lane_grads(rk, true, dk2, gdk2);
  View4<double> dq("dq", c.in.q.extent(0), c.in.q.extent(1), c.in.q.extent(2), c.in.q.extent(3));
  View4<double> dk("dk", c.in.k.extent(0), c.in.k.extent(1), c.in.k.extent(2), c.in.k.extent(3));
  ParamSet<double> dparams(c.params.layout, "dparams");
  lcr::prepared_backward<double>(s, c.in, c.params, P, dq2, dk2, dq, dk, dparams);

  auto g = gpu_side(r);
  Workspace ws;
  DeviceBuffer<float> ddq2(gdq2), ddk2(gdk2), ddq(r.q.span()), ddk(r.k.span());
  DeviceBuffer<float> ddp(std::max<size_t>(r.params.data.span(), 1));
  ddq.fill_bytes(0xFF), ddk.fill_bytes(0xFF), ddp.fill_bytes(0);
  prepare_attention(s, g->prm, g->in, ws, nullptr);  // tables as a forward leaves them
  prepared_backward(s, g->prm, g->in, ddq2.data(), ddk2.data(), ddq.data(), ddk.data(), ddp.data(),
                    ws, nullptr);
  auto cmp = [](const char* what, const std::vector<float>& got, const std::vector<double>& want) {
    const std::vector<double> g(got.begin(), got.end());
    EXPECT_LE(lcr::test::max_abs_diff(g, want), 1e-4 * lcr::test::max_abs(want) + 1e-7) << what;
  };
  cmp("dq", ddq.download(), flat(dq));
  cmp("dk", ddk.download(), flat(dk));
  const auto gp = ddp.download();
  const auto cp = flat(dparams.data);
  for (const auto& e : c.params.layout.entries())
    cmp(e.name.c_str(), std::vector<float>(gp.begin() + e.offset, gp.begin() + e.offset + e.size()),
        std::vector<double>(cp.begin() + e.offset, cp.begin() + e.offset + e.size()));
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaLaneTest, ::testing::ValuesIn(lane_cases()),
                         [](const auto& i) { return i.param.name; });

TEST(CudaFox, CumulativeGatesMatchCpu) {
  LCR_REQUIRE_GPU();
  std::mt19937_64 rng(run_seed());
  std::normal_distribution<double> n01;
  for (int L : {1, 7, 129, 1000}) {
    const int B = 2, H = 3;
    View3<double> x("x", B, L, H), dc("dc", B, L, H), c("c", B, L, H), dx("dx", B, L, H);
    View2<double> off("off", B, H), doff("doff", B, H);
    auto hx = Kokkos::create_mirror_view(x), hd = Kokkos::create_mirror_view(dc);
    auto ho = Kokkos::create_mirror_view(off);
    std::vector<float> fx(x.span()), fd(x.span()), fo(off.span());
    for (size_t i = 0; i < x.span(); ++i)
      fx[i] = float(2 + n01(rng)), hx.data()[i] = fx[i], fd[i] = float(n01(rng)),
      hd.data()[i] = fd[i];
    for (size_t i = 0; i < off.span(); ++i)
      fo[i] = float(-50 * (1 + n01(rng))), ho.data()[i] = fo[i];
    Kokkos::deep_copy(x, hx), Kokkos::deep_copy(dc, hd), Kokkos::deep_copy(off, ho);
    fox::cumulative_log_gates<double>(x, off, c);
    fox::cumulative_log_gates_backward<double>(x, dc, dx, doff);

    Workspace ws;
    DeviceBuffer<float> gx(fx), gdc(fd), go(fo), gc(fx.size()), gdx(fx.size()), gdo(fo.size());
    gc.fill_bytes(0xFF), gdx.fill_bytes(0xFF), gdo.fill_bytes(0xFF);
    fox_cumulative_log_gates(B, L, H, gx.data(), go.data(), gc.data(), ws, nullptr);
    fox_cumulative_log_gates_backward(B, L, H, gx.data(), gdc.data(), gdx.data(), gdo.data(), ws,
                                      nullptr);
    // fp32 storage of double sums: relative 2^-24 of the value, the CPU's own precision.
    auto cmp = [&](const char* what, const std::vector<float>& got,
                   const std::vector<double>& want) {
      const std::vector<double> g(got.begin(), got.end());
      EXPECT_LE(lcr::test::max_abs_diff(g, want), 2e-7 * lcr::test::max_abs(want) + 1e-7)
          << what << " L=" << L;
    };
    cmp("c", gc.download(), flat(c));
    cmp("dx", gdx.download(), flat(dx));
    cmp("doffset", gdo.download(), flat(doff));
  }
}

// Argument checks run on the host: no GPU needed, never skipped.
TEST(CudaAttentionChecks, RejectBadInputWithClearErrors) {
  AttentionSpec s;
  s.heads = 2, s.kv_heads = 1, s.head_dim = 64;
  AttentionInputs in;
  static __align__(16) __nv_bfloat16 dummy[8];  // never dereferenced by the checks
  in.B = 1, in.Lq = in.Lk = 7, in.q = in.k = in.v = dummy;
  EXPECT_NO_THROW(check_inputs(s, in, {}));
  auto expect_error = [&](AttentionSpec sp, AttentionInputs i, DeviceParams p, const char* needle) {
    try {
      check_inputs(sp, i, p);
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const lcr::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  AttentionSpec t = s;
  t.scheme = Scheme::PaTH;
  expect_error(t, in, {}, "kernels/attention/cuda/path");
  t = s, t.value_dim = 20;
  expect_error(t, in, {}, "multiple of 8");
  t = s, t.scheme = Scheme::PoPE, t.head_dim = 160;
  expect_error(t, in, {}, "head_dim <= 128");
  t = s, t.scheme = Scheme::GOAT;
  expect_error(t, in, {}, "attention_param_layout");
  t = s, t.scheme = Scheme::FoX;
  expect_error(t, in, {}, "fox_cq");
  AttentionInputs j = in;
  j.fox_cq = j.fox_ck = reinterpret_cast<const float*>(dummy);
  expect_error(s, j, {}, "drop the gates");
  j = in, j.q_pos0 = -1;
  expect_error(s, j, {}, "positions");
  j = in, j.k = nullptr;
  expect_error(s, j, {}, "null");
  t = s, t.heads = 3, t.kv_heads = 2;
  expect_error(t, in, {}, "kv_heads");
}

}  // namespace
}  // namespace lcr::cuda::test
