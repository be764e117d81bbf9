// Tests of the model's CUDA layer kernels (core/model/cuda/gpu_layers.hpp) against the CPU
// layers (core/model/layers.hpp, loss.hpp, optimizer.hpp) instantiated in float64 on Kokkos
// host views, on fresh random inputs (the seed is printed on failure) at odd sizes.
//
// Tolerances. The GPU computes in fp32 from exactly the fp32 inputs the float64 reference
// reads, so the only error is fp32 rounding inside the kernel. A sum of K terms rounded in
// fp32 (sequentially, in a tree, or in row blocks) is off by at most about
// K eps sum|terms| and in practice by about sqrt(K) eps sum|terms| (eps = FLT_EPSILON =
// 2^-23). Every reduction is therefore checked against
//     tol = 8 eps (1 + sqrt(K)) * (sum of |terms|),
// a bound that random rounding stays far inside (typically ~0.5 eps sqrt(K)) while any
// wrong index, order, scale or formula is off by O(1) of the same magnitude. Elementwise
// results carry a few roundings plus expf's 2 ulp: 16 eps of the magnitude of their terms.
// Where a result can leave fp32's normal range (silu of z = -90 is ~1e-38) an absolute
// 1e-36 is added: there fp32 keeps fewer significant bits and no relative bound applies.
// Exact operations (copies, conversions, clamps, integer counts) are compared bit for bit,
// and so are two runs of each deterministic reduction (rmsnorm_backward, bias_backward,
// embedding_backward, sumsq_chunks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/model/cuda/gpu_gemm.hpp"
#include "core/model/cuda/gpu_layers.hpp"
#include "core/model/layers.hpp"
#include "core/model/loss.hpp"
#include "core/model/optimizer.hpp"
#include "cuda_test_util.hpp"
#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/attention/cuda/device_buffer.hpp"

namespace lcr::cuda::model {
namespace {

constexpr double kEps32 = 1.1920928955078125e-07;  // FLT_EPSILON = 2^-23
constexpr double kTiny = 1e-36;                    // below fp32's normal range: see above

const std::vector<int64_t> kRows = {1, 7, 129, 1000};
const std::vector<int64_t> kCols = {1, 7, 129, 300};  // 300: the float4 paths; others scalar
// RMSNorm widths: 1, 7, 129 warp per row (scalar); 300, 2052, 8192 block per row with the
// row in registers (1, 2, 4 float4 per thread); 8196 warp per row (float4), past that path.
const std::vector<int64_t> kNormCols = {1, 7, 129, 300, 2052, 8192, 8196};

// Vector sizes and indices from int64 (a helper, not size_t(n): in a declaration such as
// `std::vector<float> x(size_t(n));` that would declare a function).
size_t sz(int64_t n) { return static_cast<size_t>(n); }

double sum_rel(int64_t K) { return 8.0 * kEps32 * (1.0 + std::sqrt(double(K))); }

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ uint64_t(rd());
}
std::string sizes(const char* a, int64_t x, const char* b, int64_t y) {
  return std::string(a) + " " + std::to_string(x) + " " + b + " " + std::to_string(y);
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() = default;  // create(): only once a GPU is known to be there
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void create() { LCR_CUDA_CHECK(cudaStreamCreate(&s)); }
  void sync() const { LCR_CUDA_CHECK(cudaStreamSynchronize(s)); }
};

// Every test here: a GPU (or a skip with the reason), fresh random inputs whose seed is in
// the trace of every failure, and a stream of its own.
class GpuKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lcr::cuda::test::require_gpu();
    if (IsSkipped()) return;
    const uint64_t seed = fresh_seed();
    trace_.emplace(__FILE__, __LINE__, "seed " + std::to_string(seed));
    rng.seed(seed);
    st.create();
  }
  void TearDown() override { trace_.reset(); }

  std::mt19937_64 rng;
  Stream st;

 private:
  std::optional<::testing::ScopedTrace> trace_;
};
using GpuLayers = GpuKernelTest;
using GpuLoss = GpuKernelTest;
using GpuAdamW = GpuKernelTest;

// ---- host views for the float64 reference ----

View1<double> view1(const std::vector<float>& h) {
  View1<double> v("v", h.size());
  auto m = Kokkos::create_mirror_view(v);
  for (size_t i = 0; i < h.size(); ++i) m(i) = double(h[i]);
  Kokkos::deep_copy(v, m);
  return v;
}
View2<double> view2(const std::vector<float>& h, int64_t R, int64_t C) {
  View2<double> v("v", R, C);
  auto m = Kokkos::create_mirror_view(v);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) m(r, c) = double(h[sz(r * C + c)]);
  Kokkos::deep_copy(v, m);
  return v;
}
View1<int32_t> view1i(const std::vector<int32_t>& h) {
  View1<int32_t> v("v", h.size());
  auto m = Kokkos::create_mirror_view(v);
  for (size_t i = 0; i < h.size(); ++i) m(i) = h[i];
  Kokkos::deep_copy(v, m);
  return v;
}
std::vector<double> host(const View1<double>& v) {
  auto m = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  return std::vector<double>(m.data(), m.data() + m.extent(0));
}
std::vector<double> host(const View2<double>& v) {
  auto m = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  return std::vector<double>(m.data(), m.data() + m.extent(0) * m.extent(1));
}

// ---- comparisons ----

// Expects |got[i] - want[i]| <= tol[i] for every i (a NaN fails); reports the count and the
// worst offender relative to its tolerance.
void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::vector<double>& tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(tol.size(), want.size()) << what;
  int64_t bad = 0;
  size_t worst = 0;
  double worst_ratio = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]);
    if (err <= tol[i]) continue;
    ++bad;
    const double ratio = tol[i] > 0 ? err / tol[i] : std::numeric_limits<double>::infinity();
    if (!(ratio <= worst_ratio)) {  // NaN ratios win
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (bad) {
    std::ostringstream os;
    os << std::setprecision(10) << what << ": " << bad << " of " << got.size()
       << " values outside the tolerance; worst at " << worst << ": gpu " << got[worst]
       << ", float64 " << want[worst] << ", |diff| " << std::abs(double(got[worst]) - want[worst])
       << ", tol " << tol[worst];
    ADD_FAILURE() << os.str();
  }
}
void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rel,
                  double abs_tol, const std::string& what) {
  std::vector<double> tol(want.size());
  for (size_t i = 0; i < want.size(); ++i) tol[i] = rel * std::abs(want[i]) + abs_tol;
  expect_close(got, want, tol, what);
}

template <class T>
void expect_same_bits(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  if (a.empty()) return;
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += std::memcmp(&a[i], &b[i], sizeof(T)) != 0 ? 1 : 0;
  EXPECT_EQ(differ, 0u) << what << ": values differ bitwise between two identical runs";
}

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
uint16_t bits_of(__nv_bfloat16 x) { return __nv_bfloat16_raw(x).x; }
__nv_bfloat16 bf16_of(uint16_t u) {
  __nv_bfloat16_raw r;
  r.x = u;
  return __nv_bfloat16(r);
}
bool bf16_is_nan(uint16_t u) { return (u & 0x7f80u) == 0x7f80u && (u & 0x7fu) != 0; }

