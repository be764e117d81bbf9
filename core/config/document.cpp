#include "core/config/document.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/config/toml_node.hpp"
#include "kernels/base/error.hpp"

namespace lcr::config {
namespace {

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

// The node at a dotted key, or null.
const toml::node* find(const toml::table& root, const std::string& dotted) {
  const toml::node* n = &root;
  size_t b = 0;
  for (;;) {
    const auto dot = dotted.find('.', b);
    const auto* t = n->as_table();
    if (!t) return nullptr;
    n = t->get(dotted.substr(b, dot == std::string::npos ? std::string::npos : dot - b));
    if (!n || dot == std::string::npos) return n;
    b = dot + 1;
  }
}

// A leaf as TOML text; floats in their shortest round-trip form.
void write_value(std::ostream& os, const toml::node& v) {
  v.visit([&](auto&& n) {
    using N = std::decay_t<decltype(n)>;
    if constexpr (std::is_same_v<N, toml::value<std::string>>) {
      os << format_value(n.get());
    } else if constexpr (std::is_same_v<N, toml::value<double>>) {
      char buf[64];
      const auto r = std::to_chars(buf, buf + sizeof buf, n.get());
      os << std::string(buf, r.ptr);
    } else if constexpr (std::is_same_v<N, toml::value<int64_t>>) {
      os << n.get();
    } else if constexpr (std::is_same_v<N, toml::value<bool>>) {
      os << (n.get() ? "true" : "false");
    } else if constexpr (std::is_same_v<N, toml::array>) {
      os << '[';
      for (size_t i = 0; i < n.size(); ++i) {
        if (i) os << ", ";
        write_value(os, n[i]);
      }
      os << ']';
    } else {
      os << n;  // dates and times
    }
  });
}

void flatten(const toml::table& t, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  for (auto&& [k, v] : t) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = v.as_table()) {
      flatten(*sub, key, out);
    } else {
      std::ostringstream os;
      write_value(os, v);
      out[key] = os.str();
    }
  }
}

void merge_tables(toml::table& dst, toml::table&& src) {
  for (auto&& [k, node] : src) {
    auto* existing = dst.get(k);
    if (existing && existing->is_table() && node.is_table()) {
      merge_tables(*existing->as_table(), std::move(*node.as_table()));
      continue;
    }
    dst.insert_or_assign(k, std::move(node));
  }
}

}  // namespace

Document::Document() : impl_(std::make_unique<Impl>()) {}
Document::~Document() = default;
Document::Document(Document&&) noexcept = default;
Document& Document::operator=(Document&&) noexcept = default;

Document Document::parse(const std::string& text, const std::string& source) {
  Document d;
  try {
    d.impl_->t = toml::parse(std::string_view(text), std::string_view(source));
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw_error(source, ":", b.line, ":", b.column, ": ", e.description());
  }
  return d;
}

bool Document::has(const std::string& dotted) const { return find(impl_->t, dotted) != nullptr; }

std::optional<Value> Document::value(const std::string& dotted) const {
  const toml::node* n = find(impl_->t, dotted);
  if (!n) return std::nullopt;
  if (const auto* x = n->as_boolean()) return Value(x->get());
  if (const auto* x = n->as_integer()) return Value(x->get());
  if (const auto* x = n->as_floating_point()) return Value(x->get());
  if (const auto* x = n->as_string()) return Value(x->get());
  return std::nullopt;
}

std::map<std::string, std::string> Document::leaves() const {
  std::map<std::string, std::string> out;
  flatten(impl_->t, "", out);
  return out;
}

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

Document parse_file(const std::string& path) {
  Document d;
  try {
    d.impl().t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    if (b.line == 0) throw_error(path, ": cannot read the config file (", e.description(), ")");
    throw_error(path, ":", b.line, ":", b.column, ": ", e.description());
  }
  return d;
}

