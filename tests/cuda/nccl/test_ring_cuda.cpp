// The GPU ring (parallel/ring/cuda) against the single-GPU SDPA kernel on the whole
// sequence: every rank computes the reference for the full sequence on its own GPU from
// the same fresh random inputs (seed from rank 0, printed on failure), then the ring on
// its local rows, and compares its rows of o, lse, dq, dk, dv, dbias_q, dbias_k, dsink.
//
// Tolerance. Both paths see identical bf16 operands and accumulate in fp32; they differ
// in the order of the fp32 sums and in where the softmax weights P (and dS) are rounded
// to bf16 for the tensor-core products: relative to one key block's running maximum in
// the ring instead of the whole row's. Each rounding is a relative perturbation of at
// most 2^-9 of one term; over a row they average out, so differences stay around one
// bf16 unit (2^-8) of the largest value. The bound is 1e-2 of the tensor's largest
// magnitude for bf16 outputs and fp32 gradients (~2.5 bf16 units), and 1e-3 of
// max(1, |lse|) for the fp32 lse, which is the log of an fp32 sum (no bf16 rounding).
// dbias_q nearly cancels and gets a per-row term on top (delta_slack, ring_test_util.hpp).
// Outputs are poisoned (NaN bytes) first, so a row the ring never writes fails.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "kernels/attention/cuda/sdpa.hpp"
#include "kernels/base/error.hpp"
#include "nccl_test_env.hpp"
#include "parallel/ring/cuda/ring_cuda.hpp"
#include "ring_test_util.hpp"

namespace lcr::test {
namespace {

using cuda::DeviceBuffer;
using namespace lcr::cuda::test;

struct RingCase {
  const char* layout;
  int64_t L;
  int B, H, Hkv, D, Dv;
  bool alibi = false;
  float softcap = 0.f;
  bool bias = false, sink = false;
  int64_t pos0 = 0;
};

std::string case_name(const ::testing::TestParamInfo<RingCase>& i) {
  const RingCase& c = i.param;
  std::string s = std::string(c.layout) + "_L" + std::to_string(c.L) + "_B" + std::to_string(c.B) +
                  "_H" + std::to_string(c.H) + "x" + std::to_string(c.Hkv) + "_D" +
                  std::to_string(c.D) + "v" + std::to_string(c.Dv);
  if (c.alibi) s += "_alibi";
  if (c.softcap > 0) s += "_softcap";
  if (c.bias) s += "_fox";
  if (c.sink) s += "_sink";
  return s;
}

class RingCuda : public ::testing::TestWithParam<RingCase> {};

TEST_P(RingCuda, ForwardAndBackwardMatchSingleGpu) {
  LCR_REQUIRE_NCCL();
  const RingCase c = GetParam();
  NcclCommunicator& comm = *nccl();
  const int N = comm.size(), me = comm.rank();
  const LayoutKind kind = parse_layout(c.layout);
  if (c.L < (kind == LayoutKind::Zigzag ? 2 * N : N)) {  // the layout itself refuses
    EXPECT_THROW(SeqLayout(kind, c.L, N), Error);
    return;
  }
  const SeqLayout layout(kind, c.L, N);
  uint64_t seed = std::random_device{}();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + layout.describe());
  std::mt19937_64 rng(seed);
  const int B = c.B, H = c.H, Hkv = c.Hkv, D = c.D, Dv = c.Dv;
  const int64_t L = c.L;

  // Full inputs, rounded to bf16 where the kernels read bf16.
  auto q = random_normal(sz(B * L * H * D), rng), k = random_normal(sz(B * L * Hkv * D), rng);
  auto v = random_normal(sz(B * L * Hkv * Dv), rng), dout = random_normal(sz(B * L * H * Dv), rng);
  for (auto* x : {&q, &k, &v, &dout}) round_to_bf16(*x);
  std::vector<float> sink(sz(H)), slopes(sz(H));
  std::normal_distribution<float> unit(0.f, 1.f);
  const std::vector<float> cum = random_fox_gates(B, int64_t(L), H, rng);
  for (int h = 0; h < H; ++h) {
    sink[sz(h)] = unit(rng);
    slopes[sz(h)] = std::exp2(-8.f * float(h + 1) / float(H));
  }

