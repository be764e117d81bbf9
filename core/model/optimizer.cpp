#include "core/model/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/attention/kokkos/math.hpp"
#include "kernels/base/error.hpp"

namespace lcr {

using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>;

void validate(const AdamWConfig& c) {
  auto finite = [](double x) { return std::isfinite(x); };
  require(finite(c.lr) && c.lr > 0, "optim.lr must be > 0, got ", c.lr);
  require(finite(c.min_lr) && c.min_lr >= 0 && c.min_lr <= c.lr,
          "optim.min_lr must lie in [0, lr = ", c.lr, "], got ", c.min_lr);
  require(c.warmup_steps >= 0, "optim.warmup_steps must be >= 0, got ", c.warmup_steps);
  require(c.total_steps >= 0, "optim.total_steps must be >= 0 (0 = no decay), got ", c.total_steps);
  require(c.beta1 >= 0 && c.beta1 < 1, "optim.beta1 must lie in [0, 1), got ", c.beta1);
  require(c.beta2 >= 0 && c.beta2 < 1, "optim.beta2 must lie in [0, 1), got ", c.beta2);
  require(finite(c.eps) && c.eps > 0, "optim.eps must be > 0, got ", c.eps);
  require(finite(c.weight_decay) && c.weight_decay >= 0, "optim.weight_decay must be >= 0, got ",
          c.weight_decay);
  require(finite(c.grad_clip) && c.grad_clip >= 0,
          "optim.grad_clip must be >= 0 (0 disables clipping), got ", c.grad_clip);
}

double learning_rate(const AdamWConfig& c, int64_t step) {
  if (step < c.warmup_steps) return c.lr * double(step + 1) / double(c.warmup_steps);
  if (c.total_steps == 0) return c.lr;
  if (step >= c.total_steps || c.total_steps <= c.warmup_steps) return c.min_lr;
  const double progress = double(step - c.warmup_steps) / double(c.total_steps - c.warmup_steps);
  return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

std::vector<ParamRange> model_param_ranges(const ModelLayout& layout, const AdamWConfig& c) {
  std::vector<ParamRange> out;
  for (const auto& e : layout.params().entries()) {
    ParamRange r;
    r.name = e.name;
    r.offset = e.offset;
    r.size = e.size();
    const ParamKind k = layout.kind(e);
    r.decay = k == ParamKind::Matrix || k == ParamKind::OutMatrix ||
              (k == ParamKind::Embedding && c.decay_embeddings);
    if (ends_with(e.name, "pope.delta")) {
      r.clamp = true;  // DESIGN.md section 3: delta clamped to [-2 pi, 0]
      r.lo = -2.0 * M_PI;
      r.hi = 0.0;
    }
    r.frozen = layout.config().attention.numerics.off_by_one && ends_with(e.name, ".sink");
    out.push_back(r);
  }
  return out;
}

template <class T>
double global_grad_norm(const View1<const T>& g) {
  constexpr int64_t chunk = 8192;
  const int64_t n = g.extent(0), nc = (n + chunk - 1) / chunk;
  if (n == 0) return 0.0;
  View1<double> part("lcr::norm_parts", nc);
  Kokkos::parallel_for(
      "lcr::grad_norm_chunks", Range(0, nc), KOKKOS_LAMBDA(int64_t c) {
        const int64_t e = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        double s = 0;
        for (int64_t i = c * chunk; i < e; ++i) s += double(g(i)) * double(g(i));
        part(c) = s;
      });
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), part);
  double s = 0;
  for (int64_t c = 0; c < nc; ++c) s += h(c);
  return std::sqrt(s);
}

