#include "core/io/h5_util.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace lcr::io::h5u {

std::string library_version() {
  unsigned a = 0, b = 0, c = 0;
  H5get_libversion(&a, &b, &c);
  return std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(c);
}

void check_hdf5_file(const std::string& path) {
  h5::check_file(path);  // one home for the messages (and the damaged-superblock check)
}

Handle fapl_v110() {
  Handle p(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_libver_bounds(p.id(), H5F_LIBVER_V110, H5F_LIBVER_V110);
  return p;
}

Handle fapl_swmr_read() {
  Handle p(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_metadata_read_attempts(p.id(), kSwmrReadAttempts);
  return p;
}

hid_t file_type(DType t) {
  switch (t) {
    case DType::F32:
      return H5T_IEEE_F32LE;
    case DType::I64:
      return H5T_STD_I64LE;
    default:
      return H5T_IEEE_F64LE;
  }
}

Handle ensure_group(hid_t loc, const std::string& path, const std::string& file) {
  if (H5Lexists(loc, path.c_str(), H5P_DEFAULT) > 0)
    return Handle(H5Gopen2(loc, path.c_str(), H5P_DEFAULT), H5Gclose);
  H5Eclear2(H5E_DEFAULT);
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.id(), 1);
  Handle g(H5Gcreate2(loc, path.c_str(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (g.id() < 0) throw_error(file, ": cannot create group /", path, detail());
  return g;
}

std::vector<std::string> child_names(hid_t group) {
  std::vector<std::string> out;
  auto cb = [](hid_t, const char* name, const H5L_info_t*, void* o) -> herr_t {
    static_cast<std::vector<std::string>*>(o)->push_back(name);
    return 0;
  };
  H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &out);
  return out;
}

static bool is_dataset(hid_t loc, const std::string& name) {
  Handle o(H5Oopen(loc, name.c_str(), H5P_DEFAULT), H5Oclose);
  H5Eclear2(H5E_DEFAULT);
  return o.id() >= 0 && H5Iget_type(o.id()) == H5I_DATASET;
}

std::vector<std::string> dataset_names(hid_t group) {
  std::vector<std::string> out;
  for (const auto& n : child_names(group))
    if (is_dataset(group, n)) out.push_back(n);
  return out;
}

std::vector<std::string> find_tables(hid_t file_id, const std::string& file) {
  std::vector<std::string> links;
  auto cb = [](hid_t, const char* name, const H5L_info_t*, void* o) -> herr_t {
    static_cast<std::vector<std::string>*>(o)->push_back(name);
    return 0;
  };
  if (H5Lvisit(file_id, H5_INDEX_NAME, H5_ITER_INC, cb, &links) < 0)
    throw_error(file, ": cannot list the file's objects", detail());
  std::vector<std::string> out;
  for (const auto& l : links) {
    const auto slash = l.rfind('/');
    if (slash != std::string::npos && l.substr(slash + 1) == "step" && is_dataset(file_id, l))
      out.push_back(l.substr(0, slash));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void write_attr(hid_t obj, const std::string& name, const AttrValue& v, const std::string& file) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Handle type;
  hid_t mem = H5I_INVALID_HID;
  const void* buf = nullptr;
  std::string s;
  if (auto* i = std::get_if<int64_t>(&v)) {
    type = Handle(H5Tcopy(H5T_STD_I64LE), H5Tclose);
    mem = H5T_NATIVE_INT64;
    buf = i;
  } else if (auto* d = std::get_if<double>(&v)) {
    type = Handle(H5Tcopy(H5T_IEEE_F64LE), H5Tclose);
    mem = H5T_NATIVE_DOUBLE;
    buf = d;
  } else {
    s = std::get<std::string>(v);  // C style: the terminating null is part of the size
    type = Handle(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.id(), s.size() + 1);
    H5Tset_strpad(type.id(), H5T_STR_NULLTERM);
    H5Tset_cset(type.id(), H5T_CSET_UTF8);
    mem = type.id();
    buf = s.data();
  }
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(obj, name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT),
           H5Aclose);
  if (a.id() < 0 || H5Awrite(a.id(), mem, buf) < 0)
    throw_error(file, ": cannot write attribute '", name, "'", detail());
}

int64_t read_attr_int(hid_t obj, const std::string& name, int64_t fallback) {
  if (H5Aexists(obj, name.c_str()) <= 0) return fallback;
  Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  int64_t v = fallback;
  if (H5Aread(a.id(), H5T_NATIVE_INT64, &v) < 0) return fallback;
  return v;
}

std::map<std::string, std::string> attrs_as_text(hid_t obj, const std::string& file) {
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* n, const H5A_info_t*, void* o) -> herr_t {
    static_cast<std::vector<std::string>*>(o)->push_back(n);
    return 0;
  };
  hsize_t idx = 0;
  if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, cb, &names) < 0)
    throw_error(file, ": cannot list attributes", detail());
  std::map<std::string, std::string> out;
  for (const auto& n : names) {
    Handle a(H5Aopen(obj, n.c_str(), H5P_DEFAULT), H5Aclose);
    Handle t(H5Aget_type(a.id()), H5Tclose);
    std::string text;
    switch (H5Tget_class(t.id())) {
      case H5T_INTEGER: {
        int64_t v = 0;
        H5Aread(a.id(), H5T_NATIVE_INT64, &v);
        text = std::to_string(v);
        break;
      }
      case H5T_FLOAT: {
        double v = 0;
        H5Aread(a.id(), H5T_NATIVE_DOUBLE, &v);
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        text = buf;
        break;
      }
      case H5T_STRING: {
        if (H5Tis_variable_str(t.id()) > 0) {
          char* p = nullptr;
          H5Aread(a.id(), t.id(), &p);
          text = p ? p : "";
          H5free_memory(p);
        } else {
          text.assign(H5Tget_size(t.id()), '\0');
          H5Aread(a.id(), t.id(), text.data());
          text.erase(text.find_last_not_of(std::string(" \0", 2)) + 1);
        }
        break;
      }
      default:
        text = "(unsupported attribute type)";
    }
    out[n] = text;
  }
  return out;
}

