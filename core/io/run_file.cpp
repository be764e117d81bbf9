// The run file: layout builders, the SWMR writer, the reader and crash recovery.
// Layout and the commit protocol: docs/run-file.md.
#include "core/io/run_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <set>

#include "core/io/h5_util.hpp"

namespace lcr::io {

using h5::Handle;
namespace fs = std::filesystem;

namespace {

void validate(const RunLayout& L) {
  std::set<std::string> paths;
  for (const auto& t : L.tables) {
    require(!t.path.empty() && t.path[0] != '/' && t.path.back() != '/', "table path '", t.path,
            "' must be a relative group path like \"priors/layer_0\"");
    require(paths.insert(t.path).second, "table '", t.path, "' is listed twice in the layout");
    std::set<std::string> names;
    for (const auto& c : t.columns) {
      require(c.name != "step", "table ", t.path, ": `step` is implicit; do not list it");
      require(names.insert(c.name).second, "table ", t.path, ": column '", c.name, "' twice");
      for (auto d : c.shape)
        require(d > 0, "table ", t.path, ", column ", c.name, ": every extent must be > 0");
    }
  }
}

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto e : s) n *= e;
  return n;
}

}  // namespace

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---- Writer --------------------------------------------------------------------------

struct TableState {
  Table spec;
  Handle step;
  std::vector<Handle> cols;  // in spec.columns order
  int64_t rows = 0;
  int64_t last_step = 0;
};

namespace {

void fsync_fd_of(const std::string& p, int flags) {
  const int fd = ::open(p.c_str(), flags);
  require(fd >= 0, "cannot open ", p, " to sync it");
  const int rc = ::fsync(fd);
  ::close(fd);
  require(rc == 0, "cannot sync ", p, " to disk");
}
void fsync_file(const std::string& p) { fsync_fd_of(p, O_RDONLY); }
void fsync_dir(const std::string& p) { fsync_fd_of(p.empty() ? "." : p, O_RDONLY | O_DIRECTORY); }

}  // namespace

struct RunFile::Impl {
  std::string path;
  Handle file;
  std::map<std::string, TableState> tables;

  [[noreturn]] void fail(const std::string& what) const { throw_error(path, ": ", what); }
  // The table's state, after checking the row (Error naming the problem; nothing written).
  TableState& check(const std::string& table, int64_t step, const Row& row);
  void flush() {
    if (H5Fflush(file.id(), H5F_SCOPE_LOCAL) < 0) fail("cannot flush" + h5u::detail());
  }
  void start_swmr() {
    flush();
    if (H5Fstart_swmr_write(file.id()) < 0) fail("cannot start SWMR writing" + h5u::detail());
  }
};

RunFile::RunFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunFile::RunFile(RunFile&&) noexcept = default;
RunFile& RunFile::operator=(RunFile&&) noexcept = default;
RunFile::~RunFile() = default;
const std::string& RunFile::path() const { return impl_->path; }

RunFile RunFile::create(const std::string& path, const RunLayout& layout, const Provenance& prov,
                        bool overwrite) {
  validate(layout);
  std::error_code ec;
  require(overwrite || !fs::exists(path, ec), path,
          " already exists: resume the run (it continues this file) or choose a new run name");
  h5u::quiet();
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  Handle fapl = h5u::fapl_v110();
  impl->file = Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id()), H5Fclose);
  if (impl->file.id() < 0) impl->fail("cannot create the run file" + h5u::detail());
  const hid_t f = impl->file.id();

  // /config: the TOML and provenance (fixed-length strings: no variable-length data in a
  // SWMR file).
  Handle cfg = h5u::ensure_group(f, "config", path);
  std::map<std::string, AttrValue> a = {
      {"config", prov.config_toml},
      {"lcr_version", prov.lcr_version},
      {"git_revision", prov.git_revision},
      {"command_line", prov.command_line},
      {"devices", prov.devices},
      {"kokkos_version", prov.kokkos_version},
      {"mpi_version", prov.mpi_version},
      {"hdf5_version", h5u::library_version()},
      {"world_size", prov.world_size},
      {"dp", prov.dp},
      {"cp", prov.cp},
      {"layout_version", int64_t(1)},
      {"resume_count", int64_t(0)},
      {"start_time", prov.start_time.empty() ? now_utc() : prov.start_time}};
  for (const auto& [k, v] : prov.extra) a.emplace(k, v);
  for (const auto& [k, v] : a) h5u::write_attr(cfg.id(), k, v, path);

  for (const auto& [g, attrs] : layout.attrs) {
    Handle gh = h5u::ensure_group(f, g, path);
    for (const auto& [k, v] : attrs) h5u::write_attr(gh.id(), k, v, path);
  }
  for (const auto& [name, values] : layout.axes) h5u::write_axis(f, name, values, path);
  for (const auto& t : layout.tables) {
    Handle g = h5u::ensure_group(f, t.path, path);
    h5u::write_attr(g.id(), "doc", t.doc, path);
    TableState st;
    st.spec = t;
    st.step = h5u::create_column(g.id(), "step", DType::I64, {},
                                 "commit column: the training "
                                 "step of each row; read exactly len(step) rows",
                                 path);
    for (const auto& c : t.columns)
      st.cols.push_back(h5u::create_column(g.id(), c.name, c.type, c.shape, c.doc, path));
    impl->tables.emplace(t.path, std::move(st));
  }
  impl->start_swmr();
  return RunFile(std::move(impl));
}

