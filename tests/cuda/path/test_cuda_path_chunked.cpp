// The chunked single-GPU PaTH (kernels/attention/cuda/path/chunked.hpp) against the CUDA PaTH
// kernels on the whole sequence (themselves checked against the float64 reference in
// test_cuda_path.cpp), on fresh random inputs: o, lse, dq, dk, dv, dw, dbeta and the FoX lanes.
//
// Tolerance, as for the PaTH ring (tests/cuda/nccl/test_path_ring_cuda.cpp), which computes the
// same factorisation across ranks: both paths see the same bf16 q, k, v and fp32 w, beta, gates
// and accumulate in fp32, but round at different places. The whole-sequence kernel carries
// queries across superchunks in bf16 inside its scan; the chunked form rounds the folded keys
// k~ and the carried queries y = P ... P q~ to bf16 once per chunk pair, and each chunk's own
// o to bf16 before the merge. Each is a relative perturbation of 2^-9 of one operand, so the
// bound is 2e-2 of the tensor's largest magnitude (~5 bf16 units) for o and the gradients,
// 2e-3 of max(1, |lse|) for lse plus one bf16 unit of the row's logit scale (path_lse_slack,
// cuda_compare.hpp says why; without it seed 1256748567 failed at L = 5);
// dfox_q nearly cancels and gets delta_slack's per-row term, dbeta is relative to dw's largest
// magnitude at least (dbeta_floor, cuda_compare.hpp says why).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda_compare.hpp"
#include "cuda_test_util.hpp"
#include "kernels/attention/cuda/path/chunked.hpp"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/base/error.hpp"

namespace lcr::test {
namespace {

using cuda::DeviceBuffer;
using namespace lcr::cuda::test;

struct ChunkCase {
  int L, Lc, B, H, Hkv, D;
  bool fox = false;
  float softcap = 0.f;
};

std::string case_name(const ::testing::TestParamInfo<ChunkCase>& i) {
  const ChunkCase& c = i.param;
  return std::string(c.fox ? "PaTHFoX" : "PaTH") + "_L" + std::to_string(c.L) + "_chunk" +
         std::to_string(c.Lc) + "_B" + std::to_string(c.B) + "_H" + std::to_string(c.H) + "x" +
         std::to_string(c.Hkv) + "_D" + std::to_string(c.D) + (c.softcap > 0 ? "_softcap" : "");
}

// Fresh inputs of one case, on the device, and the arguments that point at them.
struct Inputs {
  std::vector<float> q, k, v, dout, w, beta, cum;
  DeviceBuffer<__nv_bfloat16> q_, k_, v_, do_;
  DeviceBuffer<float> w_, beta_, cum_;
  cuda::path::Args args;