// Host float64 rstd of each row, rounded to fp32 (the saved rstd both sides then read).
std::vector<float> rstd_of(const std::vector<float>& x, int64_t R, int64_t D, double eps) {
  std::vector<float> s(sz(R));
  for (int64_t r = 0; r < R; ++r) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += double(x[sz(r * D + d)]) * x[sz(r * D + d)];
    s[sz(r)] = float(1.0 / std::sqrt(ss / double(D) + eps));
  }
  return s;
}

// ---- RMSNorm ----

TEST_F(GpuLayers, RmsNormForwardMatchesFloat64) {
  const float eps = 1e-5f;
  for (int64_t R : kRows)
    for (int64_t D : kNormCols) {
      SCOPED_TRACE(sizes("R", R, "D", D));
      const auto x = test::random_normal(sz(R * D), rng);
      const auto g = test::random_normal(sz(D), rng);
      DeviceBuffer<float> xd(x), gd(g), yd(sz(R * D)), sd(sz(R));
      yd.fill_bytes(0xFF);  // NaN: every output must be written
      sd.fill_bytes(0xFF);
      rmsnorm_forward(R, D, xd.data(), gd.data(), eps, yd.data(), sd.data(), st.s);
      st.sync();

      View2<double> y("y", R, D);
      View1<double> rstd("rstd", R);
      ::lcr::rmsnorm_forward<double>(view2(x, R, D), view1(g), double(eps), y, rstd);
      // rstd: a sum of D positive squares, then a sqrt and a division; y = x rstd g: two
      // more roundings (all products: relative bounds hold).
      const double rel = sum_rel(D);
      expect_close(sd.download(), host(rstd), rel, 0.0, "rstd");
      expect_close(yd.download(), host(y), rel + 4 * kEps32, kTiny, "y");
    }
}

TEST_F(GpuLayers, RmsNormBackwardMatchesFloat64) {
  for (int64_t R : kRows)
    for (int64_t D : kNormCols) {
      SCOPED_TRACE(sizes("R", R, "D", D));
      const auto x = test::random_normal(sz(R * D), rng);
      const auto g = test::random_normal(sz(D), rng);
      const auto dy = test::random_normal(sz(R * D), rng);
      const auto dx0 = test::random_normal(sz(R * D), rng);  // dx is ADDED to
      const auto dg0 = test::random_normal(sz(D), rng);      // dg is ADDED to
      const auto rstd = rstd_of(x, R, D, 1e-5);

      DeviceBuffer<float> xd(x), gd(g), dyd(dy), sd(rstd), dxd(dx0), dgd(dg0),
          part(sz(partial_floats(R, D)));
      part.fill_bytes(0xFF);  // every partial read must have been written
      rmsnorm_backward(R, D, xd.data(), gd.data(), sd.data(), dyd.data(), dxd.data(), dgd.data(),
                       part.data(), st.s);
      st.sync();

      View2<double> dx = view2(dx0, R, D);
      View1<double> dg = view1(dg0);
      ::lcr::rmsnorm_backward<double>(view2(x, R, D), view1(g), view1(rstd), view2(dy, R, D), dx,
                                      dg);

      // dx[r, d] = dx0 + s (dy g - x s dot), dot = mean_d(dy g x s): a D-term sum.
      std::vector<double> tdx(sz(R * D)), tdg(sz(D));
      for (int64_t r = 0; r < R; ++r) {
        const double s = rstd[sz(r)];
        double dotmag = 0;
        for (int64_t d = 0; d < D; ++d) {
          const size_t i = sz(r * D + d);
          dotmag += std::abs(double(dy[i]) * g[sz(d)] * x[i] * s);
        }
        dotmag /= double(D);
        for (int64_t d = 0; d < D; ++d) {
          const size_t i = sz(r * D + d);
          const double mag = std::abs(dx0[i]) + s * (std::abs(double(dy[i]) * g[sz(d)]) +
                                                     std::abs(double(x[i])) * s * dotmag);
          tdx[i] = sum_rel(D) * mag;
        }
      }
      // dg[d] = dg0 + sum_r dy x rstd: an R-term sum.
      for (int64_t d = 0; d < D; ++d) {
        double mag = std::abs(dg0[sz(d)]);
        for (int64_t r = 0; r < R; ++r) {
          const size_t i = sz(r * D + d);
          mag += std::abs(double(dy[i]) * x[i] * rstd[sz(r)]);
        }
        tdg[sz(d)] = sum_rel(R + 1) * mag;
      }
      expect_close(dxd.download(), host(dx), tdx, "dx");
      expect_close(dgd.download(), host(dg), tdg, "dg");
    }
}

// ---- SwiGLU ----

// N(0, 3) gate values with a few extremes, where exp under- or overflows in fp32.
std::vector<float> gate_values(size_t n, std::mt19937_64& rng) {
  auto z = test::random_normal(n, rng, 3.f);
  const float extremes[] = {30.f, -30.f, 90.f, -90.f, 200.f, -200.f, 0.f, -1.2785f};
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  for (float e : extremes)
    if (n > 8) z[pick(rng)] = e;
  return z;
}

TEST_F(GpuLayers, SwiGluForwardAndBackwardMatchFloat64) {
  for (int64_t R : kRows)
    for (int64_t F : kCols) {
      SCOPED_TRACE(sizes("R", R, "F", F));
      const int64_t n = R * F;
      const auto z = gate_values(sz(n), rng);
      const auto up = test::random_normal(sz(n), rng);
      const auto dh = test::random_normal(sz(n), rng);
      DeviceBuffer<float> zd(z), upd(up), dhd(dh), hd(sz(n)), dgd(sz(n)), dud(sz(n));
      hd.fill_bytes(0xFF);
      dgd.fill_bytes(0xFF);
      dud.fill_bytes(0xFF);
      swiglu_forward(n, zd.data(), upd.data(), hd.data(), st.s);
      swiglu_backward(n, zd.data(), upd.data(), dhd.data(), dgd.data(), dud.data(), st.s);
      st.sync();

      View2<double> h("h", R, F), dgate("dgate", R, F), dup("dup", R, F);
      const auto Z = view2(z, R, F), U = view2(up, R, F), DH = view2(dh, R, F);
      ::lcr::swiglu_forward<double>(Z, U, h);
      ::lcr::swiglu_backward<double>(Z, U, DH, dgate, dup);

      // Products of a sigmoid (expf: 2 ulp, a division) with up to three factors: 16 eps.
      // dgate's 1 + z (1 - s) can cancel (silu' = 0 at z ~ -1.28): its terms are 1 and |z|.
      std::vector<double> th(sz(n)), tdg(sz(n)), tdu(sz(n));
      for (size_t i = 0; i < sz(n); ++i) {
        const double zi = z[i], s = 1.0 / (1.0 + std::exp(-zi));
        th[i] = 16 * kEps32 * std::abs(zi * s * up[i]) + kTiny;
        tdu[i] = 16 * kEps32 * std::abs(double(dh[i]) * zi * s) + kTiny;
        tdg[i] = 16 * kEps32 * std::abs(double(dh[i]) * up[i] * s) * (1 + std::abs(zi)) + kTiny;
      }
      expect_close(hd.download(), host(h), th, "h");
      expect_close(dgd.download(), host(dgate), tdg, "dgate");
      expect_close(dud.download(), host(dup), tdu, "dup");
    }
}

