// Tests of the CUDA PaTH kernels.
#include <gtest/gtest.h>

#include <cstdio>

#include "path_cuda_support.hpp"

namespace lcr::test::cudapath {
namespace {

void fwd(GpuCase c) {
  const Problems ps = make_problems(c);
  const KernelResult k = run_kernels(c, ps.in, false, Device::Emulator);
  const Result ref = pathtest::run_path_reference(ps.in);
  const Result ex = pathtest::run_path_reference(ps.exact);
  const Result nv = pathtest::run_path_reference(ps.naive);
  std::printf("%-30s o err %.3e (naive %.3e)  lse err %.3e (naive %.3e) written %d\n",
              c.name.c_str(), rel_error(k.o, ref.o), rel_error(nv.o, ex.o),
              rel_error(k.lse, ref.lse), rel_error(nv.lse, ex.lse), int(k.all_written));
}

void bwd(GpuCase c) {
  const Problems ps = make_problems(c);
  const KernelResult k = run_kernels(c, ps.in, true, Device::Emulator);
  const Result ref = pathtest::run_path<double>(ps.in, true);
  const Result ex = pathtest::run_path<double>(ps.exact, true);
  const Result nv = pathtest::run_path<double>(ps.naive, true);
  std::printf("%-24s o %.2e/%.2e", c.name.c_str(), rel_error(k.o, ref.o), rel_error(nv.o, ex.o));
  for (const auto& [name, g] : k.grad)
    std::printf(" %s %.2e/%.2e", name.c_str(), rel_error(g, ref.grad.at(name)),
                rel_error(nv.grad.at(name), ex.grad.at(name)));
  std::printf(" written %d\n", int(k.all_written));
}

TEST(CudaPathEmu, BackwardSmoke) {
  GpuCase c;
  c.name = "L7";
  c.L = 7;
  bwd(c);
  c.name = "L129 S128";
  c.L = 129;
  c.superchunk = 128;
  bwd(c);
  c.name = "L300 S128 fox";
  c.L = 300;
  c.fox = true;
  bwd(c);
  c.name = "L300 S256 fox cap";
  c.superchunk = 256;
  c.softcap = 5;
  bwd(c);
  c.name = "L200 D128 S128";
  c.L = 200;
  c.D = 128;
  c.H = 2;
  c.Hkv = 1;
  c.fox = false;
  c.softcap = 0;
  c.superchunk = 128;
  bwd(c);
}

TEST(CudaPathEmu, ForwardSmoke) {
  GpuCase c;
  c.name = "L7";
  c.L = 7;
  fwd(c);
  c.name = "L129 S128";
  c.L = 129;
  c.superchunk = 128;
  fwd(c);
  c.name = "L300 S128 fox";
  c.L = 300;
  c.fox = true;
  fwd(c);
  c.name = "L300 S256 fox cap";
  c.superchunk = 256;
  c.softcap = 5;
  fwd(c);
  c.name = "L300 S128 wr16";
  c.superchunk = 128;
  c.softcap = 0;
  c.fox = false;
  c.warp_rows = 16;
  fwd(c);
  c.name = "L200 D128 S128";
  c.L = 200;
  c.D = 128;
  c.warp_rows = 0;
  c.H = 2;
  c.Hkv = 1;
  fwd(c);
  c.name = "L200 D128 S128 wr32";
  c.warp_rows = 32;
  fwd(c);
}

}  // namespace
}  // namespace lcr::test::cudapath
