#include "core/model/fox.hpp"

#include "core/error.hpp"
#include "kernels/attention/kokkos/math.hpp"

namespace lcr {
namespace {

// Two passes per segment, one thread per (b, h) walking the rows in order (deterministic):
//   segment_totals: totals(b, s, h) = sum of value over the segment's rows;
//   segment_scan:   out(b, r, h) = carry(b, s, h) + inclusive prefix (suffix when reverse)
//                   sum of value, times post(b, r, h).
// The running sums are kept in double whatever T is: c falls to -O(L) and float32 running
// sums would lose the small differences c_i - c_j of nearby positions.
template <class T, class F>
void segment_totals(const RowSegment& seg, int64_t s, int64_t B, int64_t H, F value,
                    const View3<T>& totals) {
  const int64_t row0 = seg.row0, n = seg.rows;
  Kokkos::parallel_for(
      "lcr::fox_totals", Kokkos::RangePolicy<ExecSpace>(0, B * H), KOKKOS_LAMBDA(int64_t t) {
        const int64_t b = t / H, h = t % H;
        double acc = 0;
        for (int64_t r = row0; r < row0 + n; ++r) acc += value(b, r, h);
        totals(b, s, h) = T(acc);
      });
}

template <class T, class F, class P>
void segment_scan(const RowSegment& seg, int64_t s, bool reverse, F value, P post,
                  const View3<const T>& carry, const View3<T>& out) {
  const int64_t H = out.extent(2), row0 = seg.row0, n = seg.rows;
  Kokkos::parallel_for(
      "lcr::fox_scan", Kokkos::RangePolicy<ExecSpace>(0, out.extent(0) * H),
      KOKKOS_LAMBDA(int64_t t) {
        const int64_t b = t / H, h = t % H;
        double acc = double(carry(b, s, h));
        for (int64_t i = 0; i < n; ++i) {
          const int64_t r = row0 + (reverse ? n - 1 - i : i);
          acc += value(b, r, h);
          out(b, r, h) = T(acc * post(b, r, h));
        }
      });
}

void check_segments(const std::vector<RowSegment>& segs, int64_t L) {
  int64_t next = 0;
  for (const auto& s : segs) {
    require(s.row0 == next && s.rows > 0 && s.pos0 >= 0,
            "attention runner segments must tile the local rows in order with positions >= 0");
    next += s.rows;
  }
  require(next == L, "attention runner segments cover ", next, " rows, the batch has ", L);
}

}  // namespace

template <class T>
void fox_gates_forward(const View3<const T>& z, const std::vector<RowSegment>& segs,
                       AttentionRunner<T>& runner, const View3<T>& c) {
  const int64_t B = z.extent(0), H = z.extent(2), S = int64_t(segs.size());
  check_segments(segs, z.extent(1));
  View3<T> totals("lcr::fox_totals", B, S, H), carry("lcr::fox_carry", B, S, H);
  auto logf = KOKKOS_LAMBDA(int64_t b, int64_t r, int64_t h)->double {
    return -kmath::softplus(-double(z(b, r, h)));  // log sigmoid(z)
  };
  auto one = KOKKOS_LAMBDA(int64_t, int64_t, int64_t)->double { return 1.0; };
  for (int64_t s = 0; s < S; ++s) segment_totals<T>(segs[size_t(s)], s, B, H, logf, totals);
  runner.segment_carry(segs, totals, carry, false);
  for (int64_t s = 0; s < S; ++s) segment_scan<T>(segs[size_t(s)], s, false, logf, one, carry, c);
}

template <class T>
void fox_gates_backward(const View3<const T>& z, const std::vector<RowSegment>& segs,
                        AttentionRunner<T>& runner, const View3<const T>& dc, const View3<T>& dz) {
  const int64_t B = z.extent(0), H = z.extent(2), S = int64_t(segs.size());
  check_segments(segs, z.extent(1));
  View3<T> totals("lcr::fox_totals", B, S, H), carry("lcr::fox_carry", B, S, H);
  auto grad = KOKKOS_LAMBDA(int64_t b, int64_t r, int64_t h)->double { return dc(b, r, h); };
  // d log sigmoid(z) / dz = sigmoid(-z)
  auto chain = KOKKOS_LAMBDA(int64_t b, int64_t r, int64_t h)->double {
    return kmath::sigmoid(-double(z(b, r, h)));
  };
  for (int64_t s = 0; s < S; ++s) segment_totals<T>(segs[size_t(s)], s, B, H, grad, totals);
  runner.segment_carry(segs, totals, carry, true);
  for (int64_t s = 0; s < S; ++s) segment_scan<T>(segs[size_t(s)], s, true, grad, chain, carry, dz);
}

template void fox_gates_forward<float>(const View3<const float>&, const std::vector<RowSegment>&,
                                       AttentionRunner<float>&, const View3<float>&);
template void fox_gates_forward<double>(const View3<const double>&, const std::vector<RowSegment>&,
                                        AttentionRunner<double>&, const View3<double>&);
template void fox_gates_backward<float>(const View3<const float>&, const std::vector<RowSegment>&,
                                        AttentionRunner<float>&, const View3<const float>&,
                                        const View3<float>&);
template void fox_gates_backward<double>(const View3<const double>&, const std::vector<RowSegment>&,
                                         AttentionRunner<double>&, const View3<const double>&,
                                         const View3<double>&);

}  // namespace lcr
