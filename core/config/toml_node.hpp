#pragma once
// Internal to the config .cpp files (lcr_config_text, built without Kokkos): the toml++
// types behind Document and Table. Nothing outside core/config includes this.
#include <toml++/toml.h>

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

}  // namespace lcr::config
