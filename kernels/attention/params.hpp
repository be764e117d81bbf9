#pragma once
// The learned parameters of an attention call's position scheme and numerics options,
// kept in ONE contiguous buffer (llm.c style) so gradients, optimizer state, HDF5 I/O
// and all-reduces treat them as a single array. A ParamLayout names the slices:
//   goat.alpha [H, R]   goat.beta [H, R]             (query lanes: per query head)
//   goat.lambda [Hkv]   goat.bump [Hkv]               (key lane u_h(j): per KV head)
//   goat.mlp_w1 [Hkv, hidden, F]  goat.mlp_b1 [Hkv, hidden]  goat.mlp_w2 [Hkv, hidden]
//   pope.delta [Hkv, d]                               (key phase bias, in [-2pi, 0])
//   sink [H]            qk_norm.q_gain [dq]  qk_norm.k_gain [dq]
#include <string>
#include <vector>

#include "kernels/attention/spec.hpp"
#include "kernels/base/error.hpp"
#include "kernels/base/tensor.hpp"

namespace lcr {

struct ParamEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t size() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
};

class ParamLayout {
 public:
  void add(const std::string& name, std::vector<int64_t> shape);
  const ParamEntry& at(const std::string& name) const;  // Error if absent
  bool has(const std::string& name) const;
  const std::vector<ParamEntry>& entries() const { return entries_; }
  int64_t total() const { return total_; }

 private:
  std::vector<ParamEntry> entries_;
  int64_t total_ = 0;
};

// The parameters an attention spec needs (empty for NoPE/RoPE/ALiBi without options).
ParamLayout attention_param_layout(const AttentionSpec& spec);

// Unmanaged rank-1..3 views used by the scheme units.
template <class T, class M = MemSpace>
using PView1 = Kokkos::View<T*, Kokkos::LayoutRight, M, Kokkos::MemoryUnmanaged>;
template <class T, class M = MemSpace>
using PView2 = Kokkos::View<T**, Kokkos::LayoutRight, M, Kokkos::MemoryUnmanaged>;
template <class T, class M = MemSpace>
using PView3 = Kokkos::View<T***, Kokkos::LayoutRight, M, Kokkos::MemoryUnmanaged>;

// A layout plus its buffer. Views handed out alias the buffer (unmanaged).
template <class T, class M = MemSpace>
struct ParamSet {
  ParamLayout layout;
  View1<T, M> data;

  ParamSet() = default;
  explicit ParamSet(ParamLayout l, const std::string& label = "params")
      : layout(std::move(l)), data(label, layout.total()) {}

  bool has(const std::string& n) const { return layout.has(n); }
  PView1<T, M> v1(const std::string& n) const {
    const auto& e = check(n, 1);
    return PView1<T, M>(data.data() + e.offset, size_t(e.shape[0]));
  }
  PView2<T, M> v2(const std::string& n) const {
    const auto& e = check(n, 2);
    return PView2<T, M>(data.data() + e.offset, size_t(e.shape[0]), size_t(e.shape[1]));
  }
  PView3<T, M> v3(const std::string& n) const {
    const auto& e = check(n, 3);
    return PView3<T, M>(data.data() + e.offset, size_t(e.shape[0]), size_t(e.shape[1]),
                        size_t(e.shape[2]));
  }

 private:
  const ParamEntry& check(const std::string& n, size_t rank) const {
    const auto& e = layout.at(n);
    require(e.shape.size() == rank, "parameter '", n, "' has rank ", e.shape.size(), ", not ",
            rank);
    return e;
  }
};

}  // namespace lcr