RunFile RunFile::resume(const std::string& path, const RunLayout& layout, int64_t checkpoint_step,
                        const ResumeRecord* rec) {
  validate(layout);
  std::error_code ec;
  require(fs::exists(path, ec), "cannot resume: no run file at ", path,
          " (start a new run, or point the run directory at the old one)");
  // Work on a copy; path stays untouched until the copy is complete and renamed over it.
  const std::string work = path + ".resume.tmp";
  fs::remove(work, ec);
  try {
    fs::copy_file(path, work, fs::copy_options::overwrite_existing);
    fsync_file(work);
    RunFile rf = resume_in_place(work, path, layout, checkpoint_step, rec);
    fs::rename(work, path);
    fsync_dir(fs::path(path).parent_path().string());
    return rf;
  } catch (const std::exception& e) {
    std::error_code ec2;
    fs::remove(work, ec2);
    std::string why = e.what();
    const auto sp = fs::space(
        fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path(), ec2);
    const auto size = fs::file_size(path, ec2);
    if (!ec2 && sp.available < size + (uintmax_t(1) << 20))
      why = "no space left on the device (" + std::to_string(sp.available) +
            " bytes free; the resume needs about " + std::to_string(size) + "): " + why;
    throw_error("cannot resume ", path, ": ", why, "\n", path,
                " is unchanged; fix the cause (free disk space) and resume again");
  }
}