namespace {

// The source a command-line override's value is parsed under: it names the override in error
// messages (where()), and lets a string key recover the text after '=' (override_text()).
const std::string kOverrideSource = "command-line override '";

std::string override_source(const std::string& text) { return kOverrideSource + text + "'"; }

// `raw` as one TOML value ("v = raw" holding v and nothing else), or none.
std::optional<toml::table> parse_value(const std::string& raw, const std::string& source) {
  if (raw.empty()) return std::nullopt;
  try {
    toml::table t = toml::parse("v = " + raw, source);
    if (t.size() == 1 && t.contains("v")) return t;
  } catch (const toml::parse_error&) {
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> override_text(const toml::node& n) {
  // The override's value itself starts right after "v = "; a value inside it (an element of
  // an inline table or array) starts further on, and is what TOML says it is.
  const auto& src = n.source();
  const auto& path = src.path;
  if (!path || path->rfind(kOverrideSource, 0) != 0 || path->back() != '\'' ||
      src.begin.line != 1 || src.begin.column != 5)
    return std::nullopt;
  const std::string text =
      path->substr(kOverrideSource.size(), path->size() - kOverrideSource.size() - 1);
  const auto eq = text.find('=');
  if (eq == std::string::npos) return std::nullopt;
  return trim(text.substr(eq + 1));
}

std::optional<std::string> override_string(const toml::node& n) {
  const auto raw = override_text(n);
  if (!raw) return std::nullopt;
  if (const auto t = parse_value(*raw, "quoted"))
    if (const auto* s = t->get("v")->as_string()) return s->get();
  return raw;
}

std::optional<std::string> unparsed_override(const toml::node& n) {
  const auto raw = override_text(n);
  if (!raw || parse_value(*raw, "unparsed")) return std::nullopt;
  return raw;
}

void apply_override(Document& root, const std::string& text) {
  const auto eq = text.find('=');
  const std::string key = trim(text.substr(0, eq));
  require(eq != std::string::npos && !key.empty(), "override '", text,
          "' must look like section.key=value (e.g. attention.rope.base=500000)");
  const std::string val = trim(text.substr(eq + 1));
  std::vector<std::string> parts;
  for (size_t b = 0;;) {
    const auto dot = key.find('.', b);
    parts.push_back(key.substr(b, dot - b));
    require(valid_key_part(parts.back()), "override '", text, "': '", key,
            "' is not a dotted key (letters, digits, _ and - between dots)");
    if (dot == std::string::npos) break;
    b = dot + 1;
  }
  // The value as TOML, with the override as its source. Which type the key wants is known
  // only when a Table reads the document: a string key then takes the text after '='
  // verbatim (override_string), any other key this parsed value. Text that is not one TOML
  // value (runs/x, a b, nothing) is kept as a string; a key of another type reports it
  // (unparsed_override), naming the key.
  const std::string source = override_source(text);
  std::optional<toml::table> parsed = parse_value(val, source);
  if (!parsed) {
    try {
      parsed = toml::parse("v = " + format_value(val), source);
    } catch (const toml::parse_error& e) {  // not UTF-8, say
      throw_error("override '", text, "': cannot read the value (", e.description(), ")");
    }
  }
  toml::table* t = &root.impl().t;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto [it, inserted] = t->insert(parts[i], toml::table{});
    t = it->second.as_table();
    std::string prefix = parts[0];
    for (size_t j = 1; j <= i; ++j) prefix += "." + parts[j];
    require(t != nullptr, "override '", text, "': ", prefix, " is a value, not a table");
  }
  t->insert_or_assign(parts.back(), std::move(*parsed->get("v")));
}

void merge(Document& dst, Document&& src) { merge_tables(dst.impl().t, std::move(src.impl().t)); }

Document load_config(const std::string& path, const std::vector<std::string>& overrides) {
  Document root = path.empty() ? Document{} : parse_file(path);
  for (const auto& o : overrides) apply_override(root, o);
  return root;
}

Document table_from_values(const std::vector<std::pair<std::string, Value>>& values) {
  Document d;
  for (const auto& [key, v] : values) {
    toml::table* t = &d.impl().t;
    size_t b = 0;
    for (auto dot = key.find('.'); dot != std::string::npos; dot = key.find('.', b)) {
      auto [it, inserted] = t->insert(key.substr(b, dot - b), toml::table{});
      t = it->second.as_table();
      require(t != nullptr, "'", key.substr(0, dot), "' is both a value and a table");
      b = dot + 1;
    }
    std::visit([&](const auto& x) { t->insert_or_assign(key.substr(b), x); }, v);
  }
  return d;
}

}  // namespace lcr::config
