// Host-side argument checks of the CUDA SDPA (sdpa.hpp): every message names the bad
// value and what would be accepted, so a caller wiring a scheme to the GPU sees at once
// which tensor or option is off.
#include "kernels/attention/cuda/sdpa.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda {

void check(const SdpaArgs& a) {
  require(a.B >= 1 && a.Lq >= 0 && a.Lk >= 0,
          "cuda sdpa: need B >= 1, Lq >= 0, Lk >= 0; got B=", a.B, " Lq=", a.Lq, " Lk=", a.Lk);
  require(a.H >= 1 && a.Hkv >= 1 && a.H % a.Hkv == 0, "cuda sdpa: H=", a.H,
          " query heads must be a positive multiple of Hkv=", a.Hkv,
          " KV heads (GQA: query head h reads KV head h / (H/Hkv))");
  auto width_ok = [](int d) { return d >= 8 && d <= 256 && d % 8 == 0; };
  require(width_ok(a.D), "cuda sdpa: QK head width D=", a.D,
          " is not supported; use a multiple of 8 from 8 to 256 (pad the lanes with zeros)");
  require(width_ok(a.Dv), "cuda sdpa: V head width Dv=", a.Dv,
          " is not supported; use a multiple of 8 from 8 to 256 (pad V with zeros)");
  require(a.softcap >= 0.f, "cuda sdpa: softcap=", a.softcap, " must be >= 0 (0 = off)");
  const bool has_rows = a.Lq > 0, has_keys = a.Lk > 0;
  require(!has_rows || a.q != nullptr, "cuda sdpa: q is null but Lq=", a.Lq);
  require(!has_keys || (a.k != nullptr && a.v != nullptr),
          "cuda sdpa: k or v is null but Lk=", a.Lk);
  // 16-byte alignment: the kernels load q/k/v rows with 16-byte cp.async copies, and a row
  // of D bf16 values is 2*D bytes (a multiple of 16 since D % 8 == 0).
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  require(aligned(a.q) && aligned(a.k) && aligned(a.v),
          "cuda sdpa: q, k and v must be 16-byte aligned device pointers (cudaMalloc gives "
          "256-byte alignment; an offset into a buffer must be a multiple of 8 elements)");
}

}  // namespace lcr::cuda
