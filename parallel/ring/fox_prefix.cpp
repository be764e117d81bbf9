#include "parallel/ring/fox_prefix.hpp"

#include <vector>

#include "kernels/base/error.hpp"

namespace lcr {
namespace {

// Sum over a chunk's rows [r0, r0 + n) of x [B, L, H], per (b, h), in double.
template <class T>
View2<double> chunk_sums(const View3<const T>& x, int64_t r0, int64_t n) {
  const int B = x.extent(0), H = x.extent(2);
  View2<double> s("lcr::fox_chunk_sum", B, H);
  Kokkos::parallel_for(
      "lcr::fox_chunk_sum", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {B, H}),
      KOKKOS_LAMBDA(int b, int h) {
        double acc = 0;
        for (int64_t t = r0; t < r0 + n; ++t) acc += double(x(b, t, h));
        s(b, h) = acc;
      });
  return s;
}

// y[b, t, h] = offset[b, h] + running sum of x over the chunk's rows, forward (inclusive
// prefix) or backward (inclusive suffix).
template <class T>
void chunk_scan(const View3<const T>& x, const View3<T>& y, int64_t r0, int64_t n,
                const View2<double>& offset, bool reverse) {
  const int B = x.extent(0), H = x.extent(2);
  Kokkos::parallel_for(
      "lcr::fox_chunk_scan", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {B, H}),
      KOKKOS_LAMBDA(int b, int h) {
        double acc = offset(b, h);
        for (int64_t u = 0; u < n; ++u) {
          const int64_t t = reverse ? r0 + n - 1 - u : r0 + u;
          acc += double(x(b, t, h));
          y(b, t, h) = T(acc);
        }
      });
}

template <class T>
void global_scan(Communicator& comm, const SeqLayout& layout, const View3<const T>& x,
                 const View3<T>& y, bool reverse, const char* what) {
  const int N = comm.size(), me = comm.rank();
  require(layout.ranks() == N, what, ": the layout is for ", layout.ranks(),
          " ranks, the communicator has ", N);
  const int64_t Lr = layout.local_length(me);
  require(int64_t(x.extent(1)) == Lr && shape_of(x) == shape_of(y), what, ": rank ", me, " holds ",
          Lr, " positions (", layout.describe(), ") but got ", shape_string(shape_of(x)), " -> ",
          shape_string(shape_of(y)), "; both must be [B, L_local, H]");
  const int B = x.extent(0), H = x.extent(2), per = layout.chunks_per_rank();
  const size_t bh = size_t(B) * size_t(H);

  // Every chunk's sum, gathered: rank r's slot i lands at [(r * per + i) * B * H].
  std::vector<double> mine(size_t(per) * bh), all(size_t(N) * size_t(per) * bh);
  const auto& owned = layout.chunks_of(me);
  for (int i = 0; i < per; ++i) {
    const Chunk& ch = layout.chunk(owned[size_t(i)]);
    auto h =
        Kokkos::create_mirror_view_and_copy(HostSpace(), chunk_sums(x, ch.local_offset, ch.length));
    std::copy(h.data(), h.data() + bh, mine.begin() + ptrdiff_t(size_t(i) * bh));
  }
  comm.allgather(mine.data(), all.data(), mine.size());
  // Sum of global chunk c, per (b, h).
  std::vector<const double*> sum_of(size_t(layout.num_chunks()));
  for (int r = 0; r < N; ++r)
    for (int i = 0; i < per; ++i)
      sum_of[size_t(layout.chunks_of(r)[size_t(i)])] = all.data() + (size_t(r) * per + i) * bh;

  for (int c : owned) {
    const Chunk& ch = layout.chunk(c);
    View2<double> off("lcr::fox_offset", B, H);
    auto ho = Kokkos::create_mirror_view(off);
    for (size_t e = 0; e < bh; ++e) {
      double acc = 0;  // chunks strictly before c (forward) or after c (backward)
      if (!reverse)
        for (int o = 0; o < c; ++o) acc += sum_of[size_t(o)][e];
      else
        for (int o = c + 1; o < layout.num_chunks(); ++o) acc += sum_of[size_t(o)][e];
      ho.data()[e] = acc;
    }
    Kokkos::deep_copy(off, ho);
    chunk_scan(x, y, ch.local_offset, ch.length, off, reverse);
  }
  Kokkos::fence();
}

}  // namespace

template <class T>
void fox_global_cumulative(Communicator& comm, const SeqLayout& layout, const View3<const T>& log_f,
                           const View3<T>& c) {
  global_scan(comm, layout, log_f, c, false, "fox_global_cumulative");
}

template <class T>
void fox_global_cumulative_backward(Communicator& comm, const SeqLayout& layout,
                                    const View3<const T>& dc, const View3<T>& dlog_f) {
  global_scan(comm, layout, dc, dlog_f, true, "fox_global_cumulative_backward");
}

#define LCR_INSTANTIATE(T)                                                                       \
  template void fox_global_cumulative<T>(Communicator&, const SeqLayout&, const View3<const T>&, \
                                         const View3<T>&);                                       \
  template void fox_global_cumulative_backward<T>(Communicator&, const SeqLayout&,               \
                                                  const View3<const T>&, const View3<T>&);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

}  // namespace lcr
