#include "kernels/attention/params.hpp"

#include "kernels/schemes/goat/goat.hpp"
#include "kernels/schemes/pope/pope.hpp"

namespace lcr {

void ParamLayout::add(const std::string& name, std::vector<int64_t> shape) {
  require(!has(name), "parameter '", name, "' added twice");
  ParamEntry e{name, std::move(shape), total_};
  total_ += e.size();
  entries_.push_back(std::move(e));
}

bool ParamLayout::has(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return true;
  return false;
}

const ParamEntry& ParamLayout::at(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return e;
  std::string known;
  for (const auto& e : entries_) known += (known.empty() ? "" : ", ") + e.name;
  throw_error("no parameter '", name, "' in this layout (has: ", known.empty() ? "none" : known,
              ")");
}

ParamLayout attention_param_layout(const AttentionSpec& spec) {
  ParamLayout l;
  if (is_goat(spec.scheme)) goat::add_params(spec, l);
  if (spec.scheme == Scheme::PoPE) pope::add_params(spec, l);
  if (spec.numerics.has_sink()) l.add("sink", {spec.heads});
  if (spec.numerics.qk_norm) {
    l.add("qk_norm.q_gain", {input_qk_dim(spec)});
    l.add("qk_norm.k_gain", {input_qk_dim(spec)});
  }
  return l;
}

}  // namespace lcr
