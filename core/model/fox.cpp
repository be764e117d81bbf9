#include "core/model/fox.hpp"

#include "kernels/attention/kokkos/math.hpp"

namespace lcr {

using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>;

template <class T>
void fox_gates_forward(const View3<const T>& z, AttentionRunner<T>& runner, const View3<T>& c,
                       double scale) {
  View3<T> logf(Kokkos::view_alloc(Kokkos::WithoutInitializing, "lcr::fox_logf"), z.layout());
  const T* zp = z.data();
  T* lp = logf.data();
  Kokkos::parallel_for(
      "lcr::fox_log_gate", Range(0, int64_t(z.size())),
      KOKKOS_LAMBDA(int64_t i) { lp[i] = T(-scale * kmath::softplus(-double(zp[i]))); });
  runner.global_cumsum(logf, c, false);
}

template <class T>
void fox_gates_backward(const View3<const T>& z, AttentionRunner<T>& runner,
                        const View3<const T>& dc, const View3<T>& dz, double scale) {
  runner.global_cumsum(dc, dz, true);  // dz holds dlogf here
  const T* zp = z.data();
  T* dp = dz.data();
  // d (s log sigmoid(z)) / dz = s sigmoid(-z)
  Kokkos::parallel_for(
      "lcr::fox_gate_chain", Range(0, int64_t(z.size())), KOKKOS_LAMBDA(int64_t i) {
        dp[i] = T(double(dp[i]) * scale * kmath::sigmoid(-double(zp[i])));
      });
}

template void fox_gates_forward<float>(const View3<const float>&, AttentionRunner<float>&,
                                       const View3<float>&, double);
template void fox_gates_forward<double>(const View3<const double>&, AttentionRunner<double>&,
                                        const View3<double>&, double);
template void fox_gates_backward<float>(const View3<const float>&, AttentionRunner<float>&,
                                        const View3<const float>&, const View3<float>&, double);
template void fox_gates_backward<double>(const View3<const double>&, AttentionRunner<double>&,
                                         const View3<const double>&, const View3<double>&, double);

}  // namespace lcr