// ---- embedding ----

TEST_F(GpuLayers, EmbeddingForwardCopiesRows) {
  for (int64_t R : kRows)
    for (int64_t D : kCols) {
      SCOPED_TRACE(sizes("R", R, "D", D));
      const int64_t V = 37;
      const auto E = test::random_normal(sz(V * D), rng);
      std::vector<int32_t> tok(sz(R));
      std::uniform_int_distribution<int32_t> u(0, int32_t(V - 1));
      for (auto& t : tok) t = u(rng);
      DeviceBuffer<float> Ed(E), xd(sz(R * D));
      DeviceBuffer<int32_t> td(tok);
      xd.fill_bytes(0xFF);
      embedding_forward(R, D, td.data(), Ed.data(), xd.data(), st.s);
      st.sync();
      View2<double> x("x", R, D);
      ::lcr::embedding_forward<double>(view1i(tok), view2(E, V, D), x);
      expect_close(xd.download(), host(x), 0.0, 0.0, "x (an exact copy)");
    }
}

TEST_F(GpuLayers, EmbeddingPlanGroupsRowsByToken) {
  for (int64_t R : kRows)
    for (int32_t V : {3, 1000}) {
      SCOPED_TRACE(sizes("R", R, "V", V));
      std::vector<int32_t> tok(sz(R));
      std::uniform_int_distribution<int32_t> u(0, V - 1);
      for (auto& t : tok) t = u(rng);
      const EmbeddingPlan p = plan_embedding_backward(tok.data(), R);
      ASSERT_EQ(p.starts.size(), p.ids.size() + 1);
      ASSERT_EQ(p.rows.size(), sz(R));
      EXPECT_EQ(p.starts.front(), 0);
      EXPECT_EQ(p.starts.back(), int32_t(R));
      std::vector<int> seen(sz(R), 0);
      for (size_t k = 0; k < p.ids.size(); ++k) {
        if (k) {
          EXPECT_LT(p.ids[k - 1], p.ids[k]) << "ids must be distinct and increasing";
        }
        ASSERT_LT(p.starts[k], p.starts[k + 1]) << "every id has at least one row";
        for (int32_t j = p.starts[k]; j < p.starts[k + 1]; ++j) {
          const int32_t r = p.rows[sz(j)];
          ASSERT_TRUE(r >= 0 && r < R);
          ++seen[sz(r)];
          EXPECT_EQ(tok[sz(r)], p.ids[k]);
          if (j > p.starts[k]) {
            EXPECT_LT(p.rows[sz(j - 1)], r) << "rows increase in a token";
          }
        }
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), R) << "every row exactly once";
      // Chunks: consecutive, within one token, at most kEmbeddingChunk rows, covering it.
      ASSERT_EQ(p.id_chunks.size(), p.ids.size() + 1);
      ASSERT_EQ(p.chunks.back(), int32_t(R));
      for (size_t k = 0; k < p.ids.size(); ++k) {
        ASSERT_LT(p.id_chunks[k], p.id_chunks[k + 1]) << "every id has a chunk";
        EXPECT_EQ(p.chunks[sz(p.id_chunks[k])], p.starts[k]);
        EXPECT_EQ(p.chunks[sz(p.id_chunks[k + 1])], p.starts[k + 1]);
        for (int32_t c = p.id_chunks[k]; c < p.id_chunks[k + 1]; ++c) {
          EXPECT_GT(p.chunks[sz(c + 1)], p.chunks[sz(c)]);
          EXPECT_LE(p.chunks[sz(c + 1)] - p.chunks[sz(c)], kEmbeddingChunk);
        }
      }
    }
  const EmbeddingPlan empty = plan_embedding_backward(nullptr, 0);
  EXPECT_TRUE(empty.ids.empty());
  EXPECT_TRUE(empty.rows.empty());
  EXPECT_EQ(empty.starts, std::vector<int32_t>{0});
}

// Runs embedding_backward from dE0 and returns dE.
std::vector<float> gpu_embedding_backward(const std::vector<int32_t>& tok, int64_t D,
                                          const std::vector<float>& dx,
                                          const std::vector<float>& dE0, cudaStream_t s) {
  const EmbeddingPlan p = plan_embedding_backward(tok.data(), int64_t(tok.size()));
  DeviceBuffer<int32_t> ids(p.ids), rows(p.rows), id_chunks(p.id_chunks), chunks(p.chunks);
  DeviceBuffer<float> dxd(dx), dEd(dE0), partial(size_t(std::max<int64_t>(p.n_chunks() * D, 1)));
  partial.fill_bytes(0xFF);
  embedding_backward(int64_t(p.ids.size()), p.n_chunks(), D, ids.data(), id_chunks.data(),
                     chunks.data(), rows.data(), dxd.data(), partial.data(), dEd.data(), s);
  LCR_CUDA_CHECK(cudaStreamSynchronize(s));
  return dEd.download();
}

TEST_F(GpuLayers, EmbeddingBackwardMatchesFloat64WithRepeatedTokens) {
  for (int64_t R : kRows)
    for (int64_t D : kCols)
      for (int64_t V : {int64_t(3), 2 * R + 1}) {  // 3: every token repeats; 2R+1: sparse
        SCOPED_TRACE(sizes("R", R, "D", D) + " V " + std::to_string(V));
        std::vector<int32_t> tok(sz(R));
        std::uniform_int_distribution<int32_t> u(0, int32_t(V - 1));
        for (auto& t : tok) t = u(rng);
        if (R >= 2) tok[sz(R - 1)] = tok[0];  // at least one repeat at every V
        const auto dx = test::random_normal(sz(R * D), rng);
        const auto dE0 = test::random_normal(sz(V * D), rng);  // dE is ADDED to
        const auto got = gpu_embedding_backward(tok, D, dx, dE0, st.s);

        View2<double> dE = view2(dE0, V, D);
        ::lcr::embedding_backward<double>(view1i(tok), view2(dx, R, D), dE);
        // A token's rows are K = count + 1 terms (dE0 included); rows of tokens absent from
        // the batch must come back untouched, bit for bit (tol 0).
        std::vector<double> tol(sz(V * D), 0.0), mag(sz(V * D), 0.0);
        std::vector<int64_t> count(sz(V), 0);
        for (int64_t r = 0; r < R; ++r) {
          ++count[sz(tok[sz(r)])];
          for (int64_t d = 0; d < D; ++d)
            mag[sz(tok[sz(r)] * D + d)] += std::abs(dx[sz(r * D + d)]);
        }
        for (int64_t v = 0; v < V; ++v)
          for (int64_t d = 0; d < D; ++d) {
            const size_t i = sz(v * D + d);
            if (count[sz(v)]) tol[i] = sum_rel(count[sz(v)] + 1) * (std::abs(dE0[i]) + mag[i]);
          }
        expect_close(got, host(dE), tol, "dE");
      }
}

