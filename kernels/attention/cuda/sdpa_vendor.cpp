// Which implementation serves an SDPA call (sdpa.hpp, SdpaImpl): lcr's kernels or cuDNN's
// fused attention (kernels/attention/cuda/cudnn, built with LCR_ENABLE_CUDNN). The one
// place that decides, for the forward and the backward alike.
#include "kernels/attention/cuda/sdpa_internal.hpp"
#include "kernels/base/error.hpp"
#if LCR_HAVE_CUDNN
#include "kernels/attention/cuda/cudnn/cudnn_sdpa.hpp"
#endif

namespace lcr::cuda {
namespace {
[[maybe_unused]] constexpr const char* kNoCudnn =
    "this build has no cuDNN support (configure with -DLCR_ENABLE_CUDNN=ON)";
}  // namespace

const char* sdpa_impl_name(SdpaImpl impl) {
  switch (impl) {
    case SdpaImpl::Lcr:
      return "lcr";
    case SdpaImpl::Cudnn:
      return "cudnn";
    case SdpaImpl::Auto:
      return "auto";
  }
  return "?";
}

SdpaImpl parse_sdpa_impl(const std::string& name) {
  if (name == "lcr") return SdpaImpl::Lcr;
  if (name == "cudnn") return SdpaImpl::Cudnn;
  if (name == "auto") return SdpaImpl::Auto;
  throw_error("attention kernels '", name,
              "' is not one of lcr (lcr's CUDA kernels), cudnn (cuDNN's fused attention, an "
              "error where it cannot serve a call) or auto (cuDNN where it can, lcr elsewhere)");
}

bool cudnn_attention_available(std::string* why) {
#if LCR_HAVE_CUDNN
  return cudnn::available(why);
#else
  if (why) *why = kNoCudnn;
  return false;
#endif
}

namespace detail {
namespace {
// impl = cudnn: cuDNN must run the call; otherwise auto's fallback (lcr's kernels).
bool fall_back_or_refuse(const SdpaArgs& a, const char* dir, const std::string& why) {
  if (a.impl == SdpaImpl::Cudnn)
    throw_error("cuda sdpa_", dir, ": impl = cudnn cannot serve this call: ", why,
                " (impl = auto falls back to lcr's kernels)");
  return false;
}
}  // namespace

bool vendor_forward(const SdpaArgs& a, __nv_bfloat16* o, const float* o_f32, float* lse,
                    cudaStream_t s) {
  if (a.impl == SdpaImpl::Lcr) return false;
#if LCR_HAVE_CUDNN
  if (const char* why = cudnn::unsupported_forward(a, o, o_f32, lse))
    return fall_back_or_refuse(a, "forward", why);
  std::string why;
  return cudnn::forward(a, o, lse, s, &why) || fall_back_or_refuse(a, "forward", why);
#else
  (void)o, (void)o_f32, (void)lse, (void)s;
  return fall_back_or_refuse(a, "forward", kNoCudnn);
#endif
}

bool vendor_backward(const SdpaArgs& a, const float* lse, const __nv_bfloat16* o,
                     const __nv_bfloat16* dout, float* dq, float* dk, float* dv,
                     const float* dbias_q, const float* dbias_k, const float* dbias_q_sums,
                     bool accumulate, cudaStream_t s, __nv_bfloat16* dq16, __nv_bfloat16* dk16) {
  if (a.impl == SdpaImpl::Lcr) return false;
#if LCR_HAVE_CUDNN
  if (const char* why =
          cudnn::unsupported_backward(a, o, dq, dk, dv, dbias_q, dbias_k, dbias_q_sums))
    return fall_back_or_refuse(a, "backward", why);
  std::string why;
  return cudnn::backward(a, lse, o, dout, dq, dk, dv, accumulate, s, &why, dq16, dk16) ||
         fall_back_or_refuse(a, "backward", why);
#else
  (void)lse, (void)o, (void)dout, (void)dq, (void)dk, (void)dv, (void)dbias_q, (void)dbias_k,
      (void)dbias_q_sums, (void)accumulate, (void)s, (void)dq16, (void)dk16;
  return fall_back_or_refuse(a, "backward", kNoCudnn);
#endif
}

}  // namespace detail

bool sdpa_forward_vendor(const SdpaArgs& a, __nv_bfloat16* o, float* lse, cudaStream_t s) {
  check(a);
  require(o && lse,
          "cuda sdpa_forward_vendor: o [B, Lq, H, Dv] bf16 and lse [B, H, Lq] fp32 "
          "are required");
  return a.Lq > 0 && detail::vendor_forward(a, o, nullptr, lse, s);
}

bool sdpa_backward_bf16_qk(const SdpaArgs& a, const float* lse, const __nv_bfloat16* o,
                           const __nv_bfloat16* dout, __nv_bfloat16* dq, __nv_bfloat16* dk,
                           float* dv, cudaStream_t s) {
  check(a);
  require(a.Lq > 0 && a.Lk > 0 && lse && o && dout && dq && dk && dv,
          "cuda sdpa_backward_bf16_qk: needs Lq, Lk > 0 and device pointers lse, o, dout, dq, "
          "dk, dv");
  return detail::vendor_backward(a, lse, o, dout, nullptr, nullptr, dv, nullptr, nullptr, nullptr,
                                 false, s, dq, dk);
}

}  // namespace lcr::cuda
