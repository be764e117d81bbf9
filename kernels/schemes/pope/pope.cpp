// TEMPORARY: replaced by the POPE implementation in this session.
#include "kernels/schemes/pope/pope.hpp"

#include "core/error.hpp"
namespace lcr::pope {
void validate(const AttentionSpec&) { throw_error("pope not implemented yet"); }
void add_params(const AttentionSpec&, ParamLayout&) {}
int lanes_width(const AttentionSpec& s) { return s.head_dim; }
double sdpa_scale(const AttentionSpec&) { return 1.0; }
template <class T>
void lanes_forward(const LaneArgs<T>&, const View4<T>&, const View4<T>&) {}
template <class T>
void lanes_backward(const LaneArgs<T>&, const View4<const T>&, const View4<const T>&,
                    const View4<T>&, const View4<T>&, ParamSet<T>&) {}
template void lanes_forward<float>(const LaneArgs<float>&, const View4<float>&,
                                   const View4<float>&);
template void lanes_forward<double>(const LaneArgs<double>&, const View4<double>&,
                                    const View4<double>&);
template void lanes_backward<float>(const LaneArgs<float>&, const View4<const float>&,
                                    const View4<const float>&, const View4<float>&,
                                    const View4<float>&, ParamSet<float>&);
template void lanes_backward<double>(const LaneArgs<double>&, const View4<const double>&,
                                     const View4<const double>&, const View4<double>&,
                                     const View4<double>&, ParamSet<double>&);
}  // namespace lcr::pope
