#pragma once
// Raw HDF5 C-API helpers behind the run file and the checkpoints (core/io/hdf5.hpp's
// Location cannot open SWMR files or extendible datasets). Every failure is an lcr::Error
// that starts with `file` (the path on disk) and names the object.
#include <hdf5.h>

#include <map>
#include <string>
#include <vector>

#include "core/io/hdf5.hpp"
#include "core/io/run_file.hpp"

namespace lcr::io::h5u {

using h5::detail;  // " (HDF5: <innermost message>)" or ""; clears the stack
using h5::Handle;
using h5::quiet;  // no HDF5 error-stack printing: we report errors ourselves

std::string library_version();                  // "1.10.8"
void check_hdf5_file(const std::string& path);  // h5::check_file
Handle fapl_v110();  // file access: libver bounds [V110, V110] (SWMR needs the 1.10 format)
// File access for SWMR reads: metadata checksum retries bounded at kSwmrReadAttempts. HDF5
// doubles its nap after each failed try (1 ns, 2 ns, ...) and defaults to 100 tries for SWMR,
// so an object header a killed writer left torn would hold a reader for ages; 30 tries wait
// at most about 2 s in all, ample for a live writer to finish a flush.
constexpr unsigned kSwmrReadAttempts = 30;
Handle fapl_swmr_read();

hid_t file_type(DType t);
Handle ensure_group(hid_t loc, const std::string& path, const std::string& file);
std::vector<std::string> child_names(hid_t group);    // every link, sorted
std::vector<std::string> dataset_names(hid_t group);  // the datasets among them
// Every group below the root that holds a dataset named `step`, as "a/b", sorted.
std::vector<std::string> find_tables(hid_t file_id, const std::string& file);

// Attributes. Strings are FIXED-length (variable-length data is not allowed once SWMR
// writing has started, and fixed-length needs no heap). Writing replaces.
void write_attr(hid_t obj, const std::string& name, const AttrValue& v, const std::string& file);
int64_t read_attr_int(hid_t obj, const std::string& name, int64_t fallback);
std::map<std::string, std::string> attrs_as_text(hid_t obj, const std::string& file);

// Extendible columns [rows, shape...], chunked along rows, rows unlimited.
Handle create_column(hid_t group, const std::string& name, DType t,
                     const std::vector<int64_t>& shape, const std::string& doc,
                     const std::string& file);
// Opens `path` and checks it is such a column with this type and row shape.
Handle open_column(hid_t loc, const std::string& path, DType t, const std::vector<int64_t>& shape,
                   const std::string& file);
void write_axis(hid_t loc, const std::string& path, const std::vector<int64_t>& values,
                const std::string& file);
int64_t rows_of(hid_t dset);
void set_rows(hid_t dset, int64_t rows, const std::string& file);
// Extends to row+1 rows and writes row `row` from `data` (mem_type, prod(shape) values).
void write_row(hid_t dset, int64_t row, hid_t mem_type, const void* data,
               const std::vector<int64_t>& shape, const std::string& file);
// Reads the first `rows` rows into `out` (skipped when null); returns the row shape
// through `row_shape` when given.
void read_rows(hid_t dset, int64_t rows, hid_t mem_type, void* out, std::vector<int64_t>* row_shape,
               const std::string& file);
std::vector<int64_t> read_steps(hid_t dset, const std::string& file);  // a whole int64 column

}  // namespace lcr::io::h5u