// ---- bias ----

TEST_F(GpuLayers, AddBiasAndBiasBackwardMatchFloat64) {
  for (int64_t R : kRows)
    for (int64_t N : kCols) {
      SCOPED_TRACE(sizes("R", R, "N", N));
      const auto y0 = test::random_normal(sz(R * N), rng);
      const auto b = test::random_normal(sz(N), rng);
      const auto dy = test::random_normal(sz(R * N), rng);
      const auto db0 = test::random_normal(sz(N), rng);  // db is ADDED to
      DeviceBuffer<float> yd(y0), bd(b), dyd(dy), dbd(db0), part(sz(partial_floats(R, N)));
      part.fill_bytes(0xFF);
      add_bias(R, N, bd.data(), yd.data(), st.s);
      bias_backward(R, N, dyd.data(), dbd.data(), part.data(), st.s);
      st.sync();

      View2<double> y = view2(y0, R, N);
      View1<double> db = view1(db0);
      ::lcr::add_bias<double>(view1(b), y);
      ::lcr::bias_backward<double>(view2(dy, R, N), db);
      // y + b: one correctly rounded add (<= eps/2 relative).
      expect_close(yd.download(), host(y), kEps32, 0.0, "y + b");
      std::vector<double> tdb(sz(N));
      for (int64_t n = 0; n < N; ++n) {
        double mag = std::abs(db0[sz(n)]);
        for (int64_t r = 0; r < R; ++r) mag += std::abs(dy[sz(r * N + n)]);
        tdb[sz(n)] = sum_rel(R + 1) * mag;
      }
      expect_close(dbd.download(), host(db), tdb, "db");
    }
}

// ---- determinism of the reductions ----

TEST_F(GpuLayers, ReductionsAreBitwiseDeterministic) {
  const int64_t R = 1000;  // 4 row blocks of kRowBlock
  for (int64_t D : {int64_t(129), int64_t(300)}) {
    SCOPED_TRACE("D " + std::to_string(D));
    const auto x = test::random_normal(sz(R * D), rng);
    const auto g = test::random_normal(sz(D), rng);
    const auto dy = test::random_normal(sz(R * D), rng);
    const auto dx0 = test::random_normal(sz(R * D), rng);
    const auto dg0 = test::random_normal(sz(D), rng);
    const auto rstd = rstd_of(x, R, D, 1e-5);
    std::vector<int32_t> tok(sz(R));
    std::uniform_int_distribution<int32_t> u(0, 49);  // 50 tokens: ~20 rows each
    for (auto& t : tok) t = u(rng);
    const auto dE0 = test::random_normal(sz(50 * D), rng);

    struct Run {
      std::vector<float> dx, dg, db, dE;
      std::vector<double> sumsq;
    };
    auto run = [&] {
      Run out;
      DeviceBuffer<float> xd(x), gd(g), dyd(dy), sd(rstd), dxd(dx0), dgd(dg0), dbd(dg0),
          part(sz(partial_floats(R, D)));
      rmsnorm_backward(R, D, xd.data(), gd.data(), sd.data(), dyd.data(), dxd.data(), dgd.data(),
                       part.data(), st.s);
      bias_backward(R, D, dyd.data(), dbd.data(), part.data(), st.s);
      DeviceBuffer<double> parts(sz(norm_chunks(R * D)));
      sumsq_chunks(R * D, dyd.data(), parts.data(), st.s);
      st.sync();
      out.dx = dxd.download();
      out.dg = dgd.download();
      out.db = dbd.download();
      out.sumsq = parts.download();
      out.dE = gpu_embedding_backward(tok, D, dy, dE0, st.s);
      return out;
    };
    const Run a = run(), b = run();
    expect_same_bits(a.dx, b.dx, "rmsnorm_backward dx");
    expect_same_bits(a.dg, b.dg, "rmsnorm_backward dg");
    expect_same_bits(a.db, b.db, "bias_backward db");
    expect_same_bits(a.dE, b.dE, "embedding_backward dE");
    expect_same_bits(a.sumsq, b.sumsq, "sumsq_chunks");
  }
}

// ---- cross-entropy ----

struct CeCase {
  int64_t R, V;
};

TEST_F(GpuLoss, CrossEntropyMatchesFloat64) {
  std::vector<CeCase> cases;
  for (int64_t R : kRows)
    for (int64_t V : kCols) cases.push_back({R, V});
  cases.push_back({3, 50257});  // the GPT-2 vocabulary: ~100 logits per thread
  for (const CeCase& c : cases) {
    const int64_t R = c.R, V = c.V;
    SCOPED_TRACE(sizes("R", R, "V", V));
    auto logits = test::random_normal(sz(R * V), rng, 3.f);
    for (int64_t v = 0; v < V; ++v) logits[sz(v)] += 100.f;  // exp overflows without max
    std::vector<int32_t> labels(sz(R));
    std::uniform_int_distribution<int32_t> lab(0, int32_t(V - 1));
    std::bernoulli_distribution ignore(0.25);
    int64_t labelled = 0;
    for (int64_t r = 0; r < R; ++r) {
      labels[sz(r)] = ignore(rng) ? -1 : lab(rng);
      if (R >= 2 && r == R - 1) labels[sz(r)] = -1;    // at least one ignored row
      if (R >= 2 && r == 0) labels[sz(r)] = lab(rng);  // and one labelled
      labelled += labels[sz(r)] >= 0;
    }
    const float scale = 1.f / float(std::max<int64_t>(labelled, 1));

    // dlogits one float into its buffer: rows aligned unlike the logits' (the kernel's
    // scalar path); in place below takes the float4 path.
    DeviceBuffer<float> ld(logits), lsed(sz(R)), lossd(sz(R)), dld(sz(R * V + 1));
    DeviceBuffer<int32_t> labd(labels);
    lsed.fill_bytes(0xFF);
    lossd.fill_bytes(0xFF);
    dld.fill_bytes(0xFF);
    cross_entropy_forward(R, V, ld.data(), labd.data(), lsed.data(), lossd.data(), st.s);
    cross_entropy_backward(R, V, ld.data(), labd.data(), lsed.data(), scale, dld.data() + 1, st.s);
    st.sync();
    const auto lse_gpu = lsed.download();

    // Forward against float64.
    const auto L = view2(logits, R, V);
    const auto Y = view1i(labels);
    View1<double> lse("lse", R), loss("loss", R);
    ::lcr::cross_entropy_forward<double>(L, Y, lse, loss);
    const auto lse_ref = host(lse), loss_ref = host(loss);
    // lse = m + log(sum of V positive terms): the sum's relative error is an absolute
    // error of lse, plus a rounding of |lse|. row_loss = lse - logit[y] adds a rounding of
    // each operand's size; ignored rows must be exactly 0.
    std::vector<double> tlse(sz(R)), tloss(sz(R));
    for (int64_t r = 0; r < R; ++r) {
      tlse[sz(r)] = sum_rel(V) + 4 * kEps32 * std::abs(lse_ref[sz(r)]);
      const int32_t y = labels[sz(r)];
      tloss[sz(r)] =
          y < 0 ? 0.0
                : tlse[sz(r)] +
                      4 * kEps32 * (std::abs(lse_ref[sz(r)]) + std::abs(logits[sz(r * V + y)]));
    }
    expect_close(lse_gpu, lse_ref, tlse, "lse");
    expect_close(lossd.download(), loss_ref, tloss, "row_loss");

    // Backward against float64 from the same (GPU) lse, so only the backward is measured:
    // p = exp(x - lse) has a relative error of ~eps |x - lse| (the rounded difference) plus
    // expf's 2 ulp; p - 1 at the label adds a rounding of size 1; ignored rows exactly 0.
    View2<double> dl("dl", R, V);
    ::lcr::cross_entropy_backward<double>(L, Y, view1(lse_gpu), double(scale), dl);
    std::vector<double> tdl(sz(R * V), 0.0);
    for (int64_t r = 0; r < R; ++r) {
      const int32_t y = labels[sz(r)];
      if (y < 0) continue;
      for (int64_t v = 0; v < V; ++v) {
        const double a = double(logits[sz(r * V + v)]) - lse_gpu[sz(r)];
        const double p = std::exp(a);
        tdl[sz(r * V + v)] =
            8 * kEps32 * std::abs(double(scale)) * (p * (1 + std::abs(a)) + (v == y ? 1 : 0));
      }
    }
    auto dl_gpu = dld.download();
    EXPECT_TRUE(std::isnan(dl_gpu[0])) << "wrote before dlogits";
    dl_gpu.erase(dl_gpu.begin());
    expect_close(dl_gpu, host(dl), tdl, "dlogits");

    // In place (dlogits = logits): the same bits as into the separate buffer.
    cross_entropy_backward(R, V, ld.data(), labd.data(), lsed.data(), scale, ld.data(), st.s);
    st.sync();
    expect_same_bits(ld.download(), dl_gpu, "in-place cross_entropy_backward");
  }
}

