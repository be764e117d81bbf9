#include "core/io/hdf5.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

// HDF5's own metadata checksum (Jenkins lookup3), exported by libhdf5 since 1.8.7.
extern "C" uint32_t H5_checksum_metadata(const void* data, size_t len, uint32_t initval);

namespace lcr::h5 {

void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string detail() {  // e.g. " (HDF5: unable to open file: ... errno = 13)"
  std::string last;
  auto cb = [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
    if (e->desc) *static_cast<std::string*>(out) = e->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, cb, &last);
  H5Eclear2(H5E_DEFAULT);
  return last.empty() ? "" : " (HDF5: " + last + ")";
}

namespace {

// 0: the superblock at offset 0 is intact or of a version without a checksum (v0/v1);
// 1: its checksum does not match; -1: no signature at offset 0 (or unreadable).
int superblock_state(const std::string& path) {
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  if (!fp) return -1;
  unsigned char b[12 + 4 * 8 + 4];
  const size_t n = std::fread(b, 1, sizeof b, fp);
  std::fclose(fp);
  if (n < 12 || std::memcmp(b, sig, 8) != 0) return -1;
  if (b[8] < 2) return 0;
  const size_t o = b[9], len = 12 + 4 * o;  // signature..root object header address
  if ((o != 4 && o != 8) || n < len + 4) return 1;
  uint32_t stored = 0;
  for (int i = 3; i >= 0; --i) stored = (stored << 8) | b[len + i];
  return H5_checksum_metadata(b, len, 0) == stored ? 0 : 1;
}

}  // namespace

void check_file(const std::string& path) {
  quiet();
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::directory)
    throw_error(path, " is a directory, not an HDF5 file");
  require(std::filesystem::exists(st), path, ": no such file");
  require(std::filesystem::is_regular_file(st), path, " is not a regular file");
  if (std::FILE* fp = std::fopen(path.c_str(), "rb"))
    std::fclose(fp);
  else
    throw_error(path, ": cannot read it: ", std::strerror(errno));
  for (int attempt = 0;; ++attempt) {
    const int s = superblock_state(path);
    if (s == 0) return;  // the signature at 0: H5Fis_hdf5 would say yes
    if (s < 0) break;
    if (attempt == 10)
      throw_error(path, " is damaged: its HDF5 superblock fails its checksum (the file was ",
                  "changed or truncated outside HDF5; restore it from a copy)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a writer's update
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw_error(path, " is not an HDF5 file");
  }
}

namespace {

template <class T>
hid_t mem_type() {
  if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  if constexpr (std::is_same_v<T, int32_t>) return H5T_NATIVE_INT32;
  if constexpr (std::is_same_v<T, int64_t>) return H5T_NATIVE_INT64;
}
// On disk: little-endian IEEE / two's complement, whatever the host, so files move.
template <class T>
hid_t file_type() {
  if constexpr (std::is_same_v<T, float>) return H5T_IEEE_F32LE;
  if constexpr (std::is_same_v<T, double>) return H5T_IEEE_F64LE;
  if constexpr (std::is_same_v<T, int32_t>) return H5T_STD_I32LE;
  if constexpr (std::is_same_v<T, int64_t>) return H5T_STD_I64LE;
}

const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER:
      return "integer";
    case H5T_FLOAT:
      return "float";
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    default:
      return "non-numeric";
  }
}

Handle dataspace(const std::vector<int64_t>& shape) {
  if (shape.empty()) return Handle(H5Screate(H5S_SCALAR), H5Sclose);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return Handle(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
}

Handle bool_type() {
  Handle t(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
  int8_t v = 0;
  H5Tenum_insert(t.id(), "FALSE", &v);
  v = 1;
  H5Tenum_insert(t.id(), "TRUE", &v);
  return t;
}

Handle string_type(size_t size, H5T_cset_t cset = H5T_CSET_UTF8) {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.id(), size);
  H5Tset_cset(t.id(), cset);
  return t;
}

}  // namespace

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

