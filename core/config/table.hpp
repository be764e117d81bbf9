#pragma once
// Configuration: TOML tables bound to C++ variables, field by field. One binding serves
// reading (unknown keys and wrong types are errors naming the key and listing the valid
// keys), writing (every value, defaults included, as commented TOML) and flat key/value
// export (HDF5 attributes). Sections nest like TOML tables:
//
//   AttentionSpec spec;
//   config::Table root;
//   config::Table& att = root.table("attention", "attention layer");
//   att.field("heads", spec.heads, "query heads H");
//   att.table("rope").field("base", spec.rope.base, "angle = pos * base^(-2m/r)");
//   root.read(load_config("run.toml", {"attention.rope.base=500000"}));
//   std::string text = root.to_toml();
//
// New sections (model, train, data) are new tables on the same root.
#include <toml++/toml.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kernels/base/error.hpp"

namespace lcr::config {

// One configuration value; HDF5 attributes use the same variant (core/io/hdf5.hpp).
using Value = std::variant<bool, int64_t, double, std::string>;

class Table {
 public:
  // `path` is the dotted name of this table ("" for the root, "attention.rope").
  explicit Table(std::string path = "") : path_(std::move(path)) {}
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  // A nested table [path.key]; returns the existing one when called twice.
  Table& table(const std::string& key, const std::string& doc = "");

  // Bind a variable: its current value is the default written by to_toml().
  void field(const std::string& key, bool& v, const std::string& doc);
  void field(const std::string& key, int& v, const std::string& doc);
  void field(const std::string& key, int64_t& v, const std::string& doc);
  void field(const std::string& key, double& v, const std::string& doc);
  void field(const std::string& key, std::string& v, const std::string& doc);

  // An enum written as one of a fixed set of names.
  template <class E>
  void choice(const std::string& key, E& v, std::vector<std::pair<std::string, E>> names,
              const std::string& doc);

  // Sets every bound variable that `t` mentions. Throws an Error for a key that is not
  // bound (listing the valid ones), a value of the wrong type, or a table where a value
  // belongs; the message names the dotted key and, for parsed input, its source line.
  void read(const toml::table& t) const;

  // The bound values as TOML text: this table's keys, then each sub-table, in declaration
  // order, one "# doc" comment per key.
  std::string to_toml() const;

  // Every bound value, depth first, keyed by its dotted path relative to this table
  // ("rope.base").
  std::vector<std::pair<std::string, Value>> values() const;

  // Dotted names of the keys (and sub-tables, written "name.*") directly in this table.
  std::vector<std::string> keys() const;
  bool has_key(const std::string& key) const;
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    std::string key, doc;
    std::function<void(const toml::node&, const std::string& dotted)> set;  // fields
    std::function<Value()> get;                                             // fields
    std::unique_ptr<Table> sub;                                             // tables
  };
  std::string dotted(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  Entry& add(const std::string& key, const std::string& doc);
  void write(std::string& out) const;

  std::string path_;
  std::vector<Entry> entries_;
};

// "config.toml line 3" or "command-line override 'a.b=c'" for a parsed node, "" otherwise.
std::string where(const toml::node& n);

// Formats a Value as a TOML value ("10000.0", "\"rope\"", "true").
std::string format_value(const Value& v);

// Reads a TOML file; a syntax error names the file, line and column.
toml::table parse_file(const std::string& path);

// Applies one command-line override "section.key=value". The value is parsed as a TOML
// value (500000, 1e-6, true, "text"); a bare word that is not TOML (goat) is a string.
void apply_override(toml::table& root, const std::string& text);

// Copies every key of `src` into `dst`, recursing into tables present in both: what
// `src` says wins. Nodes are moved, keeping their source lines for error messages.
void merge(toml::table& dst, toml::table&& src);

// The config file (none if `path` is empty) with the overrides applied in order.
toml::table load_config(const std::string& path, const std::vector<std::string>& overrides);

// Builds nested tables from dotted keys: {"rope.base": 1e4} -> [rope] base = 1e4.
toml::table table_from_values(const std::vector<std::pair<std::string, Value>>& values);

template <class E>
void Table::choice(const std::string& key, E& v, std::vector<std::pair<std::string, E>> names,
                   const std::string& doc) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n.first;
  Entry& e = add(key, doc.empty() ? "one of: " + list : doc + " (" + list + ")");
  e.set = [&v, names, list](const toml::node& n, const std::string& k) {
    const auto* s = n.as_string();
    require(s != nullptr, k, " must be a string (one of: ", list, ")", where(n));
    for (const auto& c : names)
      if (c.first == s->get()) {
        v = c.second;
        return;
      }
    throw_error("unknown value '", s->get(), "' for ", k, "; valid values: ", list, where(n));
  };
  e.get = [&v, names]() -> Value {
    for (const auto& c : names)
      if (c.second == v) return c.first;
    throw_error("internal: enum value without a name");
  };
}

}  // namespace lcr::config
