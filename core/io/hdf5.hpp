#pragma once
// Small HDF5 helpers over the C API: RAII handles, N-d numeric datasets to and from
// host buffers and Kokkos views (shape-checked), scalar attributes. Every failure is an
// lcr::Error naming the file and the object ("in.h5: dataset /k has shape [1, 5, 2, 16],
// expected [1, 7, 2, 16]"); HDF5's own error-stack printing is switched off.
#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kernels/base/error.hpp"
#include "kernels/base/tensor.hpp"

namespace lcr::h5 {

// Library failures come back as negative ids/statuses and are turned into lcr::Error by
// their callers, so HDF5 must not print its error stack to stderr: quiet() switches that
// off. detail() is the innermost message of HDF5's error stack as " (HDF5: ...)" ("" when
// empty), to append to our own; it clears the stack.
void quiet();
std::string detail();

// Checks that `path` can be opened as an HDF5 file, with the error a user can act on:
// "no such file", "is a directory", "permission denied", "is not an HDF5 file", or "is
// damaged" when the superblock's checksum (format v2/v3) does not match. HDF5 itself
// retries a bad checksum for minutes under SWMR read (a writer may be rewriting it), so
// every reader calls this first; it re-reads a mismatching superblock for ~0.5 s.
void check_file(const std::string& path);

// A scalar attribute. bool is stored as h5py stores numpy bools (an int8 enum FALSE/TRUE),
// integers as int64, floats as float64, strings as variable-length UTF-8.
using Attr = std::variant<bool, int64_t, double, std::string>;

// Owns one hid_t and closes it with the matching H5?close.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t id() const { return id_; }
  herr_t reset();  // closes now; returns the close status

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

// A file or a group: where datasets, groups and attributes live. Knows the file's name
// and its own path inside it so every error can say which object failed.
class Location {
 public:
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  hid_t id() const { return h_->id(); }
  std::string child_path(const std::string& name) const;  // "/params/goat.alpha"

  bool has(const std::string& name) const;  // a link of that name exists
  bool has_group(const std::string& name) const;
  bool has_dataset(const std::string& name) const;
  std::vector<std::string> children() const;      // names, in HDF5's (alphabetical) order
  Location group(const std::string& name) const;  // Error if it is not there
  Location create_group(const std::string& name) const;

  // Dataset shape (rank 0 for a scalar). Error if missing or not a dataset, or if it does
  // not match `expect` (when given; -1 entries match any extent).
  std::vector<int64_t> shape(const std::string& name) const;
  std::vector<int64_t> shape(const std::string& name, const std::vector<int64_t>& expect) const;
  template <class T>  // T: float, double, int32_t, int64_t
  void write(const std::string& name, const T* data, const std::vector<int64_t>& shape) const;
  // Reads a numeric dataset, converted to T, checked against `expect` as shape() does.
  // The shape read is returned through `shape`.
  template <class T>
  std::vector<T> read(const std::string& name, const std::vector<int64_t>& expect = {},
                      std::vector<int64_t>* shape = nullptr) const;

  bool has_attr(const std::string& name) const;
  std::vector<std::string> attr_names() const;
  Attr attr(const std::string& name) const;  // Error if missing or not a scalar
  void set_attr(const std::string& name, const Attr& value) const;

 protected:
  Location(std::string file, std::string path, std::shared_ptr<Handle> h)
      : file_(std::move(file)), path_(std::move(path)), h_(std::move(h)) {}
  [[noreturn]] void fail(const std::string& what) const;
  Handle& handle() const { return *h_; }

 private:
  std::string file_, path_;
  std::shared_ptr<Handle> h_;
};

class File : public Location {
 public:
  // Opens an existing file (read-only unless `writable`). Errors: missing file, not an
  // HDF5 file.
  static File open(const std::string& path, bool writable = false);
  // Creates (truncates) a file for writing.
  static File create(const std::string& path);
  // Flushes and closes; reports a failed close (disk full). Groups opened from this file
  // must be gone first. The destructor closes silently.
  void close();

 private:
  using Location::Location;
};

// "[1, 7, 2, *]": a shape, -1 shown as *.
std::string shape_pattern(const std::vector<int64_t>& s);

// Kokkos views (any memory space, LayoutRight): mirrored to the host as needed.
template <class V>
void write_view(const Location& loc, const std::string& name, const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  loc.write(name, h.data(), shape_of(h));
}

// Reads a dataset of rank V::rank into a new view of V's type (element type converted).
template <class V>
V read_view(const Location& loc, const std::string& name, std::vector<int64_t> expect = {}) {
  using T = typename V::non_const_value_type;
  constexpr int rank = V::rank;
  if (expect.empty()) expect.assign(rank, -1);
  std::vector<int64_t> s;
  std::vector<T> data = loc.read<T>(name, expect, &s);
  static_assert(rank >= 1 && rank <= 4, "read_view handles rank 1 to 4");
  using Plain =
      Kokkos::View<typename V::non_const_data_type, Kokkos::LayoutRight, typename V::memory_space>;
  Plain v;
  const std::string label = loc.child_path(name);
  if constexpr (rank == 1) v = Plain(label, s[0]);
  if constexpr (rank == 2) v = Plain(label, s[0], s[1]);
  if constexpr (rank == 3) v = Plain(label, s[0], s[1], s[2]);
  if constexpr (rank == 4) v = Plain(label, s[0], s[1], s[2], s[3]);
  auto h = Kokkos::create_mirror_view(v);
  std::copy(data.begin(), data.end(), h.data());
  Kokkos::deep_copy(v, h);
  return v;
}

}  // namespace lcr::h5