Handle create_column(hid_t group, const std::string& name, DType t,
                     const std::vector<int64_t>& shape, const std::string& doc,
                     const std::string& file) {
  std::vector<hsize_t> dims{0}, maxd{H5S_UNLIMITED}, chunk{1};
  hsize_t row_bytes = t == DType::F32 ? 4 : 8;
  for (auto e : shape) {
    dims.push_back(hsize_t(e));
    maxd.push_back(hsize_t(e));
    chunk.push_back(hsize_t(e));
    row_bytes *= hsize_t(e);
  }
  // About 64 KiB per chunk, at most 1024 rows: small appends touch one chunk.
  chunk[0] = std::clamp<hsize_t>(65536 / row_bytes, 1, 1024);
  Handle space(H5Screate_simple(int(dims.size()), dims.data(), maxd.data()), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(dcpl.id(), int(chunk.size()), chunk.data());
  Handle d(H5Dcreate2(group, name.c_str(), file_type(t), space.id(), H5P_DEFAULT, dcpl.id(),
                      H5P_DEFAULT),
           H5Dclose);
  if (d.id() < 0) throw_error(file, ": cannot create dataset ", name, detail());
  write_attr(d.id(), "doc", doc, file);
  return d;
}

Handle open_column(hid_t loc, const std::string& path, DType t, const std::vector<int64_t>& shape,
                   const std::string& file) {
  const std::string hint =
      "; the run was started with a different config (model/scheme): start a new run instead";
  if (!is_dataset(loc, path)) throw_error(file, ": missing dataset /", path, hint);
  Handle d(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), H5Dclose);
  Handle space(H5Dget_space(d.id()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.id());
  std::vector<hsize_t> dims(size_t(std::max(rank, 0))), maxd(dims.size());
  H5Sget_simple_extent_dims(space.id(), dims.data(), maxd.data());
  const std::vector<int64_t> row(dims.size() > 1 ? dims.begin() + 1 : dims.end(), dims.end());
  if (rank < 1 || maxd[0] != H5S_UNLIMITED || row != shape)
    throw_error(file, ": dataset /", path, " has rows of shape ", h5::shape_pattern(row),
                ", the config gives ", h5::shape_pattern(shape), hint);
  Handle ft(H5Dget_type(d.id()), H5Tclose);
  if (H5Tequal(ft.id(), file_type(t)) <= 0)
    throw_error(file, ": dataset /", path, " has another element type than the layout's", hint);
  return d;
}

void write_axis(hid_t loc, const std::string& path, const std::vector<int64_t>& values,
                const std::string& file) {
  const auto slash = path.rfind('/');
  if (slash != std::string::npos) ensure_group(loc, path.substr(0, slash), file);
  const hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle d(H5Dcreate2(loc, path.c_str(), H5T_STD_I64LE, space.id(), H5P_DEFAULT, H5P_DEFAULT,
                      H5P_DEFAULT),
           H5Dclose);
  if (d.id() < 0 ||
      H5Dwrite(d.id(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0)
    throw_error(file, ": cannot write dataset /", path, detail());
  write_attr(d.id(), "doc", "axis labels of the columns that refer to it", file);
}

static std::vector<hsize_t> dims_of(hid_t dset) {
  Handle space(H5Dget_space(dset), H5Sclose);
  std::vector<hsize_t> dims(size_t(std::max(H5Sget_simple_extent_ndims(space.id()), 0)));
  H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr);
  return dims;
}

int64_t rows_of(hid_t dset) {
  const auto d = dims_of(dset);
  return d.empty() ? 0 : int64_t(d[0]);
}

void set_rows(hid_t dset, int64_t rows, const std::string& file) {
  auto dims = dims_of(dset);
  dims[0] = hsize_t(rows);
  if (H5Dset_extent(dset, dims.data()) < 0)
    throw_error(file, ": cannot resize a column to ", rows, " rows", detail());
}

void write_row(hid_t dset, int64_t row, hid_t mem_type, const void* data,
               const std::vector<int64_t>& shape, const std::string& file) {
  std::vector<hsize_t> dims{hsize_t(row + 1)}, start{hsize_t(row)}, count{1};
  for (auto e : shape) {
    dims.push_back(hsize_t(e));
    start.push_back(0);
    count.push_back(hsize_t(e));
  }
  if (H5Dset_extent(dset, dims.data()) < 0)
    throw_error(file, ": cannot extend a column to ", row + 1, " rows", detail());
  Handle fspace(H5Dget_space(dset), H5Sclose);
  H5Sselect_hyperslab(fspace.id(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  Handle mspace(H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose);
  if (H5Dwrite(dset, mem_type, mspace.id(), fspace.id(), H5P_DEFAULT, data) < 0)
    throw_error(file, ": cannot write row ", row, detail());
}

void read_rows(hid_t dset, int64_t rows, hid_t mem_type, void* out, std::vector<int64_t>* row_shape,
               const std::string& file) {
  const auto dims = dims_of(dset);
  if (row_shape) row_shape->assign(dims.begin() + 1, dims.end());
  if (!out || rows <= 0) return;
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  count[0] = hsize_t(rows);
  Handle fspace(H5Dget_space(dset), H5Sclose);
  H5Sselect_hyperslab(fspace.id(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  Handle mspace(H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose);
  if (H5Dread(dset, mem_type, mspace.id(), fspace.id(), H5P_DEFAULT, out) < 0)
    throw_error(file, ": cannot read ", rows, " rows", detail());
}

std::vector<int64_t> read_steps(hid_t dset, const std::string& file) {
  std::vector<int64_t> v(size_t(rows_of(dset)));
  read_rows(dset, int64_t(v.size()), H5T_NATIVE_INT64, v.data(), nullptr, file);
  return v;
}

}  // namespace lcr::io::h5u