  Inputs(const ChunkCase& c, std::mt19937_64& rng) {
    const int B = c.B, H = c.H, Hkv = c.Hkv, D = c.D;
    const int64_t L = c.L;
    q = random_normal(sz(B * L * H * D), rng), k = random_normal(sz(B * L * Hkv * D), rng);
    v = random_normal(sz(B * L * Hkv * D), rng), dout = random_normal(sz(B * L * H * D), rng);
    for (auto* x : {&q, &k, &v, &dout}) round_to_bf16(*x);
    w = random_normal(sz(B * L * Hkv * D), rng);
    normalise_rows(w, D);
    beta.resize(sz(B * L * Hkv));
    // A third of beta near 2 (reflections), the rest over (0, 2).
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (float& b : beta) b = u(rng) < 1.f / 3 ? 1.998f - 0.01f * u(rng) : 1.998f * u(rng);
    cum = random_fox_gates(B, L, H, rng);
    q_ = upload_bf16(q), k_ = upload_bf16(k), v_ = upload_bf16(v), do_ = upload_bf16(dout);
    w_ = DeviceBuffer<float>(w), beta_ = DeviceBuffer<float>(beta), cum_ = DeviceBuffer<float>(cum);
    args.B = B, args.L = c.L, args.H = H, args.Hkv = Hkv, args.D = D;
    args.q = q_.data(), args.k = k_.data(), args.v = v_.data(), args.w = w_.data();
    args.beta = beta_.data();
    if (c.fox) args.fox_q = args.fox_k = cum_.data();
    args.softcap = c.softcap;
  }
};

// o, lse and the gradients of one run, on the device (outputs poisoned with NaN first).
struct Outputs {
  DeviceBuffer<__nv_bfloat16> o;
  DeviceBuffer<float> lse, dq, dk, dv, dw, dbeta, dfq, dfk;
  cuda::path::Grads g;
  Outputs(const ChunkCase& c) {
    const int64_t L = c.L;
    o = DeviceBuffer<__nv_bfloat16>(sz(c.B * L * c.H * c.D));
    lse = DeviceBuffer<float>(sz(c.B * c.H * L));
    dq = DeviceBuffer<float>(sz(c.B * L * c.H * c.D));
    dk = DeviceBuffer<float>(sz(c.B * L * c.Hkv * c.D));
    dv = DeviceBuffer<float>(sz(c.B * L * c.Hkv * c.D));
    dw = DeviceBuffer<float>(sz(c.B * L * c.Hkv * c.D));
    dbeta = DeviceBuffer<float>(sz(c.B * L * c.Hkv));
    dfq = DeviceBuffer<float>(sz(c.B * L * c.H));
    dfk = DeviceBuffer<float>(sz(c.B * L * c.H));
    o.fill_bytes(0xFF);
    for (auto* p : {&lse, &dq, &dk, &dv, &dw, &dbeta, &dfq, &dfk}) p->fill_bytes(0xFF);
    g.dq = dq.data(), g.dk = dk.data(), g.dv = dv.data(), g.dw = dw.data(), g.dbeta = dbeta.data();
    if (c.fox) g.dfox_q = dfq.data(), g.dfox_k = dfk.data();
  }
};

class CudaPathChunked : public ::testing::TestWithParam<ChunkCase> {};

TEST_P(CudaPathChunked, MatchesTheWholeSequenceKernels) {
  LCR_REQUIRE_GPU();
  const ChunkCase c = GetParam();
  const uint64_t seed = case_seed();  // LCR_TEST_SEED replays a failure
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Inputs in(c, rng);
  const cuda::path::Args& a = in.args;

  Outputs ref(c);
  DeviceBuffer<unsigned char> ws(
      std::max(cuda::path::forward_workspace_bytes(a), cuda::path::backward_workspace_bytes(a)));
  cuda::path::forward(a, ref.o.data(), ref.lse.data(), ws.data(), ws.size(), nullptr);
  cuda::path::backward(a, ref.o.data(), ref.lse.data(), in.do_.data(), ref.g, ws.data(), ws.size(),
                       nullptr);

  Outputs got(c);
  // The poison (legacy stream) must land before the non-blocking stream's writes.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cuda::path::Chunked chunked(c.Lc);
  ASSERT_EQ(chunked.chunk_length(a), c.L % c.Lc == 0 && c.L > c.Lc ? c.Lc : c.L);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  chunked.forward(a, got.o.data(), got.lse.data(), s);
  chunked.backward(a, got.o.data(), got.lse.data(), in.do_.data(), got.g, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);

  const auto o_ref = download_bf16(ref.o);
  expect_close(download_bf16(got.o), o_ref, 2e-2, 1e-6, "o");
  const auto lse_rows = path_lse_slack(in.q, in.k, c.B, c.L, c.H, c.Hkv, c.D);
  expect_close(got.lse.download(), ref.lse.download(), 2e-3, 1.0, "lse", &lse_rows);
  expect_close(got.dq.download(), ref.dq.download(), 2e-2, 1e-6, "dq");
  expect_close(got.dk.download(), ref.dk.download(), 2e-2, 1e-6, "dk");
  expect_close(got.dv.download(), ref.dv.download(), 2e-2, 1e-6, "dv");
  const auto dw_ref = ref.dw.download();
  expect_close(got.dw.download(), dw_ref, 2e-2, 1e-6, "dw");
  expect_close(got.dbeta.download(), ref.dbeta.download(), 2e-2, dbeta_floor(dw_ref), "dbeta");
  if (c.fox) {
    const auto slack = delta_slack(in.dout, o_ref, c.D);
    expect_close(got.dfq.download(), ref.dfq.download(), 2e-2, 1e-6, "dfox_q", &slack);
    expect_close(got.dfk.download(), ref.dfk.download(), 2e-2, 1e-6, "dfox_k");
  }
}

// Chunks of odd lengths (1, 7, 129, 200, 250: not multiples of the kernels' 64/128 tiles) and
// of tile multiples, 3 to 8 chunks (distances up to 7 through the M chains), GQA, D = 64 and
// 128, PaTH-FoX with softcap (the pairs sum the query lane's gradient) and without (its closed
// form), B = 2, and a length the chunk does not divide (the whole-sequence kernels run).
INSTANTIATE_TEST_SUITE_P(Cases, CudaPathChunked,
                         ::testing::Values(ChunkCase{5, 1, 1, 2, 1, 64},
                                           ChunkCase{21, 7, 2, 4, 2, 64},
                                           ChunkCase{387, 129, 1, 2, 1, 128, true},
                                           ChunkCase{1000, 200, 2, 4, 2, 64, true, 20.f},
                                           ChunkCase{1000, 250, 2, 4, 2, 64, true},
                                           ChunkCase{2048, 256, 1, 4, 2, 64, true},
                                           ChunkCase{4096, 1024, 1, 4, 4, 128},
                                           ChunkCase{1536, 512, 2, 2, 2, 128, false, 30.f},
                                           ChunkCase{100, 64, 1, 2, 2, 64}),
                         case_name);

TEST(CudaPathChunkedArgs, ClearErrors) {
  EXPECT_THROW(cuda::path::Chunked(-2), Error);
  LCR_REQUIRE_GPU();
  const ChunkCase c{256, 64, 1, 2, 1, 64};
  std::mt19937_64 rng(7);
  Inputs in(c, rng);
  Outputs out(c);
  cuda::path::Chunked chunked(c.Lc);
  // A backward before any forward, then with inputs other than the forward's.
  EXPECT_THROW(
      chunked.backward(in.args, out.o.data(), out.lse.data(), in.do_.data(), out.g, nullptr),
      Error);
  chunked.forward(in.args, out.o.data(), out.lse.data(), nullptr);
  cuda::path::Args other = in.args;
  other.k = in.q_.data();
  EXPECT_THROW(chunked.backward(other, out.o.data(), out.lse.data(), in.do_.data(), out.g, nullptr),
               Error);
  cuda::path::Args bad = in.args;
  bad.D = 96;
  EXPECT_THROW(chunked.forward(bad, out.o.data(), out.lse.data(), nullptr), Error);
}

}  // namespace
}  // namespace lcr::test
