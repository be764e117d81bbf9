// Checkpoint files and the checkpoint directory (layout: docs/run-file.md).
#include "core/io/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/io/h5_util.hpp"

namespace lcr::io {

using h5::Handle;
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "lcr-checkpoint";
constexpr int64_t kFormatVersion = 1;

// The `checksum` attribute: FNV-1a (64 bit) over everything a resume reads -- step, seed,
// config, every scalar (name, type, value) and every array (name, type, shape, layout,
// bytes), in name order. Fletcher-32 guards each array's bytes against bit rot; this one
// also catches edited metadata (an `optimizer_steps` changed by hand resumed silently).
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void str(const std::string& s) {
    const uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  template <class T>
  void pod(T v) {
    bytes(&v, sizeof v);
  }
};

std::string layout_text(const std::vector<Slice>& slices);

std::string checksum_of(const Checkpoint& c) {
  Fnv f;
  f.pod(c.step);
  f.pod(c.seed);
  f.str(c.config_toml);
  for (const auto& [k, v] : c.scalars) {
    f.str(k);
    f.pod(uint64_t(v.index()));
    std::visit(
        [&](const auto& x) {
          if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>)
            f.str(x);
          else
            f.pod(x);
        },
        v);
  }
  for (const auto& [name, a] : c.arrays) {
    f.str(name);
    f.pod(uint64_t(a.values.index()));
    f.pod(uint64_t(a.shape.size()));
    for (int64_t e : a.shape) f.pod(e);
    f.str(layout_text(a.slices));
    std::visit([&](const auto& v) { f.bytes(v.data(), v.size() * sizeof(v[0])); }, a.values);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(f.h));
  return buf;
}

template <class T>
struct Types;
template <>
struct Types<float> {
  static hid_t mem() { return H5T_NATIVE_FLOAT; }
  static hid_t file() { return H5T_IEEE_F32LE; }
};
template <>
struct Types<double> {
  static hid_t mem() { return H5T_NATIVE_DOUBLE; }
  static hid_t file() { return H5T_IEEE_F64LE; }
};
template <>
struct Types<int64_t> {
  static hid_t mem() { return H5T_NATIVE_INT64; }
  static hid_t file() { return H5T_STD_I64LE; }
};

// "name\toffset\td0,d1\n" per slice.
std::string layout_text(const std::vector<Slice>& slices) {
  std::ostringstream os;
  for (const auto& s : slices) {
    os << s.name << '\t' << s.offset << '\t';
    for (size_t i = 0; i < s.shape.size(); ++i) os << (i ? "," : "") << s.shape[i];
    os << '\n';
  }
  return os.str();
}

std::vector<Slice> parse_layout(const std::string& text) {
  std::vector<Slice> out;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    std::istringstream ls(line);
    Slice s;
    std::string shape;
    std::getline(ls, s.name, '\t');
    ls >> s.offset;
    ls.ignore(1);
    std::getline(ls, shape);
    std::istringstream ss(shape);
    for (std::string d; std::getline(ss, d, ',');) s.shape.push_back(std::stoll(d));
    out.push_back(s);
  }
  return out;
}

template <class T>
void write_array(hid_t group, const std::string& name, const std::vector<T>& v,
                 const std::vector<int64_t>& shape, const std::string& layout,
                 const std::string& file) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!v.empty()) {  // chunks of at most ~1M elements along the first axis, checksummed
    std::vector<hsize_t> chunk = dims;
    const hsize_t rest = v.size() / dims[0];
    chunk[0] = std::clamp<hsize_t>((hsize_t(1) << 20) / std::max<hsize_t>(rest, 1), 1, dims[0]);
    H5Pset_chunk(dcpl.id(), int(chunk.size()), chunk.data());
    H5Pset_fletcher32(dcpl.id());
  }
  Handle d(H5Dcreate2(group, name.c_str(), Types<T>::file(), space.id(), H5P_DEFAULT, dcpl.id(),
                      H5P_DEFAULT),
           H5Dclose);
  if (d.id() < 0 || (!v.empty() && H5Dwrite(d.id(), Types<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                            v.data()) < 0))
    throw_error(file, ": cannot write array /arrays/", name, h5u::detail());
  if (!layout.empty()) h5u::write_attr(d.id(), "layout", layout, file);
}