RunFile RunFile::resume_in_place(const std::string& work, const std::string& path,
                                 const RunLayout& layout, int64_t checkpoint_step,
                                 const ResumeRecord* rec) {
  recover_run_file(work);
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  Handle fapl = h5u::fapl_v110();
  impl->file = Handle(H5Fopen(work.c_str(), H5F_ACC_RDWR, fapl.id()), H5Fclose);
  if (impl->file.id() < 0) impl->fail("cannot open the run file to resume it" + h5u::detail());
  const hid_t f = impl->file.id();

  // The file must hold exactly the tables and columns of `layout`.
  std::vector<std::string> in_file = h5u::find_tables(f, path);
  for (const auto& t : in_file)
    if (std::none_of(layout.tables.begin(), layout.tables.end(),
                     [&](const Table& x) { return x.path == t; }))
      impl->fail("has table " + t +
                 ", which the current config does not produce: the run "
                 "was started with a different model/scheme; start a new run instead");
  for (const auto& t : layout.tables) {  // check everything before changing anything
    TableState st;
    st.spec = t;
    st.step = h5u::open_column(f, t.path + "/step", DType::I64, {}, path);
    for (const auto& c : t.columns)
      st.cols.push_back(h5u::open_column(f, t.path + "/" + c.name, c.type, c.shape, path));
    Handle g(H5Gopen2(f, t.path.c_str(), H5P_DEFAULT), H5Gclose);
    for (const auto& n : h5u::dataset_names(g.id()))
      if (n != "step" && std::none_of(t.columns.begin(), t.columns.end(),
                                      [&](const Column& c) { return c.name == n; }))
        impl->fail("has column /" + t.path + "/" + n +
                   ", which the current config does not "
                   "produce: the run was started with a different config; start a new run");
    impl->tables.emplace(t.path, std::move(st));
  }
  // Keep the committed rows up to the checkpoint (steps never decrease within a table);
  // rows after it are trained again and re-logged.
  for (auto& [name, st] : impl->tables) {
    const std::vector<int64_t> steps = h5u::read_steps(st.step.id(), path);
    int64_t keep = 0;
    while (keep < int64_t(steps.size()) && steps[size_t(keep)] <= checkpoint_step) ++keep;
    h5u::set_rows(st.step.id(), keep, path);
    for (auto& c : st.cols) h5u::set_rows(c.id(), keep, path);
    st.rows = keep;
    st.last_step = keep > 0 ? steps[size_t(keep - 1)] : 0;
  }
  Handle cfg(H5Gopen2(f, "config", H5P_DEFAULT), H5Gclose);
  if (cfg.id() < 0) impl->fail("has no /config group; not an lcr run file");
  const int64_t count = h5u::read_attr_int(cfg.id(), "resume_count", 0);
  h5u::write_attr(cfg.id(), "resume_count", count + 1, path);
  h5u::write_attr(cfg.id(), "last_resume_step", checkpoint_step, path);
  const std::string when = now_utc();
  h5u::write_attr(cfg.id(), "last_resume_time", when, path);
  if (rec) {  // the config in force from now on, and one line per resume
    h5u::write_attr(cfg.id(), "config", rec->config_toml, path);
    std::string log = h5u::attrs_as_text(cfg.id(), path).count("resume_log")
                          ? h5u::attrs_as_text(cfg.id(), path).at("resume_log")
                          : std::string();
    log += "resume " + std::to_string(count + 1) + " at " + when + " from step " +
           std::to_string(checkpoint_step) + " (" + rec->checkpoint +
           "); config changes: " + (rec->changes.empty() ? "none" : rec->changes) +
           "; command: " + rec->command_line + "\n";
    h5u::write_attr(cfg.id(), "resume_log", log, path);
  }
  impl->start_swmr();
  return RunFile(std::move(impl));
}

TableState& RunFile::Impl::check(const std::string& table, int64_t step, const Row& row) {
  auto it = tables.find(table);
  if (it == tables.end()) {
    std::string have;
    for (const auto& [k, v] : tables) have += (have.empty() ? "" : ", ") + k;
    fail("no table '" + table + "' (tables: " + have + ")");
  }
  TableState& st = it->second;
  if (st.rows > 0 && step < st.last_step)
    fail("table " + table + ": step " + std::to_string(step) + " is below the last step " +
         std::to_string(st.last_step) + "; steps must not decrease");
  for (const auto& [name, v] : row) st.spec.at(name);  // Error naming an unknown column
  for (const Column& col : st.spec.columns) {
    auto v = row.find(col.name);
    if (v == row.end()) fail("table " + table + ": row has no value for column " + col.name);
    if (int64_t(v->second.size()) != product(col.shape))
      fail("table " + table + ", column " + col.name + ": got " + std::to_string(v->second.size()) +
           " values for one row of shape " + h5::shape_pattern(col.shape));
  }
  return st;
}

void RunFile::append(const std::string& table, int64_t step, const Row& row) {
  append(step, {{table, row}});
}

void RunFile::append(int64_t step, const std::vector<std::pair<std::string, Row>>& rows) {
  Impl& I = *impl_;
  std::vector<TableState*> ts;
  for (const auto& [table, row] : rows) {
    ts.push_back(&I.check(table, step, row));
    if (std::count(ts.begin(), ts.end(), ts.back()) > 1)
      I.fail("table " + table + " appears twice in one append");
  }
  // Every other column first, flushed; then the commit columns.
  for (size_t t = 0; t < ts.size(); ++t) {
    const Row& row = rows[t].second;
    for (size_t c = 0; c < ts[t]->cols.size(); ++c) {
      const Column& col = ts[t]->spec.columns[c];
      h5u::write_row(ts[t]->cols[c].id(), ts[t]->rows, H5T_NATIVE_DOUBLE, row.at(col.name).data(),
                     col.shape, I.path);
    }
  }
  I.flush();
  for (TableState* st : ts)
    h5u::write_row(st->step.id(), st->rows, H5T_NATIVE_INT64, &step, {}, I.path);
  I.flush();
  for (TableState* st : ts) {
    ++st->rows;
    st->last_step = step;
  }
}

