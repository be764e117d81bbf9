// The CUDA attention API (kernels/attention/cuda/api/attention_cuda.hpp) for every
// dot-product scheme and option against the float64 reference, at odd sizes (L = 1, 7,
// 129, 1000), GQA, position offsets and rows that see no key. Per case:
//  - o and lse against the float64 reference (kernels/attention/reference) of the exact
//    inputs, every gradient (q, k, v, FoX lanes, each parameter slice) against the Kokkos
//    float64 backward (itself tied to the reference's dual numbers and finite differences
//    by lcr_kernel_tests), each within a small multiple of the naive bf16 error
//    (lanes_test_util.hpp says what that is and why);
//  - at small sizes, every gradient also directly against the float64 reference: its
//    exact directional derivative (dual numbers) along a random direction u. With
//    u ~ N(0, I), <u, g_gpu - g> ~ N(0, |g_gpu - g|^2), so the bound 6 K |g_naive - g|
//    fails with probability ~1e-9 when the GPU error is within K times the naive one, and
//    almost surely when a gradient is structurally wrong (error ~ |g|).
// Inputs are fresh random draws each run (seed printed; LCR_TEST_SEED=<n> replays one).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "cuda_test_util.hpp"
#include "lanes_test_util.hpp"

namespace lcr::cuda::test {
namespace {

using lcr::test::Case;
using lcr::test::Problem;
using lcr::test::Result;

struct NamedCase {
  std::string name;
  Case c;
};
void PrintTo(const NamedCase& c, std::ostream* os) { *os << c.name; }
std::string case_name(const ::testing::TestParamInfo<NamedCase>& i) { return i.param.name; }

std::vector<NamedCase> all_cases() {
  std::vector<std::pair<std::string, AttentionSpec>> variants;
  auto add = [&](const std::string& n, Scheme sc, auto edit) {
    AttentionSpec s;
    s.scheme = sc;
    edit(s);
    variants.emplace_back(n, s);
  };
  auto none = [](AttentionSpec&) {};
  add("nope", Scheme::NoPE, none);
  add("rope_half", Scheme::RoPE, none);
  add("rope_interleaved", Scheme::RoPE,
      [](AttentionSpec& s) { s.rope.pairing = RopePairing::Interleaved; });
  add("rope_partial", Scheme::RoPE, [](AttentionSpec& s) { s.rope.rotary_dim = 8; });
  add("rope_yarn", Scheme::RoPE, [](AttentionSpec& s) {
    s.rope.yarn_factor = 4;  // with N = 32 the ramp is crossed by the head's pairs
    s.rope.yarn_original_len = 32;
  });
  add("alibi", Scheme::ALiBi, none);
  add("goat", Scheme::GOAT, none);
  add("goat2d", Scheme::GOAT2D, [](AttentionSpec& s) { s.goat.grid_width = 5; });
  // A sink without softcap: GOAT's du is projected onto its known total -sum dsink
  // (lanes::goat_du_project), which is nonzero only here.
  add("goat_sink", Scheme::GOAT, [](AttentionSpec& s) { s.numerics.sink = true; });
  // The authors' recipe (their parameters mapped onto the lanes, goat_recipe.hpp); their GPT
  // recipe without relative modes, with their query gate and a sink (du's projection runs
  // through the map); the gate with lcr's recipe after QK-RMSNorm.
  add("goat_authors", Scheme::GOAT, [](AttentionSpec& s) { s.goat.recipe = GoatRecipe::Authors; });
  add("goat_authors_r0_gate_sink", Scheme::GOAT, [](AttentionSpec& s) {
    s.goat.recipe = GoatRecipe::Authors;
    s.goat.modes = 0;
    s.goat.query_gate = true;
    s.numerics.sink = true;
  });
  add("goat_gate_qknorm", Scheme::GOAT, [](AttentionSpec& s) {
    s.goat.query_gate = true;
    s.numerics.qk_norm = true;
  });
  add("pope", Scheme::PoPE, none);
  add("fox", Scheme::FoX, none);
  // With softcap the FoX query-lane gradient comes from the SDPA's fp32 row sums (A - D C).
  add("fox_softcap", Scheme::FoX, [](AttentionSpec& s) { s.numerics.softcap = 5; });
  add("nope_sink", Scheme::NoPE, [](AttentionSpec& s) { s.numerics.sink = true; });
  add("nope_softcap", Scheme::NoPE, [](AttentionSpec& s) { s.numerics.softcap = 5; });
  add("rope_qknorm", Scheme::RoPE, [](AttentionSpec& s) { s.numerics.qk_norm = true; });
  add("goat_all_numerics", Scheme::GOAT, [](AttentionSpec& s) {
    s.numerics.qk_norm = s.numerics.sink = true;
    s.numerics.softcap = 4;
  });
  add("pope_qknorm_sink", Scheme::PoPE,
      [](AttentionSpec& s) { s.numerics.qk_norm = s.numerics.sink = true; });
  add("alibi_all_numerics", Scheme::ALiBi, [](AttentionSpec& s) {
    s.numerics.qk_norm = s.numerics.sink = true;
    s.numerics.softcap = 4;
  });
  add("fox_qknorm_sink", Scheme::FoX,
      [](AttentionSpec& s) { s.numerics.qk_norm = s.numerics.sink = true; });

  struct Shape {
    const char* name;
    int B, Lq, Lk, H, Hkv, d;
    int64_t q0, k0;
    int dv;
  };
  const Shape shapes[] = {
      {"L1_d16", 1, 1, 1, 2, 1, 16, 0, 0, 0},
      {"L7_d32_gqa", 2, 7, 7, 4, 2, 32, 0, 0, 0},
      {"L129_d128", 1, 129, 129, 2, 2, 128, 0, 0, 0},
      {"L1000_d64_gqa", 1, 1000, 1000, 2, 1, 64, 0, 0, 0},
      {"offset_queries_after_keys", 1, 37, 100, 2, 1, 16, 80, 0, 0},
      {"offset_rows_see_nothing", 1, 20, 30, 2, 2, 16, 0, 10, 0},
      {"value_dim_differs", 1, 9, 9, 2, 1, 24, 3, 3, 40},
  };
  std::vector<NamedCase> out;
  for (const auto& [vn, spec] : variants)
    for (const auto& sh : shapes) {
      NamedCase nc{vn + "_" + sh.name, Case{}};
      nc.c.spec = spec;
      nc.c.spec.heads = sh.H;
      nc.c.spec.kv_heads = sh.Hkv;
      nc.c.spec.head_dim = sh.d;
      nc.c.spec.value_dim = sh.dv;
      nc.c.B = sh.B, nc.c.Lq = sh.Lq, nc.c.Lk = sh.Lk, nc.c.q_pos0 = sh.q0, nc.c.k_pos0 = sh.k0;
      nc.c.seed = std::hash<std::string>{}(nc.name) ^ run_seed();
      out.push_back(nc);
    }
  return out;
}

// One case on the SDPA implementation `impl` (lcr's kernels, or auto: cuDNN where it serves
// the call, whose bf16 dQ, dK, dV add kBf16GradRounding to those gradients' floor).
void check_case(const NamedCase& nc, SdpaImpl impl) {
  SCOPED_TRACE("seed " + std::to_string(nc.c.seed) +
               " (LCR_TEST_SEED=" + std::to_string(run_seed()) + ")");
  const Problem p = lcr::test::make_problem(nc.c);
  const Result ref = lcr::test::run_reference(p);
  const Result ref_grad = lcr::test::run_kokkos<double>(p, true);
  const Result naive = naive_run(p);
  const Result gpu = gpu_run(p, true, false, impl);
  auto floor_of = [&](const std::string& name) {
    const bool qkv = name == "q" || name == "k" || name == "v";
    return grad_floor(name, nc.c.Lk) + (impl != SdpaImpl::Lcr && qkv ? kBf16GradRounding : 0);
  };

  // The rule and its factors: lanes_test_util.hpp.
  const double o_floor = nc.c.Lk == 1 ? kSingleKeyFloor : kFloor;
  const double o_ratio = expect_within_naive("o", gpu.o, naive.o, ref.o, kForwardFactor, o_floor);
  const double fwd_ratio =
      std::max(o_ratio, expect_within_naive("lse", gpu.lse, naive.lse, ref.lse, kForwardFactor,
                                            kFloor, kLseAbsFloor));
  double grad_ratio = 0;
  std::string worst, each;  // each: every gradient's error / naive error, to compare impls
  for (const auto& name : lcr::test::input_names(p)) {
    const double r = expect_within_naive("d " + name, gpu.grad.at(name), naive.grad.at(name),
                                         ref_grad.grad.at(name), grad_factor(name), floor_of(name));
    if (r > grad_ratio) grad_ratio = r, worst = name;
    // Error over the naive bf16 error, without the floors (which set most sums' bounds).
    const auto& ref_g = ref_grad.grad.at(name);
    const double en = lcr::test::max_abs_diff(naive.grad.at(name), ref_g);
    char buf[96];
    std::snprintf(buf, sizeof buf, " %s=%.3g", name.c_str(),
                  lcr::test::max_abs_diff(gpu.grad.at(name), ref_g) / std::max(en, 1e-300));
    each += buf;
  }
  std::printf("[ratio] %-44s %s fwd %5.2f grad %5.2f (%s) |%s\n", nc.name.c_str(),
              sdpa_impl_name(impl), fwd_ratio, grad_ratio, worst.c_str(), each.c_str());

  if (int64_t(nc.c.Lq) * nc.c.Lk > 129 * 129) return;  // dual numbers: small sizes only
  std::mt19937_64 rng(nc.c.seed + 17);
  std::normal_distribution<double> n01;
  for (const auto& name : lcr::test::input_names(p)) {
    const auto& g = gpu.grad.at(name);
    std::vector<double> u(g.size());
    double ug = 0;
    for (size_t i = 0; i < u.size(); ++i) u[i] = n01(rng), ug += u[i] * g[i];
    const double exact = lcr::test::reference_directional(p, name, u);
    const double en = l2_diff(naive.grad.at(name), ref_grad.grad.at(name));
    const double bound =
        6 * (grad_factor(name) * en + floor_of(name) * l2_norm(ref_grad.grad.at(name)) +
             kAbsFloor * std::sqrt(double(g.size())));
    EXPECT_NEAR(ug, exact, bound) << "d " << name << " along a random direction";
  }
}

class CudaAttentionTest : public ::testing::TestWithParam<NamedCase> {};

TEST_P(CudaAttentionTest, ForwardAndGradientsWithinNaiveBf16Error) {
  LCR_REQUIRE_GPU();
  check_case(GetParam(), SdpaImpl::Lcr);
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaAttentionTest, ::testing::ValuesIn(all_cases()), case_name);

// Every case through the API with impl = auto (train.cuda_attention's default): cuDNN's fused
// attention runs the self-attention and past-block calls (kernels/attention/cuda/cudnn),
// GOAT's and PoPE's with a bf16 o, lcr's kernels the rest (ALiBi, FoX, softcap, sinks,
// offsets cuDNN's mask cannot express). Skipped where cuDNN cannot be loaded.
class CudaAttentionCudnnTest : public ::testing::TestWithParam<NamedCase> {};

TEST_P(CudaAttentionCudnnTest, ForwardAndGradientsWithinNaiveBf16Error) {
  LCR_REQUIRE_GPU();
  LCR_REQUIRE_CUDNN();
  check_case(GetParam(), SdpaImpl::Auto);
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaAttentionCudnnTest, ::testing::ValuesIn(all_cases()), case_name);

// impl = cudnn: cuDNN runs GOAT's and PoPE's products too (bf16 o; their parameter gradients
// take delta from that o, as NoPE's dq does), at the benchmark widths 64 and 128 in
// self-attention (PoPE: QK 2d / V d, i.e. 256 / 128 and 128 / 64), where cuDNN must serve
// every call (an error otherwise). The same bounds as lcr's kernels.
class CudaAttentionAllCudnnTest : public ::testing::TestWithParam<NamedCase> {};

TEST_P(CudaAttentionAllCudnnTest, ForwardAndGradientsWithinNaiveBf16Error) {
  LCR_REQUIRE_GPU();
  LCR_REQUIRE_CUDNN();
  check_case(GetParam(), SdpaImpl::Cudnn);
}

std::vector<NamedCase> all_cudnn_cases() {
  std::vector<NamedCase> v;
  for (const NamedCase& nc : all_cases()) {
    const std::string& n = nc.name;
    const bool scheme = n.rfind("goat_L", 0) == 0 || n.rfind("goat2d_L", 0) == 0 ||
                        n.rfind("nope_L", 0) == 0 || n.rfind("rope_half_L", 0) == 0 ||
                        n.rfind("pope_L", 0) == 0;
    const bool shape =
        n.find("L129_d128") != std::string::npos || n.find("L1000_d64_gqa") != std::string::npos;
    if (scheme && shape) v.push_back(nc);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaAttentionAllCudnnTest, ::testing::ValuesIn(all_cudnn_cases()),
                         case_name);

// The backward reuses the forward's lanes from the workspace (autograd contract); a
// backward that recomputes them (after another prepare_attention) must give the same
// gradients.
TEST(CudaAttention, BackwardWithSavedLanesEqualsRecomputed) {
  LCR_REQUIRE_GPU();
  for (Scheme sc : {Scheme::GOAT, Scheme::PoPE, Scheme::RoPE}) {
    Case c;
    c.spec.scheme = sc;
    c.spec.heads = 4, c.spec.kv_heads = 2, c.spec.head_dim = 32;
    c.spec.numerics.qk_norm = true;
    c.B = 2, c.Lq = c.Lk = 77, c.seed = run_seed();
    const Problem p = lcr::test::make_problem(c);
    const Result a = gpu_run(p, true);        // backward reuses the forward's lanes
    const Result b = gpu_run(p, true, true);  // backward recomputes them
    for (const auto& [name, g] : a.grad)
      EXPECT_LE(lcr::test::max_abs_diff(g, b.grad.at(name)), 1e-6 * lcr::test::max_abs(g) + 1e-30)
          << scheme_name(sc) << " d " << name;
  }
}

}  // namespace
}  // namespace lcr::cuda::test
