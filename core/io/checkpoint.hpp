#pragma once
// Checkpoints: one HDF5 file per save, runs/<name>/ckpt/step-<N>.h5 (layout:
// docs/run-file.md). Generic on purpose: the trainer hands over named flat arrays (model
// parameters, AdamW moments, ...; float, double or int64, stored bit-exactly in their own
// type), scalar attributes, the step, the data seed (the sampler is stateless given
// (seed, step)) and the resolved config TOML.
//
// Crash safety of save(): write step-<N>.h5.tmp, close, fsync, rename to step-<N>.h5,
// fsync the directory, then replace the marker file `latest` (text: the step) the same
// way. A file named step-<N>.h5 is therefore always complete; leftovers *.tmp are ignored
// and deleted by the next save. Every array carries HDF5's Fletcher-32 checksum, so bit rot
// and torn copies are read errors rather than silent garbage.
//
//   Checkpoint c;  c.step = step;  c.seed = seed;  c.config_toml = toml;
//   c.put_view("params", model.params(), slices);  c.put_view("adam_m", opt.m());
//   CheckpointStore("runs/x/ckpt").save(c, /*keep_last=*/3);
//   ...
//   if (auto found = CheckpointStore("runs/x/ckpt").load_latest()) {
//     found->checkpoint.copy_to_view("params", model.params());  step = found->checkpoint.step;
//   }
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/io/hdf5.hpp"

namespace lcr::io {

// A named piece of a flat buffer (a ParamLayout entry): stored as the array's `layout`
// attribute so readers can cut the buffer without the C++ code.
struct Slice {
  std::string name;
  int64_t offset = 0;
  std::vector<int64_t> shape;
};

struct CkptArray {
  std::variant<std::vector<float>, std::vector<double>, std::vector<int64_t>> values;
  std::vector<int64_t> shape;  // prod(shape) == size
  std::vector<Slice> slices;   // optional
  int64_t size() const;
};

struct Checkpoint {
  int64_t step = 0;   // optimizer updates completed
  uint64_t seed = 0;  // data seed
  std::string config_toml;
  std::map<std::string, h5::Attr> scalars;  // anything else (loss scale, best eval, ...)
  std::map<std::string, CkptArray> arrays;

  // shape empty = flat [values.size()]. T: float, double, int64_t.
  template <class T>
  void put(const std::string& name, std::vector<T> values, std::vector<int64_t> shape = {},
           std::vector<Slice> slices = {});
  // The stored values; Error naming the array if missing or of another type.
  template <class T>
  const std::vector<T>& get(const std::string& name) const;
  const CkptArray& at(const std::string& name) const;  // Error listing the arrays

  // Kokkos views (any memory space): copied through a host mirror.
  template <class V>
  void put_view(const std::string& name, const V& v, std::vector<Slice> slices = {}) {
    using T = typename V::non_const_value_type;
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    put<T>(name, std::vector<T>(h.data(), h.data() + h.size()), shape_of(h), std::move(slices));
  }
  // Error naming the array when the sizes differ.
  template <class V>
  void copy_to_view(const std::string& name, const V& v) const {
    using T = typename V::non_const_value_type;
    const std::vector<T>& src = get<T>(name);
    require(int64_t(src.size()) == int64_t(v.size()), "checkpoint array '", name, "' has ",
            src.size(), " values; the model expects ", v.size(), " (different config?)");
    auto h = Kokkos::create_mirror_view(v);
    std::copy(src.begin(), src.end(), h.data());
    Kokkos::deep_copy(v, h);
  }
};

// A checkpoint whose `checksum` attribute (over step, seed, config, scalars and arrays)
// does not match its contents: edited after it was written.
struct ChecksumMismatch : Error {
  using Error::Error;
};

// One file. Errors name the path: missing, not HDF5, truncated, checksum mismatch (of an
// array's Fletcher-32, or ChecksumMismatch for the whole-checkpoint `checksum`), not a
// checkpoint, or a step attribute that disagrees with expect_step (>= 0).
void write_checkpoint(const std::string& path, const Checkpoint& c);
Checkpoint read_checkpoint(const std::string& path, int64_t expect_step = -1);

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string dir);  // created on the first save
  const std::string& dir() const { return dir_; }
  std::string file_for(int64_t step) const;  // dir/step-<N>.h5

  // Saves atomically (see the top of this file), updates `latest`, then deletes all but the
  // newest keep_last complete checkpoints (0 keeps all). Returns the file written.
  std::string save(const Checkpoint& c, int keep_last = 0) const;

  // step-<N>.h5 files present, ascending (not validated).
  std::vector<int64_t> steps() const;
  std::optional<int64_t> marker() const;  // the step in `latest`, if readable

  struct Found {
    Checkpoint checkpoint;
    std::string path;
    std::vector<std::string> skipped;  // "<path>: <why>" for each newer file that failed
  };
  // The newest complete checkpoint: the marker's file when it validates and nothing newer
  // exists, else the newest step-<N>.h5 that opens and validates. nullopt when the directory
  // holds no checkpoint at all (a fresh run); Error listing every file and why it failed
  // when there are some but none loads.
  std::optional<Found> load_latest() const;

  // Deletes leftover step-<N>.h5.tmp / latest.tmp of a writer that died (or ran out of
  // space) mid-save; returns the paths removed. save() and the trainer's start call it.
  std::vector<std::string> remove_leftovers() const;
  // train.resume_from=step-<N>: exactly that file, validated (Error naming the file and the
  // checkpoints present otherwise).
  Found load_step(int64_t step) const;
  // After resuming from step-<N>: moves every newer step-<M>.h5 into dir/abandoned/ (kept,
  // never loaded again) and points `latest` at N. Returns the new paths of the moved files.
  std::vector<std::string> rewind_to(int64_t step) const;

 private:
  std::string dir_;
};

}  // namespace lcr::io
