// Which implementation serves an SDPA call (sdpa.hpp, SdpaImpl): lcr's kernels or cuDNN's
// fused attention (kernels/attention/cuda/cudnn, built with LCR_ENABLE_CUDNN). The one
// place that decides, for the forward and the backward alike.
#include "core/error.hpp"
#include "kernels/attention/cuda/sdpa_internal.hpp"
#if LCR_HAVE_CUDNN
#include "kernels/attention/cuda/cudnn/cudnn_sdpa.hpp"
#endif

namespace lcr::cuda {

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
  if (why) *why = "this build has no cuDNN support (configure with -DLCR_ENABLE_CUDNN=ON)";
  return false;
#endif
}

namespace detail {
namespace {
[[noreturn]] void refuse(const char* dir, const char* why) {
  throw_error("cuda sdpa_", dir, ": impl = cudnn cannot serve this call: ", why,
              " (impl = auto falls back to lcr's kernels)");
}
}  // namespace

bool vendor_forward(const SdpaArgs& a, __nv_bfloat16* o, const float* o_f32, float* lse,
                    cudaStream_t s) {
  if (a.impl == SdpaImpl::Lcr) return false;
  const bool required = a.impl == SdpaImpl::Cudnn;
#if LCR_HAVE_CUDNN
  if (const char* why = cudnn::unsupported_forward(a, o, o_f32, lse)) {
    if (required) refuse("forward", why);
    return false;
  }
  return cudnn::forward(a, o, lse, s, required);
#else
  (void)o, (void)o_f32, (void)lse, (void)s;
  if (required) refuse("forward", "this build has no cuDNN support (-DLCR_ENABLE_CUDNN=ON)");
  return false;
#endif
}

bool vendor_backward(const SdpaArgs& a, const float* lse, const __nv_bfloat16* o,
                     const __nv_bfloat16* dout, float* dq, float* dk, float* dv,
                     const float* dbias_q, const float* dbias_k, const float* dbias_q_sums,
                     bool accumulate, cudaStream_t s) {
  if (a.impl == SdpaImpl::Lcr) return false;
  const bool required = a.impl == SdpaImpl::Cudnn;
#if LCR_HAVE_CUDNN
  if (const char* why =
          cudnn::unsupported_backward(a, o, dq, dk, dv, dbias_q, dbias_k, dbias_q_sums)) {
    if (required) refuse("backward", why);
    return false;
  }
  return cudnn::backward(a, lse, o, dout, dq, dk, dv, accumulate, s, required);
#else
  (void)lse, (void)o, (void)dout, (void)dq, (void)dk, (void)dv, (void)dbias_q, (void)dbias_k,
      (void)dbias_q_sums, (void)accumulate, (void)s;
  if (required) refuse("backward", "this build has no cuDNN support (-DLCR_ENABLE_CUDNN=ON)");
  return false;
#endif
}

}  // namespace detail
}  // namespace lcr::cuda
