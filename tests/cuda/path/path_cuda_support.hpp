#pragma once
// Test problems for the CUDA PaTH kernels (kernels/attention/cuda/path), run on the GPU or,
// on machines without one, on the SIMT emulator (the same kernel source on the CPU).
//
// Accuracy yardstick ("naive bf16 error"): how far the float64 answer moves when the tensors
// a bf16 attention stores are rounded to bf16 once, rel(f_naive(x), f(x)) with x the
// float64 problem: q, k, v, w and dout in bf16 (beta and the FoX gates in fp32, as the kernel
// takes them) and the output o in bf16 before the backward forms delta = <dO, o> from it.
// Any bf16 implementation has at least this error; the kernel computes f on the bf16/fp32
// inputs it is given and must land within a small multiple of the yardstick of the float64
// answer for those inputs (tolerances in test_cuda_path.cpp, with why).
// Errors are relative Frobenius norms over a whole tensor, ||a - b|| / ||b||.
#include <map>
#include <string>
#include <vector>

#include "kernels/attention/cuda/path/path.hpp"
#include "kernels/test_path_support.hpp"

namespace lcr::test::cudapath {

struct GpuCase {
  std::string name;
  int B = 2, L = 7, H = 4, Hkv = 2, D = 64;
  bool fox = false;
  int64_t pos0 = 0;
  float softcap = 0.f;
  int superchunk = 0;  // 0 = automatic
  int warp_rows = 0;   // the carry kernel's tuning knob (0 = automatic)
  pathtest::BetaDraw beta = pathtest::BetaDraw::Mixed;
  uint64_t seed = 1;
};
inline void PrintTo(const GpuCase& c, std::ostream* os) { *os << c.name; }

// Kernel results as float vectors, named like pathtest::Result's gradients.
struct KernelResult {
  std::vector<float> o, lse;
  std::map<std::string, std::vector<float>> grad;
  std::map<std::string, std::vector<float>> fold;  // "q", "k", "p" when folds were asked for
  bool all_written = true;                         // no poison (NaN) left in any output
};

// Gpu: the CUDA build; Emulator: the SIMT emulator's Hopper form (wgmma); EmulatorMmaSync: its
// form without wgmma (each product by mma.sync), the code sm_80 .. sm_89 run.
enum class Device { Gpu, Emulator, EmulatorMmaSync };
inline bool on_emulator(Device d) { return d != Device::Gpu; }

// The float64 problem of a case, the problem the kernel sees (q, k, v, dout rounded to bf16;
// w, beta, gates to fp32) and the "naive" problem (w in bf16 too).
struct Problems {
  pathtest::PathProblem exact, in, naive;
};
Problems make_problems(const GpuCase& c);

// Gradients of the span boundary folds (path.hpp FoldGrads) to feed the backward with.
struct FoldSeeds {
  std::vector<float> dq, dk, dp;  // [B, L, H, D], [B, L, Hkv, D], [B, Hkv, D, D]
};

// Runs the CUDA kernels on p (its values must already be bf16/fp32-representable); with
// folds, the forward also returns the span's folds and the backward takes their gradients.
KernelResult run_kernels(const GpuCase& c, const pathtest::PathProblem& p, bool backward,
                         Device dev, const FoldSeeds* folds = nullptr);

double rel_error(const std::vector<float>& a, const std::vector<double>& b);

// The Kokkos PaTH in float64 (forward and backward, as pathtest::run_path<double>), with the
// forward's o rounded to bf16 before the backward when round_o (the naive yardstick).
Result run_float64(const pathtest::PathProblem& p, bool round_o);
double rel_error(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace lcr::test::cudapath
