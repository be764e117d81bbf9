#include "core/model/runner.hpp"

#include "kernels/base/error.hpp"

namespace lcr {

template <class T>
void local_cumsum(const View3<const T>& x, const View3<T>& out, bool reverse) {
  require(shape_of(x) == shape_of(out), "cumsum: input ", shape_string(shape_of(x)), " and output ",
          shape_string(shape_of(out)), " differ");
  const int64_t L = x.extent(1), H = x.extent(2);
  // One thread per (b, h) walks the rows in order: deterministic.
  Kokkos::parallel_for(
      "lcr::local_cumsum", Kokkos::RangePolicy<ExecSpace>(0, x.extent(0) * H),
      KOKKOS_LAMBDA(int64_t t) {
        const int64_t b = t / H, h = t % H;
        double acc = 0;
        for (int64_t i = 0; i < L; ++i) {
          const int64_t r = reverse ? L - 1 - i : i;
          acc += double(x(b, r, h));
          out(b, r, h) = T(acc);
        }
      });
}

template void local_cumsum<float>(const View3<const float>&, const View3<float>&, bool);
template void local_cumsum<double>(const View3<const double>&, const View3<double>&, bool);

}  // namespace lcr