  // Reference: the single-GPU kernel on the whole sequence (sink applied on the host).
  auto dq_ = upload_bf16(q), dk_ = upload_bf16(k), dv_ = upload_bf16(v), ddo = upload_bf16(dout);
  DeviceBuffer<float> dcum(cum), dsink(sink), dslopes(slopes);
  cuda::SdpaArgs full;
  full.B = B, full.Lq = full.Lk = int(L), full.H = H, full.Hkv = Hkv, full.D = D, full.Dv = Dv;
  full.q = dq_.data(), full.k = dk_.data(), full.v = dv_.data();
  full.q_pos0 = full.k_pos0 = c.pos0;
  full.scale = 1.f / std::sqrt(float(D)), full.softcap = c.softcap;
  full.alibi_slopes = c.alibi ? dslopes.data() : nullptr;
  full.bias_q = full.bias_k = c.bias ? dcum.data() : nullptr;
  DeviceBuffer<float> o32(sz(B * L * H * Dv)), lse(sz(B * H * L));
  cuda::sdpa_forward(full, nullptr, o32.data(), lse.data(), nullptr);
  auto o_ref = o32.download(), lse_ref = lse.download();
  for (int b = 0; b < B && c.sink; ++b)
    for (int h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        float& l = lse_ref[sz((b * H + h) * L + i)];
        const float m = std::max(l, sink[sz(h)]);
        const float nl = m + std::log(std::exp(l - m) + std::exp(sink[sz(h)] - m));
        const float f = std::exp(l - nl);
        for (int d = 0; d < Dv; ++d) o_ref[sz(((b * L + i) * H + h) * Dv + d)] *= f;
        l = nl;
      }
  round_to_bf16(o_ref);
  auto dob = upload_bf16(o_ref);
  DeviceBuffer<float> lse_fin(lse_ref), delta(sz(B * H * L)), rq(q.size()), rk(k.size()),
      rv(v.size()), rbq(cum.size()), rbk(cum.size());
  cuda::sdpa_row_delta(B, int(L), H, Dv, dob.data(), ddo.data(), delta.data(), nullptr);
  cuda::sdpa_backward(full, lse_fin.data(), delta.data(), ddo.data(), rq.data(), rk.data(),
                      rv.data(), c.bias ? rbq.data() : nullptr, c.bias ? rbk.data() : nullptr,
                      false, nullptr);
  const auto delta_h = delta.download();
  std::vector<float> dsink_ref(sz(H), 0.f);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        const size_t r = sz((b * H + h) * L + i);
        dsink_ref[sz(h)] -= std::exp(sink[sz(h)] - lse_ref[r]) * delta_h[r];
      }

  // The ring on this rank's rows.
  const auto pos = layout.positions(me);
  const int64_t Lr = int64_t(pos.size());
  auto lq = upload_bf16(take(q, B, L, int64_t(H) * D, pos));
  auto lk = upload_bf16(take(k, B, L, int64_t(Hkv) * D, pos));
  auto lv = upload_bf16(take(v, B, L, int64_t(Hkv) * Dv, pos));
  auto ldo = upload_bf16(take(dout, B, L, int64_t(H) * Dv, pos));
  DeviceBuffer<float> lcum(take(cum, B, L, H, pos));
  DeviceBuffer<__nv_bfloat16> o(sz(B * Lr * H * Dv));
  DeviceBuffer<float> llse(sz(B * H * Lr)), gq(sz(B * Lr * H * D)), gk(sz(B * Lr * Hkv * D)),
      gv(sz(B * Lr * Hkv * Dv)), gbq(sz(B * Lr * H)), gbk(sz(B * Lr * H)), gs(sz(H));
  for (auto* p : {&llse, &gq, &gk, &gv, &gbq, &gbk, &gs}) p->fill_bytes(0xFF);
  o.fill_bytes(0xFF);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the ring's streams do not wait for memsets
  cuda::RingSdpa ring(comm, layout, B, H, Hkv, D, Dv, c.bias, c.sink);
  cuda::RingSdpaArgs a;
  a.B = B, a.H = H, a.Hkv = Hkv, a.D = D, a.Dv = Dv;
  a.q = lq.data(), a.k = lk.data(), a.v = lv.data(), a.pos0 = c.pos0;
  a.scale = full.scale, a.softcap = c.softcap;
  a.alibi_slopes = full.alibi_slopes;
  a.bias_q = a.bias_k = c.bias ? lcum.data() : nullptr;
  a.sink = c.sink ? dsink.data() : nullptr;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const RingStats fs = ring.forward(a, o.data(), llse.data(), s);
  cuda::RingSdpaGrads g;
  g.dq = gq.data(), g.dk = gk.data(), g.dv = gv.data();
  if (c.bias) g.dbias_q = gbq.data(), g.dbias_k = gbk.data();
  if (c.sink) g.dsink = gs.data();
  const RingStats bs = ring.backward(a, o.data(), llse.data(), ldo.data(), g, s);
  cudaStreamDestroy(s);
  EXPECT_EQ(int(fs.steps.size()), N);
  EXPECT_EQ(int(bs.steps.size()), N);