int64_t RunFile::rows(const std::string& table) const {
  auto it = impl_->tables.find(table);
  if (it == impl_->tables.end()) impl_->fail("no table '" + table + "'");
  return it->second.rows;
}

void RunFile::close() {
  if (!impl_ || impl_->file.id() < 0) return;
  impl_->flush();
  impl_->tables.clear();
  if (impl_->file.reset() < 0) impl_->fail("cannot close the run file" + h5u::detail());
}

// ---- Reader --------------------------------------------------------------------------

struct ReaderTable {
  Handle step;
  std::vector<std::string> names;
  std::vector<Handle> cols;
  int64_t rows = 0;
};

struct RunReader::Impl {
  std::string path;
  Handle file;
  std::map<std::string, ReaderTable> tables;
  const ReaderTable& at(const std::string& t) const {
    auto it = tables.find(t);
    if (it == tables.end()) throw_error(path, ": no table '", t, "'");
    return it->second;
  }
};

RunReader::RunReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunReader::RunReader(RunReader&&) noexcept = default;
RunReader::~RunReader() = default;
const std::string& RunReader::path() const { return impl_->path; }

RunReader RunReader::open(const std::string& path) {
  h5u::check_hdf5_file(path);
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  const Handle fapl = h5u::fapl_swmr_read();
  impl->file =
      Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl.id()), H5Fclose);
  if (impl->file.id() < 0)
    throw_error(path, ": cannot open the run file for reading", h5u::detail(),
                " (a writer that has not yet started SWMR mode holds it: retry in a moment)");
  for (const auto& t : h5u::find_tables(impl->file.id(), path)) {
    ReaderTable rt;
    Handle g(H5Gopen2(impl->file.id(), t.c_str(), H5P_DEFAULT), H5Gclose);
    rt.step = Handle(H5Dopen2(g.id(), "step", H5P_DEFAULT), H5Dclose);
    for (const auto& n : h5u::dataset_names(g.id()))
      if (n != "step") {
        rt.names.push_back(n);
        rt.cols.emplace_back(H5Dopen2(g.id(), n.c_str(), H5P_DEFAULT), H5Dclose);
      }
    impl->tables.emplace(t, std::move(rt));
  }
  RunReader r(std::move(impl));
  r.refresh();
  return r;
}

std::vector<std::string> RunReader::tables() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : impl_->tables) out.push_back(k);
  return out;
}

std::vector<std::string> RunReader::columns(const std::string& table) const {
  return impl_->at(table).names;
}

void RunReader::refresh() {
  // len(step) first: the writer extends every other column before `step`, so columns
  // refreshed afterwards have at least that many complete rows.
  const auto refresh = [&](hid_t d, const std::string& table) {
    if (H5Drefresh(d) < 0)
      throw_error(impl_->path, ": cannot refresh table ", table, h5u::detail());
  };
  for (auto& [name, t] : impl_->tables) {
    refresh(t.step.id(), name);
    t.rows = h5u::rows_of(t.step.id());
    for (auto& c : t.cols) {
      refresh(c.id(), name);
      t.rows = std::min(t.rows, h5u::rows_of(c.id()));  // only shorter if not ours
    }
  }
}

int64_t RunReader::rows(const std::string& table) const { return impl_->at(table).rows; }

std::vector<int64_t> RunReader::steps(const std::string& table) const {
  const ReaderTable& t = impl_->at(table);
  std::vector<int64_t> out(size_t(t.rows));
  h5u::read_rows(t.step.id(), t.rows, H5T_NATIVE_INT64, out.data(), nullptr, impl_->path);
  return out;
}

