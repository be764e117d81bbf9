// The GPU PaTH ring (parallel/ring/cuda/path_ring_cuda.hpp) against the single-GPU CUDA PaTH
// kernel on the whole sequence: every rank computes the reference on its own GPU from the
// same fresh random inputs (seed from rank 0, printed on failure), then the ring on its local
// rows, and compares its rows of o, lse, dq, dk, dv, dw, dbeta and the FoX lanes.
//
// Tolerance. Both see the same bf16 q, k, v and fp32 w, beta, gates, and accumulate in fp32.
// They round at different places: the single kernel carries queries across superchunks in
// bf16 inside the scan, the ring rounds the folded keys k~ and the carried queries
// y = P ... P q~ to bf16 once per pair, and the own block's o to bf16 before the merge. Each
// is a relative perturbation of 2^-9 of one operand; the bound is 2e-2 of the tensor's
// largest magnitude (~5 bf16 units) for o and the gradients, 2e-3 of max(1, |lse|) for lse
// plus one bf16 unit of the row's logit scale (path_lse_slack, cuda_compare.hpp).
// dfox_q nearly cancels and gets the per-row term of delta_slack (ring_test_util.hpp); dbeta
// is relative to dw's largest magnitude at least (dbeta_floor, cuda_compare.hpp).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/base/error.hpp"
#include "nccl_test_env.hpp"
#include "parallel/ring/cuda/path_ring_cuda.hpp"
#include "ring_test_util.hpp"

namespace lcr::test {
namespace {

using cuda::DeviceBuffer;
using namespace lcr::cuda::test;

struct PathRingCase {
  const char* layout;
  int64_t L;
  int B, H, Hkv, D;
  bool fox = false;
  float softcap = 0.f;
  int split = 1;  // layout.hpp: finer chunks (more pairs through the SDPA kernel)
};

std::string case_name(const ::testing::TestParamInfo<PathRingCase>& i) {
  const PathRingCase& c = i.param;
  return std::string(c.fox ? "PaTHFoX_" : "PaTH_") + c.layout + "_L" + std::to_string(c.L) + "_B" +
         std::to_string(c.B) + "_H" + std::to_string(c.H) + "x" + std::to_string(c.Hkv) + "_D" +
         std::to_string(c.D) + (c.softcap > 0 ? "_softcap" : "") +
         (c.split > 1 ? "_split" + std::to_string(c.split) : "");
}

class PathRingCuda : public ::testing::TestWithParam<PathRingCase> {};

TEST_P(PathRingCuda, ForwardAndBackwardMatchSingleGpu) {
  LCR_REQUIRE_NCCL();
  const PathRingCase c = GetParam();
  NcclCommunicator& comm = *nccl();
  const int N = comm.size(), me = comm.rank();
  const SeqLayout layout(parse_layout(c.layout), c.L, N, c.split);
  uint64_t seed = case_seed();  // rank 0's (LCR_TEST_SEED replays a failure)
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + layout.describe());
  std::mt19937_64 rng(seed);
  const int B = c.B, H = c.H, Hkv = c.Hkv, D = c.D;
  const int64_t L = c.L;

  auto q = random_normal(sz(B * L * H * D), rng), k = random_normal(sz(B * L * Hkv * D), rng);
  auto v = random_normal(sz(B * L * Hkv * D), rng), dout = random_normal(sz(B * L * H * D), rng);
  for (auto* x : {&q, &k, &v, &dout}) round_to_bf16(*x);
  auto w = random_normal(sz(B * L * Hkv * D), rng);
  normalise_rows(w, D);
  std::vector<float> beta(sz(B * L * Hkv));
  std::uniform_real_distribution<float> u02(0.f, 1.998f);
  for (float& b : beta) b = u02(rng);
  const std::vector<float> cum = random_fox_gates(B, L, H, rng);