herr_t Handle::reset() {
  herr_t s = 0;
  if (id_ >= 0 && close_) s = close_(id_);
  id_ = H5I_INVALID_HID;
  return s;
}

std::string shape_pattern(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + (s[i] < 0 ? std::string("*") : std::to_string(s[i]));
  return out + "]";
}

void Location::fail(const std::string& what) const { throw_error(file_, ": ", what); }

std::string Location::child_path(const std::string& name) const {
  return path_ == "/" ? "/" + name : path_ + "/" + name;
}

bool Location::has(const std::string& name) const {
  // H5Lexists needs every intermediate group to exist, so walk the path.
  std::string prefix;
  for (size_t b = 0;;) {
    const auto slash = name.find('/', b);
    prefix = name.substr(0, slash);
    if (H5Lexists(id(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    b = slash + 1;
  }
}

static H5I_type_t object_type(hid_t loc, const std::string& name) {
  Handle o(H5Oopen(loc, name.c_str(), H5P_DEFAULT), H5Oclose);
  return o.id() < 0 ? H5I_BADID : H5Iget_type(o.id());
}

bool Location::has_group(const std::string& name) const {
  return has(name) && object_type(id(), name) == H5I_GROUP;
}

bool Location::has_dataset(const std::string& name) const {
  return has(name) && object_type(id(), name) == H5I_DATASET;
}

std::vector<std::string> Location::children() const {
  H5G_info_t info;
  if (H5Gget_info(id(), &info) < 0) fail("cannot list " + path_ + detail());
  std::vector<std::string> out;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n =
        H5Lget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    std::string s(size_t(n > 0 ? n : 0), '\0');
    H5Lget_name_by_idx(id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size() + 1,
                       H5P_DEFAULT);
    out.push_back(s);
  }
  return out;
}

Location Location::group(const std::string& name) const {
  if (!has_group(name)) fail("no group " + child_path(name));
  auto h = std::make_shared<Handle>(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), H5Gclose);
  if (h->id() < 0) fail("cannot open group " + child_path(name) + detail());
  return Location(file_, child_path(name), h);
}

Location Location::create_group(const std::string& name) const {
  auto h = std::make_shared<Handle>(
      H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (h->id() < 0) fail("cannot create group " + child_path(name) + detail());
  return Location(file_, child_path(name), h);
}

std::vector<int64_t> Location::shape(const std::string& name) const {
  if (!has_dataset(name)) {
    if (has_group(name)) fail(child_path(name) + " is a group, not a dataset");
    std::string have;
    for (const auto& c : children()) have += (have.empty() ? "" : ", ") + c;
    fail("missing dataset " + child_path(name) + " (" + path_ +
         " holds: " + (have.empty() ? "nothing" : have) + ")");
  }
  Handle d(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle s(H5Dget_space(d.id()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(s.id());
  if (rank < 0) fail("cannot read the shape of dataset " + child_path(name) + detail());
  std::vector<hsize_t> dims(size_t(rank), 0);
  H5Sget_simple_extent_dims(s.id(), dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

template <class T>
void Location::write(const std::string& name, const T* data,
                     const std::vector<int64_t>& shape) const {
  if (has(name) && H5Ldelete(id(), name.c_str(), H5P_DEFAULT) < 0)
    fail("cannot replace " + child_path(name) + detail());
  Handle space = dataspace(shape);
  Handle d(H5Dcreate2(id(), name.c_str(), file_type<T>(), space.id(), H5P_DEFAULT, H5P_DEFAULT,
                      H5P_DEFAULT),
           H5Dclose);
  if (d.id() < 0) fail("cannot create dataset " + child_path(name) + detail());
  if (H5Dwrite(d.id(), mem_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    fail("cannot write dataset " + child_path(name) + detail());
}

std::vector<int64_t> Location::shape(const std::string& name,
                                     const std::vector<int64_t>& expect) const {
  const std::vector<int64_t> s = shape(name);
  bool ok = expect.empty() || expect.size() == s.size();
  for (size_t i = 0; ok && i < expect.size(); ++i) ok = expect[i] < 0 || expect[i] == s[i];
  if (!ok)
    fail("dataset " + child_path(name) + " has shape " + shape_string(s) + ", expected " +
         shape_pattern(expect));
  return s;
}

template <class T>
std::vector<T> Location::read(const std::string& name, const std::vector<int64_t>& expect,
                              std::vector<int64_t>* shape_out) const {
  const std::vector<int64_t> s = shape(name, expect);
  Handle d(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle t(H5Dget_type(d.id()), H5Tclose);
  const H5T_class_t c = H5Tget_class(t.id());
  if (c != H5T_FLOAT && c != H5T_INTEGER)
    fail("dataset " + child_path(name) + " holds " + class_name(c) + " values; expected numbers");
  size_t n = 1;
  bool overflow = false;
  for (auto e : s) overflow |= __builtin_mul_overflow(n, size_t(e), &n);
  const auto too_big = [&] {
    fail("dataset " + child_path(name) + " declares shape " + shape_string(s) +
         (overflow ? " (more values than fit in memory)"
                   : " (" + std::to_string(n) + " values, " + std::to_string(n * sizeof(T)) +
                         " bytes): cannot allocate that much memory"));
  };
  if (overflow || n > std::vector<T>().max_size()) too_big();
  std::vector<T> out;
  try {
    out.resize(n);
  } catch (const std::bad_alloc&) {
    too_big();
  }
  if (n > 0 && H5Dread(d.id(), mem_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    fail("cannot read dataset " + child_path(name) + detail());
  if (shape_out) *shape_out = s;
  return out;
}

bool Location::has_attr(const std::string& name) const { return H5Aexists(id(), name.c_str()) > 0; }

std::vector<std::string> Location::attr_names() const {
  std::vector<std::string> out;
  auto cb = [](hid_t, const char* n, const H5A_info_t*, void* o) -> herr_t {
    static_cast<std::vector<std::string>*>(o)->push_back(n);
    return 0;
  };
  hsize_t idx = 0;
  if (H5Aiterate2(id(), H5_INDEX_NAME, H5_ITER_INC, &idx, cb, &out) < 0)
    fail("cannot list the attributes of " + path_ + detail());
  return out;
}

Attr Location::attr(const std::string& name) const {
  const std::string what = "attribute '" + name + "' of " + path_;
  if (!has_attr(name)) fail("missing " + what);
  Handle a(H5Aopen(id(), name.c_str(), H5P_DEFAULT), H5Aclose);
  Handle space(H5Aget_space(a.id()), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.id()) != 1) fail(what + " is an array; expected a scalar");
  Handle t(H5Aget_type(a.id()), H5Tclose);
  auto read = [&](hid_t mt, void* buf) {
    if (H5Aread(a.id(), mt, buf) < 0) fail("cannot read " + what + detail());
  };
  switch (H5Tget_class(t.id())) {
    case H5T_INTEGER: {
      if (H5Tget_sign(t.id()) == H5T_SGN_NONE && H5Tget_size(t.id()) >= 8) {
        uint64_t u = 0;  // HDF5 would saturate a value above INT64_MAX without a word
        read(H5T_NATIVE_UINT64, &u);
        if (u > uint64_t(INT64_MAX))
          fail(what + " is " + std::to_string(u) + ", beyond the int64 range");
        return int64_t(u);
      }
      int64_t v = 0;
      read(H5T_NATIVE_INT64, &v);
      return v;
    }
    case H5T_FLOAT: {
      double v = 0;
      read(H5T_NATIVE_DOUBLE, &v);
      return v;
    }
    case H5T_ENUM: {  // h5py's bool: an int8 enum {FALSE = 0, TRUE = 1}
      if (H5Tget_size(t.id()) != 1 || H5Tget_nmembers(t.id()) != 2)
        fail(what + " is an enum that is not a boolean");
      Handle native(H5Tget_native_type(t.id(), H5T_DIR_DEFAULT), H5Tclose);
      int8_t v = 0;
      read(native.id(), &v);
      return v != 0;
    }
    case H5T_STRING: {  // read with the file's character set: HDF5 converts no other
      const H5T_cset_t cset = H5Tget_cset(t.id());
      if (H5Tis_variable_str(t.id()) > 0) {
        Handle mt = string_type(H5T_VARIABLE, cset);
        char* p = nullptr;
        read(mt.id(), &p);
        std::string s = p ? p : "";
        H5free_memory(p);
        return s;
      }
      const size_t n = H5Tget_size(t.id());
      Handle mt = string_type(n, cset);
      std::string s(n, '\0');
      read(mt.id(), s.data());
      s.erase(s.find_last_not_of(std::string(" \0", 2)) + 1);  // nul- or space-padded
      return s;
    }
    default:
      fail(what + " holds " + class_name(H5Tget_class(t.id())) +
           " values; expected a number, bool or string");
  }
}

void Location::set_attr(const std::string& name, const Attr& value) const {
  if (has_attr(name) && H5Adelete(id(), name.c_str()) < 0)
    fail("cannot replace attribute '" + name + "' of " + path_ + detail());
  Handle type;
  hid_t mt = H5I_INVALID_HID;
  const void* buf = nullptr;
  int8_t b = 0;
  const char* str = nullptr;
  if (auto* v = std::get_if<bool>(&value)) {
    type = bool_type();
    mt = type.id();
    b = *v ? 1 : 0;
    buf = &b;
  } else if (auto* i = std::get_if<int64_t>(&value)) {
    type = Handle(H5Tcopy(H5T_STD_I64LE), H5Tclose);
    mt = H5T_NATIVE_INT64;
    buf = i;
  } else if (auto* d = std::get_if<double>(&value)) {
    type = Handle(H5Tcopy(H5T_IEEE_F64LE), H5Tclose);
    mt = H5T_NATIVE_DOUBLE;
    buf = d;
  } else {
    type = string_type(H5T_VARIABLE);
    mt = type.id();
    str = std::get<std::string>(value).c_str();
    buf = &str;
  }
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(id(), name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT),
           H5Aclose);
  if (a.id() < 0 || H5Awrite(a.id(), mt, buf) < 0)
    fail("cannot write attribute '" + name + "' of " + path_ + detail());
}

File File::open(const std::string& path, bool writable) {
  check_file(path);
  auto h = std::make_shared<Handle>(
      H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (h->id() < 0) throw_error(path, ": cannot open the HDF5 file", detail());
  return File(path, "/", h);
}

File File::create(const std::string& path) {
  quiet();
  // STRONG close: closing the file closes every object still open in it, so close()
  // really releases the file (the caller renames it right after).
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fclose_degree(fapl.id(), H5F_CLOSE_STRONG);
  auto h = std::make_shared<Handle>(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id()),
                                    H5Fclose);
  if (h->id() < 0) throw_error(path, ": cannot create the HDF5 file", detail());
  return File(path, "/", h);
}

void File::close() {
  Handle& h = handle();
  if (h.id() >= 0 && H5Fflush(h.id(), H5F_SCOPE_GLOBAL) < 0)
    throw_error(file(), ": cannot flush the file", detail());
  if (h.reset() < 0) throw_error(file(), ": cannot close the file", detail());
}

#define LCR_INSTANTIATE(T)                                                                    \
  template void Location::write<T>(const std::string&, const T*, const std::vector<int64_t>&) \
      const;                                                                                  \
  template std::vector<T> Location::read<T>(const std::string&, const std::vector<int64_t>&,  \
                                            std::vector<int64_t>*) const;
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
LCR_INSTANTIATE(int32_t)
LCR_INSTANTIATE(int64_t)
#undef LCR_INSTANTIATE

}  // namespace lcr::h5