std::vector<double> RunReader::column(const std::string& table, const std::string& name,
                                      std::vector<int64_t>* row_shape) const {
  const ReaderTable& t = impl_->at(table);
  auto it = std::find(t.names.begin(), t.names.end(), name);
  if (it == t.names.end())
    throw_error(impl_->path, ": table ", table, " has no column '", name, "'");
  const hid_t d = t.cols[size_t(it - t.names.begin())].id();
  std::vector<int64_t> shape;
  h5u::read_rows(d, 0, H5T_NATIVE_DOUBLE, nullptr, &shape, impl_->path);  // shape only
  std::vector<double> out(size_t(t.rows * product(shape)));
  h5u::read_rows(d, t.rows, H5T_NATIVE_DOUBLE, out.data(), nullptr, impl_->path);
  if (row_shape) *row_shape = shape;
  return out;
}

std::string RunReader::config_toml() const { return provenance().at("config"); }

std::map<std::string, std::string> RunReader::provenance() const {
  Handle cfg(H5Gopen2(impl_->file.id(), "config", H5P_DEFAULT), H5Gclose);
  if (cfg.id() < 0) throw_error(impl_->path, ": no /config group; not an lcr run file");
  return h5u::attrs_as_text(cfg.id(), impl_->path);
}

std::map<std::string, std::string> RunReader::attributes(const std::string& group) const {
  Handle g(H5Gopen2(impl_->file.id(), group.c_str(), H5P_DEFAULT), H5Gclose);
  if (g.id() < 0) throw_error(impl_->path, ": no group /", group);
  return h5u::attrs_as_text(g.id(), impl_->path);
}

// ---- Recovery ------------------------------------------------------------------------

namespace {

bool opens_normally(const std::string& path) {
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  H5Eclear2(H5E_DEFAULT);
  return f.id() >= 0;
}

// h5clear -s --increment through the library's own (registered, undocumented) fapl
// properties. False when this HDF5 does not have them.
bool clear_flags(const std::string& path) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  for (const char* p : {"clear_status_flags", "skip_eof_check"}) {
    size_t size = 0;
    if (H5Pexist(fapl.id(), p) <= 0 || H5Pget_size(fapl.id(), p, &size) < 0 ||
        size != sizeof(hbool_t)) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    hbool_t yes = true;
    if (H5Pset(fapl.id(), p, &yes) < 0) throw_error(path, ": cannot set ", p, h5u::detail());
  }
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.id()), H5Fclose);
  if (f.id() < 0) throw_error(path, ": cannot open to clear its status flags", h5u::detail());
  if (H5Fincrement_filesize(f.id(), hsize_t(1) << 20) < 0)
    throw_error(path, ": cannot extend the end of allocation", h5u::detail());
  if (f.reset() < 0) throw_error(path, ": cannot close after clearing", h5u::detail());
  return true;
}

void copy_readable(const std::string& path) {
  const std::string tmp = path + ".recover.tmp";
  {
    const Handle rfapl = h5u::fapl_swmr_read();
    Handle src(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, rfapl.id()), H5Fclose);
    if (src.id() < 0) throw_error(path, ": cannot open even with SWMR-read", h5u::detail());
    Handle fapl = h5u::fapl_v110();
    Handle dst(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id()), H5Fclose);
    if (dst.id() < 0) throw_error(tmp, ": cannot create", h5u::detail());
    Handle root(H5Gopen2(src.id(), "/", H5P_DEFAULT), H5Gclose);
    for (const auto& n : h5u::child_names(root.id()))
      if (H5Ocopy(src.id(), n.c_str(), dst.id(), n.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0)
        throw_error(path, ": cannot copy /", n, " into ", tmp, h5u::detail());
    if (dst.reset() < 0) throw_error(tmp, ": cannot close", h5u::detail());
  }
  fs::rename(tmp, path);
}

}  // namespace

std::string recover_run_file(const std::string& path, RecoverMethod how) {
  h5u::check_hdf5_file(path);
  if (opens_normally(path)) return "clean";
  std::string done;
  if (how != RecoverMethod::Copy && clear_flags(path)) {
    done = "cleared";
  } else {
    require(how != RecoverMethod::ClearFlags, path, ": this HDF5 library lacks the ",
            "clear_status_flags property; use RecoverMethod::Copy or `h5clear -s --increment`");
    copy_readable(path);
    done = "copied";
  }
  require(opens_normally(path), path, ": still does not open after recovery (", done,
          "); try `h5clear -s --increment ", path, "`");
  return done;
}

}  // namespace lcr::io
