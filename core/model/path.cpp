#include "core/model/path.hpp"

#include "core/model/gemm.hpp"
#include "core/model/layers.hpp"
#include "kernels/base/error.hpp"
#include "kernels/schemes/path/params.hpp"

namespace lcr {
// Kernel helpers sit in a named namespace: nvcc's extended lambdas may not live in functions
// of an anonymous namespace.
namespace path_model_detail {

// Rows [src_r0, src_r0 + n) of src [B, src_L, inner] -> rows [dst_r0, ..) of dst [B, dst_L,
// inner]: a segment of a [B, L, Hkv, d] tensor to a contiguous [B, n, Hkv, d] one and back.
template <class T>
void copy_rows(const T* src, int64_t src_L, int64_t src_r0, T* dst, int64_t dst_L, int64_t dst_r0,
               int64_t B, int64_t n, int64_t inner) {
  Kokkos::parallel_for(
      "lcr::path_copy_rows",
      Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>(0, B * n * inner),
      KOKKOS_LAMBDA(int64_t t) {
        const int64_t e = t % inner, r = (t / inner) % n, b = t / (inner * n);
        dst[(b * dst_L + dst_r0 + r) * inner + e] = src[(b * src_L + src_r0 + r) * inner + e];
      });
}

// A contiguous copy of a segment's rows of x [B, L, Hkv, d].
template <class T>
View4<T> segment_copy(const View4<T>& x, const RowSegment& s) {
  View4<T> y(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::path_segment"), x.extent(0),
             size_t(s.rows), x.extent(2), x.extent(3));
  const int64_t inner = int64_t(x.extent(2) * x.extent(3));
  copy_rows<T>(x.data(), x.extent(1), s.row0, y.data(), s.rows, 0, x.extent(0), s.rows, inner);
  return y;
}

// Writes a segment's contiguous rows y [B, n, Hkv, d] back into x [B, L, Hkv, d].
template <class T>
void segment_store(const View4<T>& y, const RowSegment& s, const View4<T>& x) {
  const int64_t inner = int64_t(x.extent(2) * x.extent(3));
  copy_rows<T>(y.data(), s.rows, 0, x.data(), x.extent(1), s.row0, x.extent(0), s.rows, inner);
}

}  // namespace path_model_detail

using namespace path_model_detail;

template <class T>
void path_forward(const ModelLayout& m, const BlockParams<T>& p, LayerActivations<T>& a,
                  AttentionRunner<T>& runner, const std::vector<RowSegment>& segs) {
  const int64_t R = a.xn1.extent(0), D = m.D(), Hkv = m.Hkv();
  const int64_t C = int64_t(a.path_u.extent(2) * a.path_u.extent(3));  // Hkv d
  const auto N = Trans::No;
  const T* xn1 = a.xn1.data();
  gemm<T>(N, N, R, C, D, 1, xn1, p.path_u.data(), 0, a.path_u.data());
  gemm<T>(N, N, R, Hkv, D, 1, xn1, p.path_beta_w.data(), 0, a.path_z.data());
  add_bias<T>(p.path_beta_b, View2<T>(a.path_z.data(), R, Hkv));
  path::beta_forward<T>(a.path_z, a.path_beta);

  a.path_prefix = runner.rows_before_segments(a.path_u);
  require(a.path_prefix.size() == segs.size(), "attention runner gave ", a.path_prefix.size(),
          " PaTH convolution prefixes for ", segs.size(), " segments");
  const path::WConv opt{m.config().path_w_silu};
  if (segs.size() == 1) {  // the segment is every row: no copies
    path::w_forward<T>(opt, a.path_u, p.path_conv, a.path_prefix[0], a.path_w);
    return;
  }
  for (size_t s = 0; s < segs.size(); ++s) {
    const View4<T> us = segment_copy(a.path_u, segs[s]);
    View4<T> ws(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::path_w_segment"),
                us.layout());
    path::w_forward<T>(opt, us, p.path_conv, a.path_prefix[s], ws);
    segment_store(ws, segs[s], a.path_w);
  }
}

template <class T>
void path_backward(const ModelLayout& m, const BlockParams<T>& p, const BlockParams<T>& g,
                   const LayerActivations<T>& a, BackwardWork<T>& w, AttentionRunner<T>& runner,
                   const std::vector<RowSegment>& segs) {
  const int64_t R = a.xn1.extent(0), D = m.D(), Hkv = m.Hkv();
  const int64_t C = int64_t(a.path_u.extent(2) * a.path_u.extent(3));
  const auto N = Trans::No, Y = Trans::Yes;
  const T* xn1 = a.xn1.data();
  // beta branch: z = xn1 Wb + b.
  path::beta_backward<T>(a.path_z, w.attn.dpath_beta, w.dpath_z);
  const T* dz = w.dpath_z.data();
  gemm<T>(N, Y, R, D, Hkv, 1, dz, p.path_beta_w.data(), 1, w.dxn.data());
  gemm<T>(Y, N, D, Hkv, R, 1, xn1, dz, 1, g.path_beta_w.data());
  bias_backward<T>(View2<const T>(dz, R, Hkv), g.path_beta_b);

  // w branch: dw -> du (per segment) and dconv (added), then the prefix rows' gradients go
  // back to the rows they were read from.
  const path::WConv opt{m.config().path_w_silu};
  std::vector<View4<T>> dprefix(segs.size());
  for (size_t s = 0; s < segs.size(); ++s)
    if (a.path_prefix[s].extent(0) > 0)
      dprefix[s] = View4<T>("lcr::path_dprefix", a.path_prefix[s].layout());
  if (segs.size() == 1) {
    path::w_backward<T>(opt, a.path_u, p.path_conv, a.path_prefix[0], w.attn.dpath_w, w.dpath_u,
                        g.path_conv, dprefix[0]);
  } else {
    for (size_t s = 0; s < segs.size(); ++s) {
      const View4<T> us = segment_copy(a.path_u, segs[s]);
      const View4<T> dws = segment_copy(w.attn.dpath_w, segs[s]);
      View4<T> dus(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::path_du_segment"),
                   us.layout());
      path::w_backward<T>(opt, us, p.path_conv, a.path_prefix[s], dws, dus, g.path_conv,
                          dprefix[s]);
      segment_store(dus, segs[s], w.dpath_u);
    }
  }
  runner.rows_before_segments_backward(dprefix, w.dpath_u);
  // u = xn1 Wu.
  const T* du = w.dpath_u.data();
  gemm<T>(N, Y, R, D, C, 1, du, p.path_u.data(), 1, w.dxn.data());
  gemm<T>(Y, N, D, C, R, 1, xn1, du, 1, g.path_u.data());
}

#define LCR_INSTANTIATE(T)                                                                         \
  template void path_forward<T>(const ModelLayout&, const BlockParams<T>&, LayerActivations<T>&,   \
                                AttentionRunner<T>&, const std::vector<RowSegment>&);              \
  template void path_backward<T>(const ModelLayout&, const BlockParams<T>&, const BlockParams<T>&, \
                                 const LayerActivations<T>&, BackwardWork<T>&,                     \
                                 AttentionRunner<T>&, const std::vector<RowSegment>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
