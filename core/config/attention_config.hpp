#pragma once
// The [attention] section of a configuration: every AttentionSpec field (spec.hpp) bound
// to a TOML key, so files, command-line overrides and the resolved config.toml of a run
// all name them the same way (docs/config.md lists them).
#include <string>

#include "core/config/table.hpp"
#include "kernels/attention/spec.hpp"

namespace lcr::config {

// Adds [attention] (and its sub-tables rope, goat, pope, numerics) to `root`, bound to
// `spec`. Later sections (model, train, data) bind to the same root.
void bind_attention(Table& root, AttentionSpec& spec);

// The spec a config describes: defaults overwritten by what root["attention"] sets.
// Any other top-level key is an error (this root knows only [attention]).
AttentionSpec attention_spec_from(const Document& root);

// The fully resolved spec as TOML text, every default filled in.
std::string attention_spec_toml(const AttentionSpec& spec);

// Every field as (key relative to [attention], value): ("scheme", "rope"), ("rope.base", 1e4).
std::vector<std::pair<std::string, Value>> attention_spec_values(const AttentionSpec& spec);

}  // namespace lcr::config
