#pragma once
// DeviceBuffer<T>: an owning, move-only array in GPU memory (plain cudaMalloc, never
// managed memory) with host upload/download. Used by tests, benchmarks and the drivers
// that stage tensors for the CUDA kernels.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/attention/cuda/cuda_check.hpp"
#include "kernels/base/error.hpp"

namespace lcr::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { allocate(n); }
  explicit DeviceBuffer(const std::vector<T>& host) {
    allocate(host.size());
    upload(host);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  std::size_t size() const { return n_; }
  // At least n elements: reallocates (contents lost, the old memory freed first, so old and
  // new need not fit together) when smaller, else keeps the buffer as it is.
  void grow(std::size_t n) {
    if (n_ >= n) return;
    release();
    allocate(n);
  }
  std::size_t bytes() const { return n_ * sizeof(T); }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }

  // Copies host -> device; the host vector must have exactly size() elements.
  void upload(const std::vector<T>& host) {
    require(host.size() == n_, "DeviceBuffer::upload: host vector has ", host.size(),
            " elements, the buffer ", n_, "; resize one to match");
    if (n_) LCR_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  // Copies device -> host (synchronising with the legacy default stream).
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_) LCR_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  // Fills every byte with `byte` (tests poison outputs with 0xFF = NaN in bf16/fp32).
  void fill_bytes(int byte) {
    if (n_) LCR_CUDA_CHECK(cudaMemset(ptr_, byte, bytes()));
  }

 private:
  void allocate(std::size_t n) {
    n_ = n;
    if (n) LCR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)));
  }
  void release() noexcept {
    if (ptr_) cudaFree(ptr_);  // no throw from a destructor; a failed free leaks only
    ptr_ = nullptr;
    n_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace lcr::cuda
