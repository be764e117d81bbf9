#pragma once
// A parsed configuration: nested tables of values, each value remembering where it came
// from (file and line, or the command-line override) so errors can say so. Table::read
// binds a Document to C++ variables (table.hpp).
//
// toml++ stays behind this header (core/config/toml_node.hpp, included only by the
// config .cpp files of the Kokkos-free lcr_config_text library): with a Kokkos CUDA
// build, every file that uses Kokkos is compiled by nvcc, whose front end cannot compile
// toml++'s headers.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace lcr::config {

// One configuration value; HDF5 attributes use the same variant (core/io/hdf5.hpp).
using Value = std::variant<bool, int64_t, double, std::string>;

class Document {
 public:
  Document();  // empty
  ~Document();
  Document(Document&&) noexcept;
  Document& operator=(Document&&) noexcept;

  // TOML text; a syntax error names `source`, the line and the column.
  static Document parse(const std::string& text, const std::string& source);

  // Whether the dotted key ("attention.scheme", or a table "attention") is present.
  bool has(const std::string& dotted) const;
  // The value of a dotted key; none if absent, a table, an array or a date.
  std::optional<Value> value(const std::string& dotted) const;
  // "section.key" -> the value as TOML text, for every leaf; floats in their shortest
  // round-trip form, so any change of value shows as a change of text.
  std::map<std::string, std::string> leaves() const;

  struct Impl;  // the toml::table (core/config/toml_node.hpp)
  const Impl& impl() const { return *impl_; }
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Formats a Value as a TOML value ("10000.0", "\"rope\"", "true").
std::string format_value(const Value& v);

// Reads a TOML file; a syntax error names the file, line and column.
Document parse_file(const std::string& path);

// Applies one command-line override "section.key=value". What the value means depends on
// the key's type, known when a Table reads the document (table.hpp): a string key takes the
// text after '=' verbatim, trimmed of spaces and tabs (run.dir=runs/x is "runs/x", a
// date-like run.name is that text, not a TOML date, run.name= is ""), or a quoted TOML
// string's content
// (run.dir="runs/x" or 'runs/x' is runs/x); any other key takes the text as a TOML value
// (500000, 1e-6, true), and text that is not one is an error naming the key then.
void apply_override(Document& root, const std::string& text);

// Copies every key of `src` into `dst`, recursing into tables present in both: what
// `src` says wins. Values keep their source lines for error messages.
void merge(Document& dst, Document&& src);

// The config file (none if `path` is empty) with the overrides applied in order.
Document load_config(const std::string& path, const std::vector<std::string>& overrides);

// Builds nested tables from dotted keys: {"rope.base": 1e4} -> [rope] base = 1e4.
Document table_from_values(const std::vector<std::pair<std::string, Value>>& values);

}  // namespace lcr::config
