#include "core/config/table.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

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
  throw_error(key, " must be ", want, ", got ", type_name(n), shown(n), where(n));
}

int64_t get_integer(const toml::node& n, const std::string& key, int64_t lo, int64_t hi) {
  const auto* i = n.as_integer();
  if (!i) wrong_type(n, key, "an integer");
  require(i->get() >= lo && i->get() <= hi, key, " = ", i->get(), " is out of range", where(n));
  return i->get();
}

bool valid_key_part(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

std::string where(const toml::node& n) {
  const auto& src = n.source();
  if (!src.path) return "";
  std::ostringstream os;
  os << " (" << *src.path;
  if (src.path->rfind("command-line", 0) != 0) os << " line " << src.begin.line;
  os << ")";
  return os.str();
}

std::string format_value(const Value& v) {
  if (const auto* x = std::get_if<double>(&v)) {  // shortest text that reads back exactly
    if (std::isnan(*x)) return "nan";
    if (std::isinf(*x)) return *x > 0 ? "inf" : "-inf";
    char buf[32];
    for (int digits = 15; digits <= 17; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, *x);
      if (std::strtod(buf, nullptr) == *x) break;
    }
    std::string s = buf;
    return s.find_first_of(".e") == std::string::npos ? s + ".0" : s;  // TOML: a float
  }
  if (const auto* x = std::get_if<std::string>(&v)) {  // a TOML basic string
    std::string s = "\"";
    for (unsigned char c : *x) {
      if (c == '"' || c == '\\') {
        s += '\\';
        s += char(c);
      } else if (c < 0x20 || c == 0x7f) {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\u%04x", c);
        s += esc;
      } else {
        s += char(c);
      }
    }
    return s + "\"";
  }
  std::ostringstream os;
  std::visit([&](const auto& x) { os << toml::value<std::decay_t<decltype(x)>>(x); }, v);
  return os.str();
}

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
  e.set = [&v](const toml::node& n, const std::string& k) {
    const auto* b = n.as_boolean();
    if (!b) wrong_type(n, k, "true or false");
    v = b->get();
  };
  e.get = [&v]() -> Value { return v; };
}

void Table::field(const std::string& key, int& v, const std::string& doc) {
  Entry& e = add(key, doc);
  e.set = [&v](const toml::node& n, const std::string& k) {
    v = static_cast<int>(
        get_integer(n, k, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  };
  e.get = [&v]() -> Value { return int64_t(v); };
}

void Table::field(const std::string& key, int64_t& v, const std::string& doc) {
  Entry& e = add(key, doc);
  e.set = [&v](const toml::node& n, const std::string& k) {
    v = get_integer(n, k, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  };
  e.get = [&v]() -> Value { return v; };
}

void Table::field(const std::string& key, double& v, const std::string& doc) {
  Entry& e = add(key, doc);
  // TOML writes 500000 as an integer; a float field takes it as the number it is.
  e.set = [&v](const toml::node& n, const std::string& k) {
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
  e.set = [&v](const toml::node& n, const std::string& k) {
    const auto* s = n.as_string();
    if (!s) wrong_type(n, k, "a string");
    v = s->get();
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

void Table::read(const toml::table& t) const {
  for (const auto& [k, node] : t) {
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
      e->sub->read(*sub);
    } else {
      require(!node.is_table(), dotted(key), " is a value, not a table [", dotted(key), "]",
              where(node));
      e->set(node, dotted(key));
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

toml::table parse_file(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    if (b.line == 0) throw_error(path, ": cannot read the config file (", e.description(), ")");
    throw_error(path, ":", b.line, ":", b.column, ": ", e.description());
  }
}

void apply_override(toml::table& root, const std::string& text) {
  const auto eq = text.find('=');
  const std::string key = trim(text.substr(0, eq));
  const std::string val = eq == std::string::npos ? "" : trim(text.substr(eq + 1));
  require(eq != std::string::npos && !key.empty() && !val.empty(), "override '", text,
          "' must look like section.key=value (e.g. attention.rope.base=500000)");
  std::vector<std::string> parts;
  for (size_t b = 0;;) {
    const auto dot = key.find('.', b);
    parts.push_back(key.substr(b, dot - b));
    require(valid_key_part(parts.back()), "override '", text, "': '", key,
            "' is not a dotted key (letters, digits, _ and - between dots)");
    if (dot == std::string::npos) break;
    b = dot + 1;
  }
  // The value as TOML, with the override named as its source for error messages; a bare
  // word such as goat is not TOML, so it is taken as the string it obviously means.
  const std::string source = "command-line override '" + text + "'";
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + val, source);
  } catch (const toml::parse_error&) {
    bool bare = true;
    for (char c : val)
      bare = bare && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
                      c == '.' || c == '+');
    require(bare, "override '", text, "': cannot parse the value '", val,
            "' (write strings in quotes: key=\"text\")");
    parsed = toml::parse("v = \"" + val + "\"", source);
  }
  toml::table* t = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto [it, inserted] = t->insert(parts[i], toml::table{});
    t = it->second.as_table();
    std::string prefix = parts[0];
    for (size_t j = 1; j <= i; ++j) prefix += "." + parts[j];
    require(t != nullptr, "override '", text, "': ", prefix, " is a value, not a table");
  }
  t->insert_or_assign(parts.back(), std::move(*parsed.get("v")));
}

void merge(toml::table& dst, toml::table&& src) {
  for (auto&& [k, node] : src) {
    auto* existing = dst.get(k);
    if (existing && existing->is_table() && node.is_table()) {
      merge(*existing->as_table(), std::move(*node.as_table()));
      continue;
    }
    dst.insert_or_assign(k, std::move(node));
  }
}

toml::table load_config(const std::string& path, const std::vector<std::string>& overrides) {
  toml::table root = path.empty() ? toml::table{} : parse_file(path);
  for (const auto& o : overrides) apply_override(root, o);
  return root;
}

toml::table table_from_values(const std::vector<std::pair<std::string, Value>>& values) {
  toml::table root;
  for (const auto& [key, v] : values) {
    toml::table* t = &root;
    size_t b = 0;
    for (auto dot = key.find('.'); dot != std::string::npos; dot = key.find('.', b)) {
      auto [it, inserted] = t->insert(key.substr(b, dot - b), toml::table{});
      t = it->second.as_table();
      require(t != nullptr, "'", key.substr(0, dot), "' is both a value and a table");
      b = dot + 1;
    }
    std::visit([&](const auto& x) { t->insert_or_assign(key.substr(b), x); }, v);
  }
  return root;
}

}  // namespace lcr::config
