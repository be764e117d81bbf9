// Bad PaTH inputs give an lcr::Error that names the tensor and the problem: beta >= 2 (or
// < 0), w of zero (or non-unit) norm, NaN / inf in any input, mismatched shapes, a query
// span that is not the key span, a bad block size, PaTH inputs for another scheme.
#include <gtest/gtest.h>

#include <functional>

#include "kernels/schemes/path/ring.hpp"
#include "kernels/test_path_support.hpp"

namespace lcr::test::pathtest {
namespace {

PathProblem small(Scheme scheme = Scheme::PaTH) {
  PathCase c;
  c.spec.scheme = scheme;
  c.spec.heads = 2;
  c.spec.kv_heads = 1;
  c.spec.head_dim = 4;
  c.spec.path.block_size = 3;
  c.L = 5;
  return make_path_problem(c);
}

// Runs the forward of p (after `edit` changes its inputs) and expects an Error whose
// message contains every piece of `want`.
void expect_error(PathProblem p,
                  const std::function<void(PathProblem&, AttentionInputs<double>&)>& edit,
                  const std::vector<std::string>& want) {
  AttentionInputs<double> in = device_inputs<double>(p);
  edit(p, in);
  ParamSet<double> params(attention_param_layout(p.c.spec));
  AttentionOutputs<double> out{View4<double>("o", p.c.B, p.c.L, p.c.spec.heads, 4),
                               View3<double>("lse", p.c.B, p.c.spec.heads, p.c.L)};
  try {
    attention_forward<double>(p.c.spec, in, params, out);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& w : want)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
          << "message '" << e.what() << "' lacks '" << w << "'";
  }
}

// Sets one element of a host tensor and re-uploads it into the device input.
template <class V, class D>
void poke(const V& host, D& device, size_t flat_index, double value) {
  host.data()[flat_index] = value;
  device = to_device<double>(host, "poked");
}

TEST(PathErrors, BetaOutsideZeroTwo) {
  for (double b : {2.0, 2.5, -0.1}) {
    expect_error(small(), [&](PathProblem& p, auto& in) { poke(p.beta, in.path_beta, 3, b); },
                 {"path_beta", "[0, 3, 0]", "outside [0, 2)"});
  }
}

TEST(PathErrors, WOfZeroOrNonUnitNorm) {
  expect_error(small(),
               [](PathProblem& p, auto& in) {
                 for (int c = 0; c < 4; ++c) p.w(0, 2, 0, c) = 0.0;
                 in.path_w = to_device<double>(p.w, "w");
               },
               {"path_w", "[0, 2, 0]", "norm 0", "unit"});
  expect_error(small(),
               [](PathProblem& p, auto& in) {
                 for (int c = 0; c < 4; ++c) p.w(0, 4, 0, c) *= 1.5;
                 in.path_w = to_device<double>(p.w, "w");
               },
               {"path_w", "[0, 4, 0]", "norm 1.5"});
}

TEST(PathErrors, NonFiniteInputs) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  expect_error(small(), [&](PathProblem& p, auto& in) { poke(p.q, in.q, 9, nan); },
               {"q has a non-finite value", "[0, 1, 0, 1]"});
  expect_error(small(), [&](PathProblem& p, auto& in) { poke(p.k, in.k, 0, inf); }, {"k has"});
  expect_error(small(), [&](PathProblem& p, auto& in) { poke(p.v, in.v, 2, nan); }, {"v has"});
  expect_error(small(), [&](PathProblem& p, auto& in) { poke(p.w, in.path_w, 5, nan); },
               {"path_w has a non-finite"});
  expect_error(small(), [&](PathProblem& p, auto& in) { poke(p.beta, in.path_beta, 1, nan); },
               {"path_beta has a non-finite"});
  expect_error(small(Scheme::PaTHFoX),
               [&](PathProblem& p, auto& in) { poke(p.fox_ck, in.fox_ck, 1, nan); },
               {"fox_ck has a non-finite"});
}

TEST(PathErrors, MismatchedShapes) {
  expect_error(small(), [](PathProblem&, auto& in) { in.path_w = View4<double>("w", 1, 5, 1, 3); },
               {"path_w has shape [1, 5, 1, 3], expected [1, 5, 1, 4]"});
  expect_error(small(), [](PathProblem&, auto& in) { in.path_beta = View3<double>("b", 1, 4, 1); },
               {"path_beta has shape [1, 4, 1], expected [1, 5, 1]"});
  expect_error(small(), [](PathProblem&, auto& in) { in.path_w = View4<double>(); },
               {"path_w has shape"});
  expect_error(small(), [](PathProblem&, auto& in) { in.k = View4<double>("k", 1, 5, 2, 4); },
               {"k has shape"});
  expect_error(small(Scheme::PaTHFoX), [](PathProblem&, auto& in) { in.fox_cq = View3<double>(); },
               {"fox_cq has shape"});
}

TEST(PathErrors, QueriesMustBeTheKeySpan) {
  expect_error(small(),
               [](PathProblem& p, auto& in) {
                 in.q = View4<double>("q", 1, 3, 2, 4);
                 (void)p;
               },
               {"self-attention", "q has 3 rows", "k has 5 rows"});
  expect_error(small(), [](PathProblem&, auto& in) { in.q_pos0 = 2; },
               {"self-attention", "from position 2", "from position 0"});
}

TEST(PathErrors, BlockSizeAndScheme) {
  PathProblem p = small();
  p.c.spec.path.block_size = 0;
  expect_error(p, [](PathProblem&, auto&) {}, {"block_size must be >= 1"});
  PathProblem q = small();
  q.c.spec.scheme = Scheme::NoPE;
  expect_error(q, [](PathProblem&, auto&) {}, {"PaTH inputs", "'nope'"});
}

TEST(PathErrors, ChunkFunctionsCheckShapes) {
  View4<double> w("w", 1, 6, 2, 4), k("k", 1, 6, 2, 3), out("out", 1, 6, 2, 4);
  View3<double> beta("beta", 1, 6, 2), beta_bad("beta", 1, 5, 2);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              path::fold_keys_right<double>(w, beta, k, 4, out);
            }).find("k has shape [1, 6, 2, 3]"),
            std::string::npos);
  EXPECT_NE(message([&] {
              path::fold_queries_left<double>(w, beta_bad, out, 4, out);
            }).find("path beta has shape [1, 5, 2]"),
            std::string::npos);
  EXPECT_NE(message([&] {
              path::chunk_transition<double>(w, beta, 0, View4<double>());
            }).find("block size must be >= 1"),
            std::string::npos);
}

}  // namespace
}  // namespace lcr::test::pathtest
