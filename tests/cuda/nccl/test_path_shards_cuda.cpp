// PaTH's w convolution over sequence shards on GPUs (core/train/gpu_path_shards.hpp) against
// the whole-sequence kernels of core/model/cuda/gpu_path.hpp on the same inputs: w and du of
// this rank's rows, and dconv summed over the ranks. Layouts with one-row chunks (the rows
// before a chunk then come from two different chunks), chunks starting at position 1, both
// layouts, split layouts. Both paths do the same fp32 arithmetic per row; only dconv's sums
// run in another order (per chunk, then over ranks): bound 1e-5 of the largest magnitude.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/model/cuda/gpu_path.hpp"
#include "core/train/gpu_path_shards.hpp"
#include "cuda_test_util.hpp"
#include "nccl_test_env.hpp"
#include "ring_test_util.hpp"

namespace lcr::test {
namespace {

using cuda::DeviceBuffer;
using namespace lcr::cuda::test;

struct ShardCase {
  const char* layout;
  int64_t L;
  int split = 1;
};

class PathShardsCuda : public ::testing::TestWithParam<ShardCase> {};

TEST_P(PathShardsCuda, ConvolutionMatchesTheWholeSequence) {
  LCR_REQUIRE_NCCL();
  const ShardCase c = GetParam();
  NcclCommunicator& comm = *nccl();
  const int N = comm.size(), me = comm.rank();
  const LayoutKind kind = parse_layout(c.layout);
  if (c.L < (kind == LayoutKind::Zigzag ? 2 : 1) * N * c.split) GTEST_SKIP() << "too short";
  const SeqLayout layout(kind, c.L, N, c.split);
  uint64_t seed = std::random_device{}();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + layout.describe());
  std::mt19937_64 rng(seed);
  const int B = 2, Hkv = 2, d = 64;
  const int64_t L = c.L, C = int64_t(Hkv) * d;
  const bool silu = true;
  auto u = random_normal(sz(B * L * C), rng), dw = random_normal(sz(B * L * C), rng);
  auto conv = random_normal(sz(C * 3), rng, 0.5f);

  // Whole sequence.
  DeviceBuffer<float> u_(u), conv_(conv), w_(sz(B * L * C)), dw_(dw), du_(sz(B * L * C));
  DeviceBuffer<float> dconv_(std::vector<float>(sz(C * 3), 0.f));
  DeviceBuffer<float> part(sz(cuda::model::path_conv_partial_floats(B * L, Hkv, d)));
  cuda::model::path_w_forward(B, L, Hkv, d, silu, u_.data(), conv_.data(), w_.data(), nullptr);
  cuda::model::path_w_backward(B, L, Hkv, d, silu, u_.data(), conv_.data(), dw_.data(), du_.data(),
                               dconv_.data(), part.data(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  // This rank's rows.
  const auto pos = layout.positions(me);
  const int64_t Lr = int64_t(pos.size());
  DeviceBuffer<float> lu(take(u, B, L, C, pos)), ldw(take(dw, B, L, C, pos)), lw(sz(B * Lr * C)),
      ldu(sz(B * Lr * C)), ldconv(std::vector<float>(sz(C * 3), 0.f));
  lw.fill_bytes(0xFF);
  ldu.fill_bytes(0xFF);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  train::GpuPathShards shards(comm, layout, 1);
  shards.w_forward(B, int(Lr), Hkv, d, silu, lu.data(), conv_.data(), lw.data(), s);
  shards.w_backward(B, int(Lr), Hkv, d, silu, lu.data(), conv_.data(), ldw.data(), ldu.data(),
                    ldconv.data(), s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  auto dconv_sum = ldconv.download();
  MPI_Allreduce(MPI_IN_PLACE, dconv_sum.data(), int(dconv_sum.size()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  expect_close(lw.download(), take(w_.download(), B, L, C, pos), 1e-5, 1e-6, "w");
  expect_close(ldu.download(), take(du_.download(), B, L, C, pos), 1e-5, 1e-6, "du");
  expect_close(dconv_sum, dconv_.download(), 1e-5, 1e-6, "dconv");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PathShardsCuda,
    ::testing::Values(ShardCase{"zigzag", 5}, ShardCase{"contiguous", 3}, ShardCase{"zigzag", 129},
                      ShardCase{"contiguous", 1000, 3}, ShardCase{"zigzag", 9, 2},
                      ShardCase{"contiguous", 2, 1}),
    [](const auto& i) {
      return std::string(i.param.layout) + "_L" + std::to_string(i.param.L) +
             (i.param.split > 1 ? "_split" + std::to_string(i.param.split) : "");
    });

}  // namespace
}  // namespace lcr::test
