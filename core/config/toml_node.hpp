#pragma once
// Internal to the config .cpp files (lcr_config_text, built without Kokkos): the toml++
// types behind Document and Table. Nothing outside core/config includes this.
#include <toml++/toml.h>

#include <optional>
#include <string>

#include "core/config/document.hpp"

namespace lcr::config {

struct Document::Impl {
  toml::table t;
};

// A value node as Table's field setters see it.
struct Node {
  const toml::node& n;
};

// " (config.toml line 3)" or " (command-line override 'a.b=c')" for a parsed node,
// "" otherwise.
std::string where(const toml::node& n);

// For a value set by a command-line override (apply_override): the text after '=', trimmed;
// none for a value from a file or from code.
std::optional<std::string> override_text(const toml::node& n);
// What a string key takes from a command-line override: the text after '=' verbatim
// (run.dir=runs/x is "runs/x"; a date-like value stays text), or the content of a quoted
// TOML string (run.dir="runs/x", 'runs/x'); none for a value from a file or code.
std::optional<std::string> override_string(const toml::node& n);
// For an override whose text is not one TOML value (runs/x, a b, nothing after '='): that
// text, held as a string until a key of another type reports it; none otherwise.
std::optional<std::string> unparsed_override(const toml::node& n);

}  // namespace lcr::config
