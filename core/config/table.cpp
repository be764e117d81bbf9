#include "core/config/table.hpp"

#include <limits>
#include <optional>
#include <sstream>

#include "core/config/toml_node.hpp"

namespace lcr::config {
namespace {

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date/time";
  }
}

std::string shown(const toml::node& n) {
  std::ostringstream os;
  n.visit([&](const auto& x) {
    if constexpr (toml::is_value<decltype(x)>) os << " " << x;
  });
  return os.str();
}

[[noreturn]] void wrong_type(const toml::node& n, const std::string& key, const char* want) {
  if (const auto raw = unparsed_override(n))  // text that is not TOML (train.steps=ten)
    throw_error(key, " must be ", want, ", got ",
                raw->empty() ? std::string("nothing after '='") : "'" + *raw + "'", where(n));
  throw_error(key, " must be ", want, ", got ", type_name(n), shown(n), where(n));
}

// A string key's value: a TOML string from a file; from a command-line override, the text
// after '=' verbatim or a quoted string's content (override_string). Null otherwise.
std::optional<std::string> string_value(const toml::node& n) {
  if (auto s = override_string(n)) return s;
  if (const auto* s = n.as_string()) return s->get();
  return std::nullopt;
}

int64_t get_integer(const toml::node& n, const std::string& key, int64_t lo, int64_t hi) {
  const auto* i = n.as_integer();
  if (!i) wrong_type(n, key, "an integer");
  require(i->get() >= lo && i->get() <= hi, key, " = ", i->get(), " is out of range", where(n));
  return i->get();
}

}  // namespace

Table::Entry& Table::add(const std::string& key, const std::string& doc) {
  require(!has_key(key), "config: key '", dotted(key), "' bound twice");
  entries_.push_back(Entry{key, doc, {}, {}, nullptr});
  return entries_.back();
}

Table& Table::table(const std::string& key, const std::string& doc) {
  for (auto& e : entries_)
    if (e.key == key && e.sub) return *e.sub;
  Entry& e = add(key, doc);
  e.sub = std::make_unique<Table>(dotted(key));
  return *e.sub;
}

void Table::field(const std::string& key, bool& v, const std::string& doc) {
  Entry& e = add(key, doc);
  e.set = [&v](const Node& node, const std::string& k) {
    const toml::node& n = node.n;
    const auto* b = n.as_boolean();
    if (!b) wrong_type(n, k, "true or false");
    v = b->get();
  };
  e.get = [&v]() -> Value { return v; };
}

void Table::field(const std::string& key, int& v, const std::string& doc) {
  Entry& e = add(key, doc);
  e.set = [&v](const Node& node, const std::string& k) {
    const toml::node& n = node.n;
    v = static_cast<int>(
        get_integer(n, k, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  };
  e.get = [&v]() -> Value { return int64_t(v); };
}

void Table::field(const std::string& key, int64_t& v, const std::string& doc) {
  Entry& e = add(key, doc);
  e.set = [&v](const Node& node, const std::string& k) {
    const toml::node& n = node.n;
    v = get_integer(n, k, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  };
  e.get = [&v]() -> Value { return v; };
}

void Table::field(const std::string& key, double& v, const std::string& doc) {
  Entry& e = add(key, doc);
  // TOML writes 500000 as an integer; a float field takes it as the number it is.
  e.set = [&v](const Node& node, const std::string& k) {
    const toml::node& n = node.n;
    if (const auto* i = n.as_integer()) {
      v = double(i->get());
      return;
    }
    const auto* f = n.as_floating_point();
    if (!f) wrong_type(n, k, "a number");
    v = f->get();
  };
  e.get = [&v]() -> Value { return v; };
}

void Table::field(const std::string& key, std::string& v, const std::string& doc) {
  Entry& e = add(key, doc);
  e.set = [&v](const Node& node, const std::string& k) {
    const toml::node& n = node.n;
    auto s = string_value(n);
    if (!s) wrong_type(n, k, "a string");
    v = std::move(*s);
  };
  e.get = [&v]() -> Value { return v; };
}

std::vector<std::string> Table::keys() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.sub ? e.key + ".*" : e.key);
  return out;
}

bool Table::has_key(const std::string& key) const {
  for (const auto& e : entries_)
    if (e.key == key) return true;
  return false;
}

void Table::choice_index(const std::string& key, std::vector<std::string> names,
                         std::function<void(size_t)> set, std::function<size_t()> get,
                         const std::string& doc) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  Entry& e = add(key, doc.empty() ? "one of: " + list : doc + " (" + list + ")");
  e.set = [names, list, set](const Node& node, const std::string& k) {
    const auto s = string_value(node.n);
    require(s.has_value(), k, " must be a string (one of: ", list, ")", where(node.n));
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == *s) return set(i);
    throw_error("unknown value '", *s, "' for ", k, "; valid values: ", list, where(node.n));
  };
  e.get = [names, get]() -> Value { return names[get()]; };
}

void Table::read(const Document& d) const { read_table(Node{d.impl().t}); }

void Table::read_table(const Node& table) const {
  for (const auto& [k, node] : *table.n.as_table()) {
    const std::string key(k.str());
    const Entry* e = nullptr;
    for (const auto& x : entries_)
      if (x.key == key) e = &x;
    if (!e) {
      std::string valid;
      for (const auto& name : keys()) valid += (valid.empty() ? "" : ", ") + name;
      throw_error("unknown key '", dotted(key), "'", where(node), "; valid keys ",
                  path_.empty() ? std::string("at the top level") : "in [" + path_ + "]", ": ",
                  valid);
    }
    if (e->sub) {
      const auto* sub = node.as_table();
      if (!sub) wrong_type(node, dotted(key), ("a table [" + dotted(key) + "]").c_str());
      e->sub->read_table(Node{*sub});
    } else {
      // An override's inline table ({a = 1}) goes to the field: text for a string key.
      require(!node.is_table() || override_text(node), dotted(key), " is a value, not a table [",
              dotted(key), "]", where(node));
      e->set(Node{node}, dotted(key));
    }
  }
}

std::vector<std::pair<std::string, Value>> Table::values() const {
  std::vector<std::pair<std::string, Value>> out;
  for (const auto& e : entries_) {
    if (!e.sub) {
      out.emplace_back(e.key, e.get());
      continue;
    }
    for (auto& [k, v] : e.sub->values()) out.emplace_back(e.key + "." + k, std::move(v));
  }
  return out;
}

void Table::write(std::string& out) const {
  if (!path_.empty()) out += (out.empty() ? "[" : "\n[") + path_ + "]\n";
  for (const auto& e : entries_) {
    if (e.sub) continue;
    out += e.key + " = " + format_value(e.get());
    out += e.doc.empty() ? "\n" : "  # " + e.doc + "\n";
  }
  for (const auto& e : entries_)
    if (e.sub) e.sub->write(out);
}

std::string Table::to_toml() const {
  std::string out;
  write(out);
  return out;
}

}  // namespace lcr::config