// Rows padded to a stride ld > V (the model's LM head, vocab_pad()): the same lse, row loss
// and dlogits bits as the dense rows, the padding ignored by the forward (it holds NaN here)
// and zeroed by the backward, in place.
TEST_F(GpuLoss, CrossEntropyWithPaddedRowsEqualsDense) {
  for (const auto& [R, V] : {std::pair<int64_t, int64_t>{7, 129}, {3, 50257}, {129, 1}}) {
    const int64_t ld = (V + 63) / 64 * 64 + (V == 1 ? 64 : 0);
    SCOPED_TRACE(sizes("R", R, "V", V));
    const auto logits = test::random_normal(sz(R * V), rng, 3.f);
    std::vector<float> padded(sz(R * ld), std::nanf(""));
    for (int64_t r = 0; r < R; ++r)
      std::copy(logits.begin() + r * V, logits.begin() + (r + 1) * V, padded.begin() + r * ld);
    std::vector<int32_t> labels(sz(R));
    for (int64_t r = 0; r < R; ++r) labels[sz(r)] = r % 3 == 2 ? -1 : int32_t((r * 31) % V);
    DeviceBuffer<float> dense(logits), pad(padded), lse1(sz(R)), loss1(sz(R)), lse2(sz(R)),
        loss2(sz(R));
    DeviceBuffer<int32_t> labd(labels);
    cross_entropy_forward(R, V, dense.data(), labd.data(), lse1.data(), loss1.data(), st.s);
    cross_entropy_forward(R, V, ld, pad.data(), labd.data(), lse2.data(), loss2.data(), st.s);
    cross_entropy_backward(R, V, dense.data(), labd.data(), lse1.data(), 0.25f, dense.data(), st.s);
    cross_entropy_backward(R, V, ld, pad.data(), labd.data(), lse2.data(), 0.25f, pad.data(), st.s);
    st.sync();
    expect_same_bits(lse2.download(), lse1.download(), "lse");
    expect_same_bits(loss2.download(), loss1.download(), "row_loss");
    const auto d1 = dense.download(), d2 = pad.download();
    std::vector<float> rows(sz(R * V));
    size_t nonzero_pad = 0;
    for (int64_t r = 0; r < R; ++r) {
      std::copy(d2.begin() + r * ld, d2.begin() + r * ld + V, rows.begin() + r * V);
      for (int64_t v = V; v < ld; ++v) nonzero_pad += d2[sz(r * ld + v)] != 0.f;
    }
    expect_same_bits(rows, d1, "dlogits");
    EXPECT_EQ(nonzero_pad, 0u) << "padding columns of dlogits not zeroed";
  }
}

TEST_F(GpuLayers, AddRowsAddsTheStridedBlock) {
  const int64_t rows = 7, cols = 129, ldx = 192, ldy = 131;
  const auto x = test::random_normal(sz(rows * ldx), rng),
             y0 = test::random_normal(sz(rows * ldy), rng);
  DeviceBuffer<float> xd(x), yd(y0);
  add_rows(rows, cols, xd.data(), ldx, yd.data(), ldy, st.s);
  st.sync();
  const auto y = yd.download();
  size_t bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ldy; ++c) {
      const float want = c < cols ? y0[sz(r * ldy + c)] + x[sz(r * ldx + c)] : y0[sz(r * ldy + c)];
      bad += y[sz(r * ldy + c)] != want;  // one fp32 addition, the same on host and device
    }
  EXPECT_EQ(bad, 0u);
}

