#pragma once
// What a run file holds (docs/run-file.md): tables of columns appended one row per step,
// axis datasets and group attributes, all created before SWMR writing starts. The writer
// (core/io/run_file.hpp) is generic; the builders below give the standard tables, and the
// trainer fills the values.
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace lcr::io {

enum class DType { F64, F32, I64 };

// One column of a table: every row has `shape` (empty = one number). Values are passed as
// doubles and converted to `type` on disk.
struct Column {
  std::string name;
  std::vector<int64_t> shape;
  DType type = DType::F64;
  std::string doc;  // stored as the dataset's `doc` attribute
};

// A group of columns appended together, one row per call. The commit column `step` is
// implicit (do not list it).
struct Table {
  std::string path;  // inside the file, no leading slash: "metrics", "priors/layer_0"
  std::string doc;
  std::vector<Column> columns;
  const Column& at(const std::string& name) const;  // Error listing the columns
};

// Scalar attribute of a group (written once, at creation).
using AttrValue = std::variant<int64_t, double, std::string>;

// Everything created before SWMR starts.
struct RunLayout {
  std::vector<Table> tables;
  // 1-D int64 datasets that label an axis (e.g. "priors/goat_lags"): never appended.
  std::map<std::string, std::vector<int64_t>> axes;
  // group path -> attribute name -> value ("priors" -> "scheme" -> "goat").
  std::map<std::string, std::map<std::string, AttrValue>> attrs;
  const Table& at(const std::string& path) const;  // Error listing the tables
};

// ---- The standard tables (docs/run-file.md) ------------------------------------------
// metrics: step, loss, lr, grad_norm, tokens_per_s, memory_bytes, then `extra` (float64).
Table metrics_table(const std::vector<std::string>& extra = {});
Table perplexity_table();  // eval/perplexity: length, loss, ppl
Table passkey_table();     // eval/passkey: length, depth, accuracy

// What the prior tables of a model look like. `scheme` picks the scheme-specific columns:
// goat/goat2d, pope, rope, path/path_fox; any other scheme gets the common ones only.
struct PriorShapes {
  std::string scheme;
  int64_t layers = 0, heads = 0, kv_heads = 0;
  int64_t goat_modes = 0;               // R
  std::vector<int64_t> goat_lags;       // lags of the relative prior curve
  std::vector<int64_t> goat_positions;  // positions j of u_h(j)
  int64_t pope_dim = 0;                 // d: PoPE frequencies per head
  int64_t rope_pairs = 0;               // r/2: rotated pairs per head
};
// priors/layer_<l> for every layer; Error naming a dimension the scheme needs but is 0.
std::vector<Table> prior_tables(const PriorShapes& s);
// metrics + eval/perplexity + eval/passkey + prior tables, the axes and /priors attributes.
RunLayout standard_layout(const PriorShapes& s, const std::vector<std::string>& extra_metrics = {});

}  // namespace lcr::io
