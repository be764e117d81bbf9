#pragma once
// GOAT: attention with a learned positional prior (seed 000, DESIGN.md section 3).
//
//   logit_ij = <q_c,i, k_c,j> / sqrt(d_c) + K_rel(i, j) + u_hk(j)
//   K_rel    = sum_r alpha_hr cos(w_r (c_r(i) - c_r(j))) + beta_hr sin(w_r (c_r(i) - c_r(j)))
//   u_hk(j)  = lambda_hk j + g_hk(phi(j)) + bump_hk 1{j = 0}
//   g_hk(x)  = w2_hk . silu(W1_hk x + b1_hk)          (no output bias: it cancels in softmax)
//   phi(j)   = [sin(j f_1), cos(j f_1), ..., sin(j f_F), cos(j f_F), j / L_train,
//               log(1 + j) / log(1 + L_train)]       (2F + 2 features)
// i, j are GLOBAL positions. GOAT: c_r(p) = p for every mode, w_r = B^(-(r-1)/max(R-1,1)).
// GOAT2D: p sits at (y, x) = (p / W, p % W); the first R_y modes use c_r = y, the other
// R_x = R - R_y modes use c_r = x, each axis with its own ladder
// w = B^(-(r'-1)/max(R_axis-1,1)) (r' the 1-based index within the axis); the two axis
// sums are ADDED. u and causality stay on the linear position p.
// Feature frequencies f_m = B^(-(m-1)/max(F-1,1)), m = 1..F: the same geometric ladder as
// the modes (from 1 rad/token down to 1/B), so phi resolves both fine and coarse absolute
// structure with F pairs; the paper does not fix them.
//
// Lanes (seed 000 section 2.5): the head splits d_h = d_c + d_p, d_p = 2R + 2, and
//   q' = [sqrt(d_h/d_c) q_c, sqrt(d_h) q_rel, sqrt(d_h), 0],  k' = [k_c, k_rel, u(j), 0]
//   per mode: k_rel = [cos(w c(j)), sin(w c(j))],
//             q_rel = [a cos(w c(i)) + b sin(w c(i)), a sin(w c(i)) - b cos(w c(i))]
// so ONE plain SDPA call with scale 1/sqrt(d_h) gives exactly the logit above. Angles are
// computed in double (positions up to 1e7) and cast to T.
//
// Parameters (GQA), goat.recipe = "lcr": alpha, beta [H, R] per QUERY head (they live in the
// query lanes); lambda [Hkv], bump [Hkv], mlp_w1 [Hkv, hidden, 2F+2], mlp_b1 [Hkv, hidden],
// mlp_w2 [Hkv, hidden] per KV head (u is a key lane). goat.recipe = "authors": the GOAT
// authors' parameters, mapped onto these lane parameters by goat_recipe.hpp.
//
// Query gate (goat.query_gate, the authors' option, either recipe): per query head h,
//   g_i = sigmoid(gate_bias_h - softplus(gate_scale_h) |q_c,i|)
// multiplies the query's prior lanes (every mode and the u lane), i.e. the logit becomes
// content + g_i (K_rel + u). Parameters gate_scale [H], gate_bias [H], after the recipe's.
// At |q_c| = 0 the norm's gradient is taken as 0.
#include <cstdint>
#include <vector>

#include "kernels/schemes/goat/goat_recipe.hpp"
#include "kernels/schemes/lanes.hpp"