// R V > 2^31 logits: every row offset past 2^31 elements must be computed in 64 bits. Rows
// are zero (lse = log V) except the first and last, which hold random logits.
TEST_F(GpuLoss, CrossEntropyIndexesPast2To31) {
  const int64_t V = 50257, R = 42800;  // R V = 2,150,999,600 > 2^31
  const size_t bytes = sz(R * V) * sizeof(float);
  size_t free_b = 0, total_b = 0;
  LCR_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < bytes + (sz(1) << 30))
    GTEST_SKIP() << "needs " << (bytes >> 20) << " MiB of free GPU memory, " << (free_b >> 20)
                 << " MiB free";
  DeviceBuffer<float> ld(sz(R * V));
  ld.fill_bytes(0);
  const auto first = test::random_normal(sz(V), rng, 3.f);
  const auto last = test::random_normal(sz(V), rng, 3.f);
  LCR_CUDA_CHECK(cudaMemcpy(ld.data(), first.data(), V * sizeof(float), cudaMemcpyHostToDevice));
  LCR_CUDA_CHECK(
      cudaMemcpy(ld.data() + (R - 1) * V, last.data(), V * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<int32_t> labels(sz(R));
  for (int64_t r = 0; r < R; ++r) labels[sz(r)] = r % 7 == 3 ? -1 : int32_t((r * 7919) % V);
  DeviceBuffer<int32_t> labd(labels);
  DeviceBuffer<float> lsed(sz(R)), lossd(sz(R));
  lsed.fill_bytes(0xFF);
  lossd.fill_bytes(0xFF);
  cross_entropy_forward(R, V, ld.data(), labd.data(), lsed.data(), lossd.data(), st.s);
  st.sync();
  const auto lse = lsed.download(), loss = lossd.download();

  auto row_lse = [&](const std::vector<float>& x) {
    double m = x[0];
    for (float v : x) m = std::max(m, double(v));
    double s = 0;
    for (float v : x) s += std::exp(double(v) - m);
    return m + std::log(s);
  };
  std::vector<double> want_lse(sz(R), std::log(double(V))), want_loss(sz(R));
  want_lse[0] = row_lse(first);
  want_lse[sz(R - 1)] = row_lse(last);
  std::vector<double> tlse(sz(R)), tloss(sz(R));
  for (int64_t r = 0; r < R; ++r) {
    const int32_t y = labels[sz(r)];
    const double xy = y < 0        ? 0.0
                      : r == 0     ? double(first[sz(y)])
                      : r == R - 1 ? double(last[sz(y)])
                                   : 0.0;
    want_loss[sz(r)] = y < 0 ? 0.0 : want_lse[sz(r)] - xy;
    tlse[sz(r)] = sum_rel(V) + 4 * kEps32 * std::abs(want_lse[sz(r)]);
    tloss[sz(r)] =
        y < 0 ? 0.0 : tlse[sz(r)] + 4 * kEps32 * (std::abs(want_lse[sz(r)]) + std::abs(xy));
  }
  expect_close(lse, want_lse, tlse, "lse");
  expect_close(loss, want_loss, tloss, "row_loss");

  // Backward in place; check the first, a middle and the last row.
  const float scale = 0.5f;
  cross_entropy_backward(R, V, ld.data(), labd.data(), lsed.data(), scale, ld.data(), st.s);
  st.sync();
  for (int64_t r : {int64_t(0), R / 2 + 1, R - 1}) {
    SCOPED_TRACE("row " + std::to_string(r));
    std::vector<float> got(sz(V));
    LCR_CUDA_CHECK(
        cudaMemcpy(got.data(), ld.data() + r * V, V * sizeof(float), cudaMemcpyDeviceToHost));
    const int32_t y = labels[sz(r)];
    std::vector<double> want(sz(V), 0.0), tol(sz(V), 0.0);
    if (y >= 0) {
      for (int64_t v = 0; v < V; ++v) {
        const double x = r == 0 ? first[sz(v)] : r == R - 1 ? last[sz(v)] : 0.0;
        const double a = x - lse[sz(r)], p = std::exp(a), hot = v == y ? 1.0 : 0.0;
        want[sz(v)] = scale * (p - hot);
        tol[sz(v)] = 8 * kEps32 * scale * (p * (1 + std::abs(a)) + hot);
      }
    }
    expect_close(got, want, tol, "dlogits");
  }
}

// ---- conversions, vector ops ----

TEST_F(GpuLayers, ToBf16RoundsLikeTheHost) {
  // Ties to even, sub-normals, overflow to inf, infinities, NaN, signed zeros; then random
  // bit patterns (every exponent) and N(0, 1) values.
  std::vector<float> special = {0.f,
                                -0.f,
                                1.f,
                                -1.f,
                                float_of(0x3F808000u),
                                float_of(0x3F818000u),
                                float_of(0x3F80C000u),
                                float_of(0x00000001u),
                                float_of(0x807FFFFFu),
                                float_of(0x00400000u),
                                std::numeric_limits<float>::max(),
                                -std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN(),
                                float_of(0xFF800001u)};
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(129), int64_t(300), int64_t(100003)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x(sz(n));
    for (int64_t i = 0; i < n; ++i)
      x[sz(i)] = i < int64_t(special.size()) ? special[sz(i)]
                 : i % 2                     ? float_of(uint32_t(rng()))
                                             : test::random_normal(1, rng)[0];
    std::shuffle(x.begin(), x.end(), rng);
    DeviceBuffer<float> xd(x);
    DeviceBuffer<__nv_bfloat16> yd(sz(n));
    to_bf16(n, xd.data(), yd.data(), st.s);
    st.sync();
    const auto y = yd.download();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t got = bits_of(y[sz(i)]), want = bits_of(__float2bfloat16(x[sz(i)]));
      const bool ok = bf16_is_nan(want) ? bf16_is_nan(got) : got == want;
      if (!ok && bad++ < 5)
        ADD_FAILURE() << "x bits 0x" << std::hex << bits_of(x[sz(i)]) << ": gpu 0x" << got
                      << ", host 0x" << want << std::dec;
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST_F(GpuLayers, ToF32IsExactOnEveryBf16) {
  std::vector<__nv_bfloat16> all(65536);
  for (uint32_t u = 0; u < 65536; ++u) all[u] = bf16_of(uint16_t(u));
  std::shuffle(all.begin(), all.end(), rng);
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(129), int64_t(300), int64_t(65536)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const std::vector<__nv_bfloat16> x(all.begin(), all.begin() + n);
    DeviceBuffer<__nv_bfloat16> xd(x);
    DeviceBuffer<float> yd(sz(n));
    yd.fill_bytes(0xFF);
    to_f32(n, xd.data(), yd.data(), st.s);
    st.sync();
    const auto y = yd.download();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = __bfloat162float(x[sz(i)]), got = y[sz(i)];
      const bool ok = std::isnan(want) ? std::isnan(got) : bits_of(got) == bits_of(want);
      if (!ok && bad++ < 5)
        ADD_FAILURE() << "bf16 0x" << std::hex << bits_of(x[sz(i)]) << ": gpu 0x" << bits_of(got)
                      << ", host 0x" << bits_of(want) << std::dec;
    }
    EXPECT_EQ(bad, 0);
    // And back: fp32 values that came from bf16 round-trip exactly.
    DeviceBuffer<__nv_bfloat16> back(sz(n));
    to_bf16(n, yd.data(), back.data(), st.s);
    st.sync();
    const auto b = back.download();
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t u = bits_of(x[sz(i)]);
      if (!bf16_is_nan(u)) {
        EXPECT_EQ(bits_of(b[sz(i)]), u) << "round trip of 0x" << std::hex << u;
      }
    }
  }
}

TEST_F(GpuLayers, AxpyMatchesFloat64) {
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(129), int64_t(300), int64_t(100003)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const auto x = test::random_normal(sz(n), rng), y0 = test::random_normal(sz(n), rng);
    const float a = test::random_normal(1, rng)[0];
    DeviceBuffer<float> xd(x), yd(y0);
    axpy(n, a, xd.data(), yd.data(), st.s);
    st.sync();
    View1<double> X = view1(x), Y = view1(y0);
    ::lcr::axpy<double>(n, double(a), X.data(), Y.data());
    // Two roundings (a product, a sum), each of its own operand's size.
    std::vector<double> tol(sz(n));
    for (size_t i = 0; i < sz(n); ++i)
      tol[i] = 2 * kEps32 * (std::abs(double(a) * x[i]) + std::abs(double(y0[i]) + a * x[i]));
    expect_close(yd.download(), host(Y), tol, "y + a x");
  }
}