  // Reference: the single-GPU PaTH kernel on the whole sequence.
  auto q_ = upload_bf16(q), k_ = upload_bf16(k), v_ = upload_bf16(v), do_ = upload_bf16(dout);
  DeviceBuffer<float> w_(w), beta_(beta), cum_(cum);
  cuda::path::Args full;
  full.B = B, full.L = int(L), full.H = H, full.Hkv = Hkv, full.D = D;
  full.q = q_.data(), full.k = k_.data(), full.v = v_.data(), full.w = w_.data();
  full.beta = beta_.data();
  if (c.fox) full.fox_q = full.fox_k = cum_.data();
  full.softcap = c.softcap;
  DeviceBuffer<__nv_bfloat16> o_full(sz(B * L * H * D));
  DeviceBuffer<float> lse_full(sz(B * H * L));
  DeviceBuffer<unsigned char> ws(std::max(cuda::path::forward_workspace_bytes(full),
                                          cuda::path::backward_workspace_bytes(full)));
  cuda::path::forward(full, o_full.data(), lse_full.data(), ws.data(), ws.size(), nullptr);
  DeviceBuffer<float> rq(q.size()), rk(k.size()), rv(v.size()), rw(w.size()), rb(beta.size()),
      rfq(cum.size()), rfk(cum.size());
  cuda::path::Grads rg;
  rg.dq = rq.data(), rg.dk = rk.data(), rg.dv = rv.data(), rg.dw = rw.data(), rg.dbeta = rb.data();
  if (c.fox) rg.dfox_q = rfq.data(), rg.dfox_k = rfk.data();
  cuda::path::backward(full, o_full.data(), lse_full.data(), do_.data(), rg, ws.data(), ws.size(),
                       nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto o_ref = download_bf16(o_full), lse_ref = lse_full.download();

  // The ring on this rank's rows.
  const auto pos = layout.positions(me);
  const int64_t Lr = int64_t(pos.size());
  auto lq = upload_bf16(take(q, B, L, int64_t(H) * D, pos));
  auto lk = upload_bf16(take(k, B, L, int64_t(Hkv) * D, pos));
  auto lv = upload_bf16(take(v, B, L, int64_t(Hkv) * D, pos));
  auto ldo = upload_bf16(take(dout, B, L, int64_t(H) * D, pos));
  DeviceBuffer<float> lw(take(w, B, L, int64_t(Hkv) * D, pos)), lb(take(beta, B, L, Hkv, pos));
  DeviceBuffer<float> lcum(take(cum, B, L, H, pos));
  DeviceBuffer<__nv_bfloat16> o(sz(B * Lr * H * D));
  DeviceBuffer<float> llse(sz(B * H * Lr)), gq(sz(B * Lr * H * D)), gk(sz(B * Lr * Hkv * D)),
      gv(sz(B * Lr * Hkv * D)), gw(sz(B * Lr * Hkv * D)), gb(sz(B * Lr * Hkv)), gfq(sz(B * Lr * H)),
      gfk(sz(B * Lr * H));
  for (auto* p : {&llse, &gq, &gk, &gv, &gw, &gb, &gfq, &gfk}) p->fill_bytes(0xFF);
  o.fill_bytes(0xFF);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cuda::PathRing ring(comm, layout, B, H, Hkv, D, c.fox);
  cuda::PathRingArgs a;
  a.B = B, a.H = H, a.Hkv = Hkv, a.D = D;
  a.q = lq.data(), a.k = lk.data(), a.v = lv.data(), a.w = lw.data(), a.beta = lb.data();
  if (c.fox) a.fox_q = a.fox_k = lcum.data();
  a.softcap = c.softcap;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const RingStats fs = ring.forward(a, o.data(), llse.data(), s);
  cuda::PathRingGrads g;
  g.dq = gq.data(), g.dk = gk.data(), g.dv = gv.data(), g.dw = gw.data(), g.dbeta = gb.data();
  if (c.fox) g.dfox_q = gfq.data(), g.dfox_k = gfk.data();
  const RingStats bs = ring.backward(a, o.data(), llse.data(), ldo.data(), g, s);
  cudaStreamDestroy(s);
  EXPECT_EQ(int(fs.steps.size()), N);
  EXPECT_EQ(int(bs.steps.size()), N);

  expect_close(download_bf16(o), take(o_ref, B, L, int64_t(H) * D, pos), 2e-2, 1e-6, "o");
  const auto lse_rows = take(path_lse_slack(q, k, B, L, H, Hkv, D), int64_t(B) * H, L, 1, pos);
  expect_close(llse.download(), take(lse_ref, int64_t(B) * H, L, 1, pos), 2e-3, 1.0, "lse",
               &lse_rows);
  expect_close(gq.download(), take(rq.download(), B, L, int64_t(H) * D, pos), 2e-2, 1e-6, "dq");
  expect_close(gk.download(), take(rk.download(), B, L, int64_t(Hkv) * D, pos), 2e-2, 1e-6, "dk");
  expect_close(gv.download(), take(rv.download(), B, L, int64_t(Hkv) * D, pos), 2e-2, 1e-6, "dv");
  expect_close(gw.download(), take(rw.download(), B, L, int64_t(Hkv) * D, pos), 2e-2, 1e-6, "dw");
  expect_close(gb.download(), take(rb.download(), B, L, Hkv, pos), 2e-2, dbeta_floor(rw.download()),
               "dbeta");
  if (c.fox) {
    const auto slack = take(delta_slack(dout, o_ref, D), B, L, H, pos);
    expect_close(gfq.download(), take(rfq.download(), B, L, H, pos), 2e-2, 1e-6, "dfox_q", &slack);
    expect_close(gfk.download(), take(rfk.download(), B, L, H, pos), 2e-2, 1e-6, "dfox_k");
  }
}

// Odd lengths (chunks that are not multiples of the kernels' 64/128 tiles), both layouts, GQA,
// D = 64 and 128, PaTH-FoX with softcap, chunks long enough for the two-level chains, and
// split layouts (several chunks per rank: on one rank, the chunked single-GPU PaTH).
INSTANTIATE_TEST_SUITE_P(
    Cases, PathRingCuda,
    ::testing::Values(PathRingCase{"contiguous", 7, 2, 4, 2, 64},
                      PathRingCase{"zigzag", 129, 1, 2, 1, 64, true},
                      PathRingCase{"zigzag", 1000, 2, 4, 2, 64},
                      PathRingCase{"contiguous", 1000, 1, 4, 4, 128, true, 20.f},
                      PathRingCase{"zigzag", 4099, 1, 4, 2, 128},
                      PathRingCase{"zigzag", 3001, 1, 2, 1, 64, true},
                      PathRingCase{"contiguous", 2000, 1, 4, 2, 64, true, 0.f, 5},
                      PathRingCase{"zigzag", 4099, 2, 2, 2, 128, false, 0.f, 3}),
    case_name);

TEST(PathRingCudaArgs, ClearErrors) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& comm = *nccl();
  const SeqLayout layout(LayoutKind::Contiguous, 64 * comm.size(), comm.size());
  EXPECT_THROW(cuda::PathRing(comm, layout, 1, 4, 2, 96, false), Error);  // D not 64 / 128
  EXPECT_THROW(cuda::PathRing(comm, layout, 1, 3, 2, 64, false), Error);  // H % Hkv
  const SeqLayout other(LayoutKind::Contiguous, 64 * (comm.size() + 1), comm.size() + 1);
  EXPECT_THROW(cuda::PathRing(comm, other, 1, 4, 2, 64, false), Error);
  cuda::PathRing ring(comm, layout, 1, 4, 2, 64, false);
  cuda::PathRingArgs a;
  a.B = 1, a.H = 4, a.Hkv = 2, a.D = 64;  // null tensors
  DeviceBuffer<__nv_bfloat16> o(64);
  DeviceBuffer<float> lse(64);
  EXPECT_THROW(ring.forward(a, o.data(), lse.data(), nullptr), Error);
}

}  // namespace
}  // namespace lcr::test