  expect_close(download_bf16(o), take(o_ref, B, L, int64_t(H) * Dv, pos), 1e-2, 1e-6, "o");
  expect_close(llse.download(), take(lse_ref, int64_t(B) * H, L, 1, pos), 1e-3, 1.0, "lse");
  expect_close(gq.download(), take(rq.download(), B, L, int64_t(H) * D, pos), 1e-2, 1e-6, "dq");
  expect_close(gk.download(), take(rk.download(), B, L, int64_t(Hkv) * D, pos), 1e-2, 1e-6, "dk");
  expect_close(gv.download(), take(rv.download(), B, L, int64_t(Hkv) * Dv, pos), 1e-2, 1e-6, "dv");
  if (c.bias) {
    const auto slack = take(delta_slack(dout, o_ref, Dv), B, L, H, pos);
    expect_close(gbq.download(), take(rbq.download(), B, L, H, pos), 1e-2, 1e-6, "dbias_q", &slack);
    expect_close(gbk.download(), take(rbk.download(), B, L, H, pos), 1e-2, 1e-6, "dbias_k");
  }
  if (c.sink) expect_close(gs.download(), dsink_ref, 1e-2, 1e-6, "dsink");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RingCuda,
    ::testing::Values(RingCase{"contiguous", 7, 2, 4, 2, 64, 64},
                      RingCase{"zigzag", 7, 1, 2, 1, 64, 64, true},
                      RingCase{"zigzag", 129, 2, 4, 2, 64, 64, true, 20.f, false, false, 3},
                      RingCase{"contiguous", 129, 1, 16, 16, 64, 64},
                      RingCase{"contiguous", 1000, 1, 4, 4, 128, 128, false, 0.f, true, true},
                      RingCase{"zigzag", 1000, 2, 4, 2, 128, 64, false, 30.f, true, true},
                      RingCase{"zigzag", 1000, 1, 8, 2, 64, 64, true, 0.f, false, true, 11},
                      RingCase{"contiguous", 1, 1, 2, 2, 64, 64},
                      RingCase{"zigzag", 1, 1, 2, 2, 64, 64}),
    case_name);

// A ring for one shape refuses arguments of another, and a layout for another rank count.
TEST(RingCudaArgs, ClearErrors) {
  LCR_REQUIRE_NCCL();
  NcclCommunicator& comm = *nccl();
  const int N = comm.size();
  EXPECT_THROW(cuda::RingSdpa(comm, SeqLayout(LayoutKind::Contiguous, 64, N + 1), 1, 2, 2, 64, 64,
                              false, false),
               Error);
  EXPECT_THROW(
      cuda::RingSdpa(comm, SeqLayout(LayoutKind::Contiguous, 64, N), 1, 3, 2, 64, 64, false, false),
      Error);  // H not a multiple of Hkv (the SDPA kernel's own check)
  cuda::RingSdpa ring(comm, SeqLayout(LayoutKind::Contiguous, 64, N), 1, 2, 2, 64, 64, false,
                      false);
  DeviceBuffer<__nv_bfloat16> x(sz(64 * 2 * 64));
  DeviceBuffer<float> lse(sz(128));
  cuda::RingSdpaArgs a;
  a.B = 1, a.H = 2, a.Hkv = 2, a.D = 64, a.Dv = 32;  // Dv differs from the ring's
  a.q = a.k = a.v = x.data();
  try {
    ring.forward(a, x.data(), lse.data(), nullptr);
    ADD_FAILURE() << "no error for a mismatched Dv";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("make a RingSdpa for this shape"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lcr::test