namespace lcr::goat {

void validate(const AttentionSpec& spec);  // throws Error naming the bad option
void add_params(const AttentionSpec& spec, ParamLayout& layout);
int lanes_width(const AttentionSpec& spec);    // width of q', k' (= head_dim)
double sdpa_scale(const AttentionSpec& spec);  // scale the SDPA kernel applies (1/sqrt(d_h))

template <class T>
void lanes_forward(const LaneArgs<T>& a, const View4<T>& q2, const View4<T>& k2);

// dq, dk overwritten; parameter gradients ADDED into dparams (deterministic reductions:
// one team per parameter element summing over batch and positions in a fixed order).
template <class T>
void lanes_backward(const LaneArgs<T>& a, const View4<const T>& dq2, const View4<const T>& dk2,
                    const View4<T>& dq, const View4<T>& dk, ParamSet<T>& dparams);

// ---- the authors' recipe ----
// The slice offsets of the map between the authors' buffer and the lane buffer.
RecipeMap recipe_map(const AttentionSpec& spec);
// The spec whose parameter layout is the lanes' (recipe "lcr", the other options kept).
AttentionSpec lane_spec(const AttentionSpec& spec);
// The parameters the lanes read: for recipe "lcr" a copy of params, for "authors" the map.
ParamSet<double, HostSpace> host_lane_params(const AttentionSpec& spec,
                                             const ParamSet<double, HostSpace>& params);

// ---- geometry shared by the lanes and the host-side statistics ----
int content_dim(const AttentionSpec& spec);    // d_c = head_dim - 2R - 2
int feature_count(const AttentionSpec& spec);  // 2F + 2
int y_modes(const AttentionSpec& spec);        // GOAT2D: R_y (goat.y_modes, or R/2 when 0); GOAT: 0
enum class Axis : int { Linear = 0, Y = 1, X = 2 };
Axis mode_axis(const AttentionSpec& spec, int r);            // r 0-based
double mode_frequency(const AttentionSpec& spec, int r);     // w_r, r 0-based
double feature_frequency(const AttentionSpec& spec, int m);  // f_m, m 0-based
// The coordinate mode r reads at GLOBAL position p: p, p / W or p % W.
int64_t mode_coordinate(const AttentionSpec& spec, int r, int64_t p);

// ---- host-side prior statistics (for the HDF5 run log and the analysis tools) ----
// K_rel of query head h at each lag l = i - j: sum_r alpha cos(w_r l) + beta sin(w_r l).
// GOAT2D: the prior of a query at linear position l against the key at position 0, i.e.
// the displacement (dy, dx) = (l / W, l % W) (l >= 0); use relative_prior_2d for a map.
std::vector<double> relative_prior(const AttentionSpec& spec,
                                   const ParamSet<double, HostSpace>& params, int h,
                                   const std::vector<int64_t>& lags);
// GOAT2D: K_rel of head h at every displacement (dys[a], dxs[b]), row-major
// [dys.size(), dxs.size()].
std::vector<double> relative_prior_2d(const AttentionSpec& spec,
                                      const ParamSet<double, HostSpace>& params, int h,
                                      const std::vector<int64_t>& dys,
                                      const std::vector<int64_t>& dxs);
// u_hk(j) of KV head hk at each GLOBAL key position j.
std::vector<double> key_bias(const AttentionSpec& spec, const ParamSet<double, HostSpace>& params,
                             int hk, const std::vector<int64_t>& positions);
// sqrt(alpha_hr^2 + beta_hr^2) for r = 0..R-1.
std::vector<double> mode_amplitudes(const AttentionSpec& spec,
                                    const ParamSet<double, HostSpace>& params, int h);

// Initialises the goat.* slices of a host parameter set (other slices untouched):
//   alpha, beta ~ N(0, 0.02^2): small, close to the paper's zero init (its Table 5 ablation
//     shows zero vs random init within 0.02 PPL); the prior starts almost uniform and
//     d alpha, d beta do not depend on alpha, beta, so learning starts at once.
//   mlp_w1 ~ N(0, 1 / (2F+2)) (fan-in scaling: hidden pre-activations O(1)), mlp_b1 = 0,
//   mlp_w2 = 0: g == 0 at init ("near-zero MLP") yet d w2 = sum du silu(W1 phi) != 0,
//     so the MLP leaves zero (all-zero W1 and w2 would be a stationary point).
//   lambda = 0, bump = 0.
// Recipe "authors", as their package seeds it: kv_alpha ~ N(0, 0.01^2), kv_beta = 0; the
//   shared MLP's weights ~ N(0, 0.001^2), biases 0; gain 1, bump 0; slope = softplus^-1 of
//   ALiBi's published slopes for Hkv heads.
// Query gate (either recipe): gate_scale = -10, gate_bias = 10 (g = sigmoid(10 - 4.5e-5 |q_c|),
//   about 1: the gate starts open).
// Normal draws: Box-Muller on std::mt19937_64, so a seed gives the same values with any
// standard library.
template <class T>
void init_params(const AttentionSpec& spec, ParamSet<T, HostSpace>& params, uint64_t seed);

}  // namespace lcr::goat
