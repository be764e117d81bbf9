#include "core/model/model.hpp"

#include "core/model/gemm.hpp"
#include "core/model/layers.hpp"
#include "core/model/loss.hpp"
#include "kernels/base/error.hpp"

namespace lcr {

using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>;

template <class T>
Model<T>::Model(const ModelConfig& cfg, uint64_t seed)
    : layout_(cfg),
      params_("lcr::params", size_t(layout_.total())),
      grads_("lcr::grads", size_t(layout_.total())) {
  auto host = Kokkos::create_mirror_view(params_);
  init_params<T>(layout_, host, seed);
  Kokkos::deep_copy(params_, host);
}

template <class T>
void Model<T>::zero_grad() {
  Kokkos::deep_copy(grads_, T(0));
}

template <class T>
void Model<T>::ensure_buffers(int64_t B, int64_t L) {
  if (acts_.B == B && acts_.L == L) return;
  acts_ = make_activations<T>(layout_, B, L);
  work_ = make_backward_work<T>(layout_, B, L);
}

int64_t check_batch(const int32_t* tokens, const int32_t* labels, int64_t n, int V) {
  int64_t bad_tokens = 0, bad_labels = 0, labelled = 0;
  for (int64_t r = 0; r < n; ++r) {
    bad_tokens += (tokens[r] < 0 || tokens[r] >= V) ? 1 : 0;
    bad_labels += (labels[r] < -1 || labels[r] >= V) ? 1 : 0;
    labelled += labels[r] >= 0 ? 1 : 0;
  }
  require(bad_tokens == 0, bad_tokens, " token ids lie outside [0, vocab_size = ", V,
          "); check the data's tokenizer against model.vocab_size");
  require(bad_labels == 0, bad_labels, " labels lie outside [-1, vocab_size = ", V,
          ") (-1 marks an ignored position)");
  return labelled;
}

// Kernel helpers live in a named namespace: nvcc's extended lambdas may not sit in
// functions of an anonymous namespace.
namespace model_detail {

template <class T>
int64_t count_nonfinite(const T* p, int64_t n) {
  int64_t bad = 0;
  Kokkos::parallel_reduce(
      "lcr::count_nonfinite", Range(0, n),
      KOKKOS_LAMBDA(int64_t i, int64_t & acc) { acc += (p[i] - p[i] == T(0)) ? 0 : 1; }, bad);
  return bad;
}

}  // namespace model_detail

template <class T>
double Model<T>::forward(const View2<const int32_t>& tokens, const View2<const int32_t>& labels,
                         AttentionRunner<T>& runner, double loss_norm) {
  const int64_t B = tokens.extent(0), L = tokens.extent(1), R = B * L;
  require(B > 0 && L > 0, "model.forward: empty batch ", shape_string(shape_of(tokens)));
  require(shape_of(labels) == shape_of(tokens), "model.forward: labels ",
          shape_string(shape_of(labels)), " must have the tokens' shape ",
          shape_string(shape_of(tokens)));
  require(loss_norm >= 0, "model.forward: loss_norm must be >= 0, got ", loss_norm);
  have_forward_ = false;
  ensure_buffers(B, L);
  Kokkos::deep_copy(acts_.tokens, tokens);
  Kokkos::deep_copy(acts_.labels, labels);
  {  // on the host: the batch is small next to the activations, and usually came from there
    auto t = Kokkos::create_mirror_view_and_copy(HostSpace(), acts_.tokens);
    auto y = Kokkos::create_mirror_view_and_copy(HostSpace(), acts_.labels);
    labelled_ = check_batch(t.data(), y.data(), R, layout_.V());
  }
  segs_ = runner.segments(L);
  int64_t covered = 0;
  for (const auto& sg : segs_) {
    require(sg.row0 == covered && sg.rows > 0 && sg.pos0 >= 0,
            "attention runner segments must tile the local rows in order (positions >= 0)");
    covered += sg.rows;
  }
  require(covered == L, "attention runner segments cover ", covered, " rows, the batch has ", L);

  const ModelConfig& c = config();
  const int64_t D = layout_.D(), V = layout_.V();
  const View1<const int32_t> tok(acts_.tokens.data(), R), lab(acts_.labels.data(), R);
  const View2<T> E(params_.data() + layout_.embed(), V, D);
  embedding_forward<T>(tok, E, acts_.x[0]);
  for (int l = 0; l < c.n_layers; ++l)
    block_forward<T>(layout_, block_params(layout_, params_, l), acts_.x[size_t(l)],
                     acts_.layers[size_t(l)], acts_.x[size_t(l) + 1], runner, segs_);
  const View1<T> gf(params_.data() + layout_.final_norm(), D);
  rmsnorm_forward<T>(acts_.x.back(), gf, T(c.norm_eps), acts_.xf, acts_.rstdf);
  if (c.tie_embeddings)
    gemm<T>(Trans::No, Trans::Yes, R, V, D, 1, acts_.xf.data(), E.data(), 0, acts_.logits.data());
  else
    gemm<T>(Trans::No, Trans::No, R, V, D, 1, acts_.xf.data(), params_.data() + layout_.lm_head(),
            0, acts_.logits.data());
  cross_entropy_forward<T>(acts_.logits, lab, acts_.lse, acts_.row_loss);

  // Sum on the host in row order: the same loss bit for bit on every backend.
  auto rl = Kokkos::create_mirror_view_and_copy(HostSpace(), acts_.row_loss);
  double sum = 0;
  for (int64_t r = 0; r < R; ++r) sum += double(rl(r));
  norm_ = loss_norm > 0 ? loss_norm : double(labelled_);
  have_forward_ = true;
  return norm_ > 0 ? sum / norm_ : 0.0;
}

template <class T>
void Model<T>::backward(AttentionRunner<T>& runner) {
  require(have_forward_, "model.backward needs a forward pass first (and runs once per forward)");
  have_forward_ = false;
  const ModelConfig& c = config();
  const int64_t R = acts_.B * acts_.L, D = layout_.D(), V = layout_.V();
  const View1<const int32_t> tok(acts_.tokens.data(), R), lab(acts_.labels.data(), R);
  const T scale = norm_ > 0 ? T(1.0 / norm_) : T(0);
  cross_entropy_backward<T>(acts_.logits, lab, acts_.lse, scale, acts_.logits);  // in place
  const T* dlogits = acts_.logits.data();
  T* dxf = work_.dxn.data();
  const auto N = Trans::No, Y = Trans::Yes;
  T* gE = grads_.data() + layout_.embed();
  if (c.tie_embeddings) {
    gemm<T>(N, N, R, D, V, 1, dlogits, params_.data() + layout_.embed(), 0, dxf);
    gemm<T>(Y, N, V, D, R, 1, dlogits, acts_.xf.data(), 1, gE);
  } else {
    gemm<T>(N, Y, R, D, V, 1, dlogits, params_.data() + layout_.lm_head(), 0, dxf);
    gemm<T>(Y, N, D, V, R, 1, acts_.xf.data(), dlogits, 1, grads_.data() + layout_.lm_head());
  }
  Kokkos::deep_copy(work_.dres, T(0));
  rmsnorm_backward<T>(acts_.x.back(), View1<T>(params_.data() + layout_.final_norm(), D),
                      acts_.rstdf, work_.dxn, work_.dres,
                      View1<T>(grads_.data() + layout_.final_norm(), D));
  for (int l = c.n_layers - 1; l >= 0; --l)
    block_backward<T>(layout_, block_params(layout_, params_, l), block_params(layout_, grads_, l),
                      acts_.x[size_t(l)], acts_.layers[size_t(l)], work_, runner, segs_);
  embedding_backward<T>(tok, work_.dres, View2<T>(gE, V, D));
}

template <class T>
AttentionInputs<T> Model<T>::attention_inputs(int l) const {
  require(l >= 0 && l < config().n_layers && acts_.B > 0, "no attention inputs for layer ", l,
          " (run forward first; the model has ", config().n_layers, " layers)");
  const auto& a = acts_.layers[size_t(l)];
  AttentionInputs<T> in;
  in.q = a.q;
  in.k = a.k;
  in.v = a.v;
  in.q_pos0 = in.k_pos0 = segs_.front().pos0;
  if (a.fox_c.extent(0) > 0) in.fox_cq = in.fox_ck = a.fox_c;
  if (a.path_w.extent(0) > 0) {
    in.path_w = a.path_w;
    in.path_beta = a.path_beta;
  }
  return in;
}

template <class T>
AttentionOutputs<T> Model<T>::attention_outputs(int l) const {
  attention_inputs(l);  // range check
  return {acts_.layers[size_t(l)].o, acts_.layers[size_t(l)].lse};
}

template <class T>
ParamSet<T> Model<T>::attention_params(int l) const {
  return lcr::attention_params(layout_, params_, l);
}

template <class T>
std::string Model<T>::locate_nonfinite() const {
  if (acts_.B == 0) return "";
  auto bad = [](const auto& v) {
    return model_detail::count_nonfinite(v.data(), int64_t(v.size())) > 0;
  };
  if (bad(acts_.x[0])) return "embedding";
  for (size_t l = 0; l < acts_.layers.size(); ++l) {
    const auto& a = acts_.layers[l];
    const std::string name = "layer " + std::to_string(l);
    if (bad(a.xn1)) return name + " (attention RMSNorm)";
    if (bad(a.q) || bad(a.k) || bad(a.v)) return name + " (q/k/v projections)";
    if (a.fox_c.extent(0) > 0 && bad(a.fox_c)) return name + " (FoX forget gates)";
    if (a.path_w.extent(0) > 0 && (bad(a.path_u) || bad(a.path_w) || bad(a.path_beta)))
      return name + " (PaTH w / beta)";
    if (bad(a.o) || bad(a.lse)) return name + " (attention output)";
    if (bad(a.x_mid)) return name + " (attention output projection)";
    if (bad(a.h)) return name + " (SwiGLU MLP)";
    if (bad(acts_.x[l + 1])) return name + " (MLP output projection)";
  }
  if (bad(acts_.xf)) return "final RMSNorm";
  if (bad(acts_.logits)) return "LM head";
  return "";
}

template class Model<float>;
template class Model<double>;

}  // namespace lcr