template <class T>
AdamW<T>::AdamW(const AdamWConfig& cfg, std::vector<ParamRange> ranges, int64_t n)
    : cfg_(cfg),
      ranges_(std::move(ranges)),
      m_("lcr::adam_m", size_t(n)),
      v_("lcr::adam_v", size_t(n)),
      decay_("lcr::adam_decay", size_t(n)) {
  validate(cfg_);
  std::vector<const ParamRange*> sorted;
  for (const auto& r : ranges_) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(),
            [](const ParamRange* a, const ParamRange* b) { return a->offset < b->offset; });
  int64_t next = 0;
  auto h = Kokkos::create_mirror_view(decay_);
  for (const ParamRange* r : sorted) {
    require(r->offset == next && r->size >= 0, "optimizer ranges must tile the parameter buffer: '",
            r->name, "' starts at ", r->offset, ", expected ", next);
    require(!r->clamp || r->lo <= r->hi, "clamp range of '", r->name, "' is empty");
    for (int64_t i = 0; i < r->size; ++i) h(r->offset + i) = r->decay ? 1 : 0;
    next += r->size;
  }
  require(next == n, "optimizer ranges cover ", next, " values, the buffer has ", n);
  Kokkos::deep_copy(decay_, h);
}

template <class T>
void AdamW<T>::set_steps_taken(int64_t t) {
  require(t >= 0, "optimizer step count must be >= 0, got ", t);
  t_ = t;
}

template <class T>
typename AdamW<T>::StepInfo AdamW<T>::step(const View1<T>& p, const View1<const T>& g) {
  const int64_t n = m_.extent(0);
  require(int64_t(p.extent(0)) == n && int64_t(g.extent(0)) == n, "optimizer built for ", n,
          " parameters got buffers of ", p.extent(0), " and ", g.extent(0));
  StepInfo info;
  info.step = t_;
  info.lr = learning_rate(cfg_, t_);
  info.grad_norm = global_grad_norm<T>(g);
  require(std::isfinite(info.grad_norm), "gradient norm is ", info.grad_norm, " at step ", t_,
          "; parameters left unchanged");
  if (cfg_.grad_clip > 0 && info.grad_norm > cfg_.grad_clip)
    info.clip_scale = cfg_.grad_clip / (info.grad_norm + 1e-6);
  const int64_t t = t_ + 1;
  const T lr = T(info.lr), b1 = T(cfg_.beta1), b2 = T(cfg_.beta2), eps = T(cfg_.eps);
  const T wd_factor = T(1.0 - info.lr * cfg_.weight_decay), scale = T(info.clip_scale);
  const T bc1 = T(1.0 - std::pow(cfg_.beta1, double(t)));
  const T bc2 = T(1.0 - std::pow(cfg_.beta2, double(t)));
  const auto m = m_, v = v_;
  const auto decay = decay_;
  Kokkos::parallel_for(
      "lcr::adamw_step", Range(0, n), KOKKOS_LAMBDA(int64_t i) {
        const T gi = g(i) * scale;
        const T mi = b1 * m(i) + (T(1) - b1) * gi;
        const T vi = b2 * v(i) + (T(1) - b2) * gi * gi;
        m(i) = mi;
        v(i) = vi;
        T pi = decay(i) ? p(i) * wd_factor : p(i);
        pi -= lr * (mi / bc1) / (kmath::sqrt(vi / bc2) + eps);
        p(i) = pi;
      });
  for (const auto& r : ranges_) {
    if (!r.clamp || r.size == 0) continue;
    const T lo = T(r.lo), hi = T(r.hi);
    T* base = p.data() + r.offset;
    Kokkos::parallel_for(
        "lcr::adamw_clamp", Range(0, r.size),
        KOKKOS_LAMBDA(int64_t i) { base[i] = base[i] < lo ? lo : (base[i] > hi ? hi : base[i]); });
  }
  t_ = t;
  return info;
}

template <class T>
void zero_frozen_grads(const std::vector<ParamRange>& ranges, const View1<T>& grads) {
  for (const auto& r : ranges)
    if (r.frozen && r.size > 0)
      Kokkos::deep_copy(Kokkos::subview(grads, std::make_pair(r.offset, r.offset + r.size)), T(0));
}

template void zero_frozen_grads<float>(const std::vector<ParamRange>&, const View1<float>&);
template void zero_frozen_grads<double>(const std::vector<ParamRange>&, const View1<double>&);
template double global_grad_norm<float>(const View1<const float>&);
template double global_grad_norm<double>(const View1<const double>&);
template class AdamW<float>;
template class AdamW<double>;

}  // namespace lcr
