#pragma once
// Tensors are Kokkos views. Every view is LayoutRight (row-major, last index fastest)
// in every memory space, so a [B, L, H, D] tensor is laid out the same on host and
// device and a head's D values are contiguous.
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace lcr {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;
using HostSpace = Kokkos::HostSpace;

template <class T, class M = MemSpace>
using View1 = Kokkos::View<T*, Kokkos::LayoutRight, M>;
template <class T, class M = MemSpace>
using View2 = Kokkos::View<T**, Kokkos::LayoutRight, M>;
template <class T, class M = MemSpace>
using View3 = Kokkos::View<T***, Kokkos::LayoutRight, M>;
template <class T, class M = MemSpace>
using View4 = Kokkos::View<T****, Kokkos::LayoutRight, M>;

template <class V>
std::vector<int64_t> shape_of(const V& v) {
  std::vector<int64_t> s;
  for (unsigned r = 0; r < V::rank; ++r) s.push_back(static_cast<int64_t>(v.extent(r)));
  return s;
}

std::string shape_string(const std::vector<int64_t>& s);

// A device copy of a small host table (frequencies, slopes), labelled for Kokkos tools.
template <class T>
View1<T> device_copy(const std::string& label, const std::vector<T>& host) {
  View1<T> v(label, host.size());
  auto h = Kokkos::create_mirror_view(v);
  for (size_t i = 0; i < host.size(); ++i) h(i) = host[i];
  Kokkos::deep_copy(v, h);
  return v;
}

}  // namespace lcr
