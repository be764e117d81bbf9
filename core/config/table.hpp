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
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config/document.hpp"
#include "kernels/base/error.hpp"

namespace lcr::config {

struct Node;  // a parsed value (core/config/toml_node.hpp)

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

  // Sets every bound variable that `d` mentions. Throws an Error for a key that is not
  // bound (listing the valid ones), a value of the wrong type, or a table where a value
  // belongs; the message names the dotted key and, for parsed input, its source line.
  void read(const Document& d) const;

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
    std::function<void(const Node&, const std::string& dotted)> set;  // fields
    std::function<Value()> get;                                       // fields
    std::unique_ptr<Table> sub;                                       // tables
  };
  std::string dotted(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  Entry& add(const std::string& key, const std::string& doc);
  // An enum as an index into `names`: `set(i)` stores names[i]'s value, `get()` finds it.
  void choice_index(const std::string& key, std::vector<std::string> names,
                    std::function<void(size_t)> set, std::function<size_t()> get,
                    const std::string& doc);
  void read_table(const Node& table) const;  // `table` holds a TOML table
  void write(std::string& out) const;

  std::string path_;
  std::vector<Entry> entries_;
};

template <class E>
void Table::choice(const std::string& key, E& v, std::vector<std::pair<std::string, E>> names,
                   const std::string& doc) {
  std::vector<std::string> labels;
  for (const auto& n : names) labels.push_back(n.first);
  choice_index(
      key, std::move(labels), [&v, names](size_t i) { v = names[i].second; },
      [&v, names]() -> size_t {
        for (size_t i = 0; i < names.size(); ++i)
          if (names[i].second == v) return i;
        throw_error("internal: enum value without a name");
      },
      doc);
}

}  // namespace lcr::config