template <class T>
std::vector<T> read_array(hid_t d, size_t n, const std::string& file, const std::string& name) {
  std::vector<T> v(n);
  if (n > 0 && H5Dread(d, Types<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
    throw_error(file, ": cannot read array /arrays/", name, h5u::detail(),
                " (corrupt or truncated checkpoint)");
  return v;
}

void fsync_path(const std::string& p, bool dir) {
  const int fd = ::open(p.c_str(), dir ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  require(fd >= 0, p, ": cannot open to sync it to disk");
  const int rc = ::fsync(fd);
  ::close(fd);
  require(rc == 0 || dir, p, ": fsync failed (disk full or I/O error?)");
}

// "step-<N>.h5" -> N; -1 for any other name.
int64_t step_of(const std::string& name) {
  const std::string pre = "step-", suf = ".h5";
  if (name.size() <= pre.size() + suf.size() || name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - suf.size(), suf.size(), suf) != 0)
    return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - suf.size());
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

}  // namespace

int64_t CkptArray::size() const {
  return int64_t(std::visit([](const auto& v) { return v.size(); }, values));
}

template <class T>
void Checkpoint::put(const std::string& name, std::vector<T> values, std::vector<int64_t> shape,
                     std::vector<Slice> slices) {
  require(!name.empty() && name.find('/') == std::string::npos, "checkpoint array name '", name,
          "' must be non-empty and contain no '/'");
  if (shape.empty()) shape = {int64_t(values.size())};
  int64_t n = 1;
  for (auto e : shape) n *= e;
  require(n == int64_t(values.size()), "checkpoint array '", name, "': shape ", shape_string(shape),
          " holds ", n, " values, got ", values.size());
  for (const auto& s : slices) {
    int64_t m = 1;
    for (auto e : s.shape) m *= e;
    require(s.offset >= 0 && s.offset + m <= n, "checkpoint array '", name, "': slice ", s.name,
            " [", s.offset, ", ", s.offset + m, ") lies outside the ", n, " values");
  }
  arrays[name] = CkptArray{std::move(values), std::move(shape), std::move(slices)};
}

const CkptArray& Checkpoint::at(const std::string& name) const {
  auto it = arrays.find(name);
  if (it != arrays.end()) return it->second;
  std::string have;
  for (const auto& [k, v] : arrays) have += (have.empty() ? "" : ", ") + k;
  throw_error("the checkpoint (step ", step, ") has no array '", name,
              "' (arrays: ", have.empty() ? "none" : have, ")");
}

template <class T>
const std::vector<T>& Checkpoint::get(const std::string& name) const {
  const auto* v = std::get_if<std::vector<T>>(&at(name).values);
  require(v != nullptr, "checkpoint array '", name, "' is stored as another element type ",
          "(float/double/int64) than requested: was it written with another precision?");
  return *v;
}

#define LCR_INSTANTIATE(T)                                                                   \
  template void Checkpoint::put<T>(const std::string&, std::vector<T>, std::vector<int64_t>, \
                                   std::vector<Slice>);                                      \
  template const std::vector<T>& Checkpoint::get<T>(const std::string&) const;
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
LCR_INSTANTIATE(int64_t)
#undef LCR_INSTANTIATE

void write_checkpoint(const std::string& path, const Checkpoint& c) {
  h5::File f = h5::File::create(path);
  f.set_attr("format", std::string(kFormat));
  f.set_attr("format_version", kFormatVersion);
  f.set_attr("step", c.step);
  f.set_attr("config", c.config_toml);
  {  // the seed is unsigned: its own attribute type
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle a(H5Acreate2(f.id(), "seed", H5T_STD_U64LE, space.id(), H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose);
    if (a.id() < 0 || H5Awrite(a.id(), H5T_NATIVE_UINT64, &c.seed) < 0)
      throw_error(path, ": cannot write the seed", h5u::detail());
  }
  const h5::Location scalars = f.create_group("scalars");
  for (const auto& [k, v] : c.scalars) scalars.set_attr(k, v);
  const h5::Location arrays = f.create_group("arrays");
  for (const auto& [name, a] : c.arrays) {
    const std::string layout = layout_text(a.slices);
    std::visit([&](const auto& v) { write_array(arrays.id(), name, v, a.shape, layout, path); },
               a.values);
  }
  f.set_attr("checksum", checksum_of(c));
  f.close();
}

Checkpoint read_checkpoint(const std::string& path, int64_t expect_step) {
  const h5::File f = h5::File::open(path);  // Errors: missing, not HDF5, truncated
  const auto str = [&](const std::string& n) {
    const h5::Attr a = f.attr(n);
    const auto* s = std::get_if<std::string>(&a);
    if (!s) throw_error(path, ": attribute '", n, "' is not a string");
    return *s;
  };
  const auto num = [&](const std::string& n) {
    const h5::Attr a = f.attr(n);
    const auto* i = std::get_if<int64_t>(&a);
    if (!i) throw_error(path, ": attribute '", n, "' is not an integer");
    return *i;
  };
  if (!f.has_attr("format") || str("format") != kFormat)
    throw_error(path, " is not an lcr checkpoint (no format=\"", kFormat, "\" attribute)");
  require(num("format_version") == kFormatVersion, path, ": checkpoint format version ",
          num("format_version"), "; this build reads version ", kFormatVersion);
  Checkpoint c;
  c.step = num("step");
  require(expect_step < 0 || c.step == expect_step, path, ": holds step ", c.step,
          " but its name says ", expect_step, " (renamed by hand?)");
  c.config_toml = str("config");
  {
    Handle a(H5Aopen(f.id(), "seed", H5P_DEFAULT), H5Aclose);
    if (a.id() < 0 || H5Aread(a.id(), H5T_NATIVE_UINT64, &c.seed) < 0)
      throw_error(path, ": cannot read the seed", h5u::detail());
  }
  const h5::Location scalars = f.group("scalars");
  for (const auto& n : scalars.attr_names()) c.scalars[n] = scalars.attr(n);
  const h5::Location arrays = f.group("arrays");
  for (const auto& name : arrays.children()) {
    CkptArray a;
    a.shape = arrays.shape(name);
    size_t n = 1;
    for (auto e : a.shape) n *= size_t(e);
    Handle d(H5Dopen2(arrays.id(), name.c_str(), H5P_DEFAULT), H5Dclose);
    Handle t(H5Dget_type(d.id()), H5Tclose);
    if (H5Tequal(t.id(), H5T_IEEE_F32LE) > 0)
      a.values = read_array<float>(d.id(), n, path, name);
    else if (H5Tequal(t.id(), H5T_IEEE_F64LE) > 0)
      a.values = read_array<double>(d.id(), n, path, name);
    else if (H5Tequal(t.id(), H5T_STD_I64LE) > 0)
      a.values = read_array<int64_t>(d.id(), n, path, name);
    else
      throw_error(path, ": array /arrays/", name, " is not float32, float64 or int64");
    const std::string lpath = "layout";
    if (H5Aexists(d.id(), lpath.c_str()) > 0) {
      const auto text = h5u::attrs_as_text(d.id(), path);
      a.slices = parse_layout(text.at(lpath));
    }
    c.arrays.emplace(name, std::move(a));
  }
  // Checkpoints written before the checksum existed have none; every later one is checked.
  if (f.has_attr("checksum") && str("checksum") != checksum_of(c))
    throw ChecksumMismatch(
        path + ": checksum mismatch (stored " + str("checksum") + ", contents give " +
        checksum_of(c) +
        "): the checkpoint's parameters, optimizer state or metadata were changed after it was "
        "written. Do not resume from it: resume from an earlier checkpoint by name "
        "(train.resume_from=step-<N>, docs/run-file.md), or delete this file");
  return c;
}

CheckpointStore::CheckpointStore(std::string dir) : dir_(std::move(dir)) {}

std::string CheckpointStore::file_for(int64_t step) const {
  return (fs::path(dir_) / ("step-" + std::to_string(step) + ".h5")).string();
}

std::vector<int64_t> CheckpointStore::steps() const {
  std::vector<int64_t> out;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const int64_t s = step_of(e.path().filename().string());
    if (s >= 0 && e.is_regular_file()) out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<int64_t> CheckpointStore::marker() const {
  std::ifstream in(fs::path(dir_) / "latest");
  int64_t s = -1;
  if (in >> s && s >= 0) return s;
  return std::nullopt;
}

std::string CheckpointStore::save(const Checkpoint& c, int keep_last) const {
  require(c.step >= 0, "checkpoint step ", c.step, " is negative");
  fs::create_directories(dir_);
  remove_leftovers();
  const std::string final_path = file_for(c.step), tmp = final_path + ".tmp";
  write_checkpoint(tmp, c);
  fsync_path(tmp, false);
  fs::rename(tmp, final_path);
  fsync_path(dir_, true);

  const fs::path mark = fs::path(dir_) / "latest", mark_tmp = fs::path(dir_) / "latest.tmp";
  {
    std::ofstream out(mark_tmp, std::ios::trunc);
    out << c.step << '\n';
    require(bool(out.flush()), mark_tmp.string(), ": cannot write the checkpoint marker");
  }
  fsync_path(mark_tmp.string(), false);
  fs::rename(mark_tmp, mark);
  fsync_path(dir_, true);

  if (keep_last > 0) {
    const std::vector<int64_t> all = steps();
    for (size_t i = 0; i + size_t(keep_last) < all.size(); ++i)
      if (all[i] != c.step) fs::remove(file_for(all[i]));
  }
  return final_path;
}

std::vector<std::string> CheckpointStore::remove_leftovers() const {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return removed;
  for (const auto& e : fs::directory_iterator(dir_)) {  // leftovers of a killed writer
    const std::string n = e.path().filename().string();
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0 &&
        (n.rfind("step-", 0) == 0 || n == "latest.tmp")) {
      fs::remove(e.path());
      removed.push_back(e.path().string());
    }
  }
  return removed;
}

CheckpointStore::Found CheckpointStore::load_step(int64_t step) const {
  const std::string p = file_for(step);
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    std::string have;
    for (int64_t s : steps()) have += (have.empty() ? "" : ", ") + ("step-" + std::to_string(s));
    throw_error("cannot resume from step-", step, ": no file ", p,
                " (checkpoints present: ", have.empty() ? "none" : have, ")");
  }
  return Found{read_checkpoint(p, step), p, {}};
}

std::vector<std::string> CheckpointStore::rewind_to(int64_t step) const {
  std::vector<std::string> moved;
  const fs::path aside = fs::path(dir_) / "abandoned";
  for (int64_t s : steps()) {
    if (s <= step) continue;
    fs::create_directories(aside);
    const fs::path to = aside / fs::path(file_for(s)).filename();
    fs::rename(file_for(s), to);
    moved.push_back(to.string());
  }
  const fs::path mark = fs::path(dir_) / "latest", mark_tmp = fs::path(dir_) / "latest.tmp";
  {
    std::ofstream out(mark_tmp, std::ios::trunc);
    out << step << '\n';
    require(bool(out.flush()), mark_tmp.string(), ": cannot write the checkpoint marker");
  }
  fsync_path(mark_tmp.string(), false);
  fs::rename(mark_tmp, mark);
  fsync_path(dir_, true);
  return moved;
}

std::optional<CheckpointStore::Found> CheckpointStore::load_latest() const {
  std::vector<int64_t> all = steps();
  std::vector<std::string> skipped;
  const std::optional<int64_t> m = marker();
  if (m && std::find(all.begin(), all.end(), *m) == all.end())
    skipped.push_back((fs::path(dir_) / "latest").string() + ": names step " + std::to_string(*m) +
                      ", but " + file_for(*m) + " is missing");
  if (all.empty()) {
    if (skipped.empty()) return std::nullopt;  // a fresh run
    throw_error("no complete checkpoint in ", dir_, ": ", skipped.front());
  }
  // Newest first; the marker's step is the newest unless a save died between its rename
  // and the marker update, and then the newer (complete, renamed) file is the right one.
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string p = file_for(*it);
    try {
      return Found{read_checkpoint(p, *it), p, skipped};
    } catch (const ChecksumMismatch&) {
      throw;  // an edited file is not "incomplete": never fall back past it silently
    } catch (const Error& e) {
      skipped.push_back(e.what());
    }
  }
  std::string why;
  for (const auto& s : skipped) why += "\n  " + s;
  throw_error("no complete checkpoint in ", dir_, "; every candidate failed:", why,
              "\n(delete the broken files to start afresh, or restore one from a backup)");
}

}  // namespace lcr::io