// The projections' product (gpu_gemm.hpp) at odd sizes, every transpose, beta 0 and 1,
// against float64 on the same fp32 inputs. The bound is the input rounding of the mode
// (bf16: A and B each rounded to 8 bits, 2^-8 relative, so a product is off by <= 2^-7 of
// |a b|; TF32: 10 bits, 2^-10 each; fp32: none) times sum_k |a b|, plus fp32 accumulation
// (K eps32 sum_k |a b|) and the rounding of C itself.
TEST_F(GpuLayers, GemmMatchesFloat64WithinItsInputRounding) {
  for (GemmPrecision prec : {GemmPrecision::Bf16, GemmPrecision::Tf32, GemmPrecision::Fp32}) {
    const Gemm gemm(st.s, prec);
    const double in_round = prec == GemmPrecision::Bf16   ? std::ldexp(1.0, -7)
                            : prec == GemmPrecision::Tf32 ? std::ldexp(1.0, -9)
                                                          : 0.0;
    struct Dims {
      int64_t M, N, K;
    };
    for (const Dims d : {Dims{1, 1, 1}, Dims{7, 129, 33}, Dims{130, 9, 257}}) {
      for (Trans ta : {Trans::No, Trans::Yes})
        for (Trans tb : {Trans::No, Trans::Yes})
          for (float beta : {0.f, 1.f}) {
            SCOPED_TRACE(sizes("M", d.M, "N", d.N) + sizes(" K", d.K, " prec", int(prec)) +
                         (ta == Trans::Yes ? " A^T" : "") + (tb == Trans::Yes ? " B^T" : "") +
                         (beta != 0.f ? " beta 1" : ""));
            const auto a = test::random_normal(sz(d.M * d.K), rng);
            const auto b = test::random_normal(sz(d.K * d.N), rng);
            const auto c0 = test::random_normal(sz(d.M * d.N), rng);
            DeviceBuffer<float> ad(a), bd(b), cd(c0);
            gemm(ta, tb, d.M, d.N, d.K, 1.f, ad.data(), bd.data(), beta, cd.data());
            st.sync();
            const auto c = cd.download();
            std::vector<double> want(sz(d.M * d.N)), tol(want.size());
            for (int64_t i = 0; i < d.M; ++i)
              for (int64_t j = 0; j < d.N; ++j) {
                double sum = beta * double(c0[sz(i * d.N + j)]), mag = 0;
                for (int64_t k = 0; k < d.K; ++k) {
                  const double x = ta == Trans::No ? a[sz(i * d.K + k)] : a[sz(k * d.M + i)];
                  const double y = tb == Trans::No ? b[sz(k * d.N + j)] : b[sz(j * d.K + k)];
                  sum += x * y, mag += std::abs(x * y);
                }
                want[sz(i * d.N + j)] = sum;
                tol[sz(i * d.N + j)] =
                    (in_round + double(d.K + 2) * kEps32) * mag +
                    2 * kEps32 * (std::abs(sum) + std::abs(beta * c0[sz(i * d.N + j)]));
              }
            expect_close(c, want, tol, "C");
          }
    }
  }
}

TEST_F(GpuLayers, CountNonfiniteCountsNanAndInf) {
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), float_of(0xFFC00001u)};
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(129), int64_t(300), int64_t(1000003)}) {
    for (int pass = 0; pass < 2; ++pass) {
      SCOPED_TRACE("n " + std::to_string(n) + " pass " + std::to_string(pass));
      auto x = test::random_normal(sz(n), rng, 1e3f);
      x[0] = std::numeric_limits<float>::max();  // finite extremes are not counted
      if (n > 1) x[1] = float_of(0x00000001u);
      int64_t want = 0;
      if (pass == 1) {  // pass 0: none
        std::uniform_int_distribution<int64_t> pos(0, n - 1);
        const int64_t k = std::min<int64_t>(n, 1 + int64_t(rng() % 40));
        for (int64_t j = 0; j < k; ++j) x[sz(pos(rng))] = bad_values[rng() % 4];
        for (float v : x) want += std::isfinite(v) ? 0 : 1;
      }
      DeviceBuffer<float> xd(x);
      EXPECT_EQ(count_nonfinite(n, xd.data(), st.s), want);
    }
  }
}

// ---- AdamW ----

TEST_F(GpuAdamW, SumsqChunksMatchesFloat64) {
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(129), int64_t(300), kNormChunk, kNormChunk + 1,
                    3 * kNormChunk + 129, int64_t(1000003)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const auto g = test::random_normal(sz(n), rng);
    const int64_t nc = norm_chunks(n);
    DeviceBuffer<float> gd(g);
    DeviceBuffer<double> part(sz(nc));
    part.fill_bytes(0xFF);
    sumsq_chunks(n, gd.data(), part.data(), st.s);
    st.sync();
    const auto got = part.download();
    // Up to 8192 positive terms summed in double: both orders are within ~1e-12 relative.
    double total = 0;
    for (int64_t c = 0; c < nc; ++c) {
      double want = 0;
      for (int64_t i = c * kNormChunk; i < std::min(n, (c + 1) * kNormChunk); ++i)
        want += double(g[sz(i)]) * g[sz(i)];
      EXPECT_NEAR(got[sz(c)], want, 1e-12 * want) << "chunk " << c;
      total += got[sz(c)];
    }
    const double norm = ::lcr::global_grad_norm<double>(view1(g));
    EXPECT_NEAR(std::sqrt(total), norm, 1e-12 * norm);
  }
}

