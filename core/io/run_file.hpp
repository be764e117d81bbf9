#pragma once
// The HDF5 run file, runs/<name>/run.h5 (layout: docs/run-file.md, the one place that
// documents it). Written by ONE rank in SWMR mode, so it can be read while the run goes
// and stays consistent after kill -9:
//   - the file uses the 1.10 format (libver bounds pinned to V110: 1.10 and newer read it);
//   - every group, dataset and attribute is created up front (RunLayout), then SWMR writing
//     starts; afterwards the writer only extends datasets along their first (step) axis;
//   - data is organised in TABLES: a group whose `step` dataset [n] int64 is the commit
//     column. append() extends and writes every other column, flushes, and only then
//     extends, writes and flushes `step`. A reader therefore takes n = len(step) rows; every
//     other column of the table has at least n complete rows.
//
// Typical use (rank 0 of the trainer; others send it their metrics):
//   RunLayout layout = standard_layout(prior_shapes, {"clip_scale"});
//   RunFile rf = resume ? RunFile::resume(path, layout, ckpt_step)
//                       : RunFile::create(path, layout, provenance);
//   rf.append("metrics", step, {{"loss", {loss}}, {"lr", {lr}}, ...});
//   rf.append(step, {{"metrics", metrics_row}, {"priors/layer_0", {{"entropy", per_head},
//                                                                   {"alpha", alpha_HxR}, ...}}});
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/io/hdf5.hpp"
#include "core/io/run_layout.hpp"

namespace lcr::io {

// What a resume changes, for /config (RunFile::resume): the config now in force, the
// allowed config changes ("key: old -> new; ..."), the command line and the checkpoint.
struct ResumeRecord {
  std::string config_toml, changes, command_line, checkpoint;
};

// Provenance, stored as attributes of /config (hdf5_version is filled in here).
struct Provenance {
  std::string config_toml;  // the full resolved config
  std::string lcr_version, git_revision, command_line, devices;
  std::string kokkos_version, mpi_version;
  int64_t world_size = 1, dp = 1, cp = 1;
  std::string start_time;  // ISO 8601 UTC; empty = now
  std::map<std::string, std::string> extra;
};

// One row: column name -> values (row-major, prod(shape) of them). Every column of the
// table must be given; NaN marks "not measured".
using Row = std::map<std::string, std::vector<double>>;

class RunFile {
 public:
  // A new run file (Error if `path` exists, unless overwrite).
  static RunFile create(const std::string& path, const RunLayout& layout, const Provenance& prov,
                        bool overwrite = false);
  // Continue an existing run file after a restart from the checkpoint at `checkpoint_step`:
  // recovers it if its writer died (recover_run_file), checks it has `layout` (Error naming
  // the first difference), drops every row with step > checkpoint_step (those steps are
  // trained again), records the resume in /config, and starts SWMR writing.
  // All of that happens on a copy, path + ".resume.tmp", renamed over path only when SWMR
  // writing has started (fsynced): a resume that fails -- a full disk (ENOSPC), a layout
  // mismatch -- leaves path byte for byte as it was and removes the copy, so the next
  // resume starts from the same file. With `rec`, /config's `config` becomes rec's TOML
  // (config.toml and run.h5 never disagree) and one line is appended to `resume_log`.
  static RunFile resume(const std::string& path, const RunLayout& layout, int64_t checkpoint_step,
                        const ResumeRecord* rec = nullptr);

  RunFile(RunFile&&) noexcept;
  RunFile& operator=(RunFile&&) noexcept;
  ~RunFile();

  // Appends one row and commits it (see the top of this file). Errors: unknown table or
  // column, a missing column, wrong value count, step below the table's last step.
  void append(const std::string& table, int64_t step, const Row& row);
  // Rows of several tables for one step, committed together with two flushes in all (the
  // trainer's per-log-step call: metrics plus every layer's priors).
  void append(int64_t step, const std::vector<std::pair<std::string, Row>>& rows);
  int64_t rows(const std::string& table) const;
  const std::string& path() const;
  void close();  // flushes and closes; the destructor does it silently

 private:
  static RunFile resume_in_place(const std::string& work, const std::string& path,
                                 const RunLayout& layout, int64_t checkpoint_step,
                                 const ResumeRecord* rec);
  struct Impl;
  explicit RunFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads a run file: live (being written), crashed, or closed. Opens with SWMR-read, so a
// crashed file needs no recovery to be read.
class RunReader {
 public:
  static RunReader open(const std::string& path);
  RunReader(RunReader&&) noexcept;
  ~RunReader();

  std::vector<std::string> tables() const;  // every group holding `step`, sorted
  std::vector<std::string> columns(const std::string& table) const;  // without `step`
  // Re-reads the committed row counts (len(step)) of every table; rows appended since
  // open/refresh become visible. Snapshot semantics: rows() and reads use these counts.
  void refresh();
  int64_t rows(const std::string& table) const;
  std::vector<int64_t> steps(const std::string& table) const;
  // The committed rows of a column, row-major [rows, row_shape...] as doubles.
  std::vector<double> column(const std::string& table, const std::string& name,
                             std::vector<int64_t>* row_shape = nullptr) const;
  std::string config_toml() const;
  std::map<std::string, std::string> provenance() const;  // /config attributes as text
  // Attributes of a group ("eval/longctx") as text; Error naming a missing group.
  std::map<std::string, std::string> attributes(const std::string& group) const;
  const std::string& path() const;

 private:
  struct Impl;
  explicit RunReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The current UTC time as ISO 8601, "YYYY-MM-DDThh:mm:ssZ" (provenance timestamps).
std::string now_utc();

// Makes a run file whose writer died (kill -9, node failure) openable normally again.
// Does nothing to a file that already opens normally. Never call it on a file that a live
// writer still holds. How:
//   ClearFlags: what `h5clear -s --increment` does, through the library: opens the file
//     with HDF5's own fapl properties "clear_status_flags" and "skip_eof_check" (they are
//     registered on every 1.10 fapl, used by h5clear), which resets the superblock's
//     "open for writing / SWMR" flags, then H5Fincrement_filesize(1 MiB) so that the
//     end-of-allocation covers everything the writer put in the file.
//   Copy: public API only: opens with SWMR-read and H5Ocopy's every top-level object into
//     a fresh file (path.recover.tmp, renamed over path).
//   Auto: ClearFlags where the library has those properties, else Copy.
// Returns what was done: "clean" (nothing needed), "cleared" or "copied". Error naming
// the path if the file still does not open.
enum class RecoverMethod { Auto, ClearFlags, Copy };
std::string recover_run_file(const std::string& path, RecoverMethod how = RecoverMethod::Auto);

}  // namespace lcr::io