TEST_F(GpuAdamW, UpdateMatchesFloat64AdamWStep) {
  for (int64_t n : {int64_t(7), int64_t(20001)})
    for (double clip : {0.5, 0.0}) {  // 0.5: clipped to half the norm; 0: clipping off
      SCOPED_TRACE("n " + std::to_string(n) + " clip " + std::to_string(clip));
      AdamWConfig c;
      c.lr = 1e-2;
      c.min_lr = 1e-3;
      c.warmup_steps = 10;  // step 3: lr 4e-3
      c.beta1 = 0.9;
      c.beta2 = 0.95;
      c.eps = 1e-8;
      c.weight_decay = 0.1;
      // Three slices: decayed, not decayed, decayed and clamped into [-0.5, 0.5].
      const int64_t a = n * 45 / 100, b = n * 70 / 100;
      const std::vector<ParamRange> ranges = {
          {"w", 0, a, true}, {"g", a, b - a, false}, {"d", b, n - b, true, true, -0.5, 0.5}};
      const auto p0 = test::random_normal(sz(n), rng);
      const auto g = test::random_normal(sz(n), rng);
      const auto m0 = test::random_normal(sz(n), rng, 0.05f);
      auto v0 = test::random_normal(sz(n), rng, 0.05f);
      for (float& v : v0) v *= v;  // second moments are >= 0
      double gg = 0;
      for (float x : g) gg += double(x) * x;
      c.grad_clip = clip * std::sqrt(gg);

      // float64 reference: AdamW<double> at update count 3 with the moments above.
      AdamW<double> opt(c, ranges, n);
      {
        auto hm = Kokkos::create_mirror_view(opt.m());
        auto hv = Kokkos::create_mirror_view(opt.v());
        for (int64_t i = 0; i < n; ++i) hm(i) = m0[sz(i)], hv(i) = v0[sz(i)];
        Kokkos::deep_copy(opt.m(), hm);
        Kokkos::deep_copy(opt.v(), hv);
      }
      opt.set_steps_taken(3);
      View1<double> P = view1(p0);
      const auto info = opt.step(P, view1(g));
      if (clip > 0) {
        EXPECT_LT(info.clip_scale, 1.0) << "the case must exercise clipping";
      }
      const auto p_ref = host(P), m_ref = host(opt.m()), v_ref = host(opt.v());

      // GPU: the norm from sumsq_chunks, then the update and the clamps.
      std::vector<uint8_t> decay(sz(n));
      for (const auto& r : ranges)
        for (int64_t i = 0; i < r.size; ++i) decay[sz(r.offset + i)] = r.decay ? 1 : 0;
      DeviceBuffer<float> pd(p0), gd(g), md(m0), vd(v0);
      DeviceBuffer<uint8_t> dd(decay);
      DeviceBuffer<double> parts(sz(norm_chunks(n)));
      sumsq_chunks(n, gd.data(), parts.data(), st.s);
      st.sync();
      double ss = 0;
      for (double x : parts.download()) ss += x;
      EXPECT_NEAR(std::sqrt(ss), info.grad_norm, 1e-12 * info.grad_norm);
      const int64_t t = 4;
      AdamWStep s;
      s.lr = float(info.lr);
      s.beta1 = float(c.beta1);
      s.beta2 = float(c.beta2);
      s.eps = float(c.eps);
      s.wd_factor = float(1.0 - info.lr * c.weight_decay);
      s.scale = float(info.clip_scale);
      s.bc1 = float(1.0 - std::pow(c.beta1, double(t)));
      s.bc2 = float(1.0 - std::pow(c.beta2, double(t)));
      adamw_update(n, pd.data(), gd.data(), md.data(), vd.data(), dd.data(), s, st.s);
      for (const auto& r : ranges)
        if (r.clamp) clamp_values(r.size, pd.data() + r.offset, float(r.lo), float(r.hi), st.s);
      st.sync();

      // Tolerances: besides the ~10 fp32 roundings of the update, the GPU reads the
      // hyperparameters rounded to fp32 (1 - 0.9f is 2 ulp off 0.1): 32 eps of each
      // quantity's terms. m can cancel (b1 m + (1 - b1) g), so its absolute error is carried
      // into u = m^ / (sqrt(v^) + eps) as such; p's error: its terms |p| and lr |u|.
      std::vector<double> tp(sz(n)), tm(sz(n)), tv(sz(n));
      const double bc1 = 1 - std::pow(c.beta1, double(t)), bc2 = 1 - std::pow(c.beta2, double(t));
      for (size_t i = 0; i < sz(n); ++i) {
        const double gi = g[i] * info.clip_scale;
        const double mag_m = c.beta1 * std::abs(m0[i]) + (1 - c.beta1) * std::abs(gi);
        const double mag_v = c.beta2 * v0[i] + (1 - c.beta2) * gi * gi;
        tm[i] = 32 * kEps32 * mag_m;
        tv[i] = 32 * kEps32 * mag_v;
        const double den = std::sqrt(v_ref[i] / bc2) + c.eps;
        const double u = (m_ref[i] / bc1) / den;
        const double tu = tm[i] / bc1 / den + 32 * kEps32 * std::abs(u);
        tp[i] = 8 * kEps32 * (std::abs(p0[i]) + info.lr * std::abs(u)) + info.lr * tu;
      }
      expect_close(md.download(), m_ref, tm, "m");
      expect_close(vd.download(), v_ref, tv, "v");
      const auto p_gpu = pd.download();
      expect_close(p_gpu, p_ref, tp, "p");
      for (int64_t i = b; i < n; ++i)
        ASSERT_TRUE(p_gpu[sz(i)] >= -0.5f && p_gpu[sz(i)] <= 0.5f) << "clamp at " << i;
    }
}

TEST_F(GpuAdamW, ClampValuesMatchesTheHostClamp) {
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(129), int64_t(300), int64_t(100003)}) {
    SCOPED_TRACE("n " + std::to_string(n));
    auto x = test::random_normal(sz(n), rng, 5.f);
    x[0] = std::numeric_limits<float>::quiet_NaN();  // NaN passes through, as on the host
    const float lo = float(-2 * M_PI), hi = 0.f;
    DeviceBuffer<float> xd(x);
    clamp_values(n, xd.data(), lo, hi, st.s);
    st.sync();
    std::vector<float> want(x);
    for (float& v : want) v = v < lo ? lo : (v > hi ? hi : v);
    expect_same_bits(xd.download(), want, "clamp");
  }
}

TEST_F(GpuLayers, ZeroSizesLaunchNothing) {
  float f = 1.f;
  float* nf = nullptr;
  const int32_t* ni = nullptr;
  EXPECT_NO_THROW({
    rmsnorm_forward(0, 8, nf, nf, 1e-5f, nf, nf, st.s);
    rmsnorm_backward(0, 8, nf, nf, nf, nf, nf, &f, nf, st.s);  // dg untouched (host pointer)
    swiglu_forward(0, nf, nf, nf, st.s);
    swiglu_backward(0, nf, nf, nf, nf, nf, st.s);
    embedding_forward(0, 8, ni, nf, nf, st.s);
    embedding_backward(0, 0, 8, ni, ni, ni, ni, nf, nf, nf, st.s);
    add_bias(0, 8, nf, nf, st.s);
    bias_backward(0, 8, nf, &f, nf, st.s);
    cross_entropy_forward(0, 8, nf, ni, nf, nf, st.s);
    cross_entropy_backward(0, 8, nf, ni, nf, 1.f, nf, st.s);
    to_bf16(0, nf, nullptr, st.s);
    to_f32(0, nullptr, nf, st.s);
    axpy(0, 2.f, nf, nf, st.s);
    sumsq_chunks(0, nf, nullptr, st.s);
    adamw_update(0, nf, nf, nf, nf, nullptr, AdamWStep{}, st.s);
    clamp_values(0, nf, -1.f, 1.f, st.s);
    EXPECT_EQ(count_nonfinite(0, nf, st.s), 0);
    st.sync();
  });
  EXPECT_EQ(f, 1.f);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace lcr::cuda::model
