// `lcr config`: prints the fully resolved configuration (every default filled in) as TOML,
// after a config file and overrides: a way to see every key, and to check a config.
#include <iostream>

#include "core/cli/verbs.hpp"
#include "core/config/attention_config.hpp"

namespace lcr::cli {

void add_config_verb(CLI::App& app, Runner& run) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "config", "Print the resolved configuration as TOML, every default filled in");
  sub->add_option("-c,--config", o->config, "TOML file to start from")->check(CLI::ExistingFile);
  sub->add_option("overrides", o->overrides, "overrides, e.g. attention.scheme=goat");
  sub->callback([o, &run] {
    run = [o] {
      const AttentionSpec spec =
          config::attention_spec_from(config::load_config(o->config, o->overrides));
      std::cout << config::attention_spec_toml(spec);
      return 0;
    };
  });
}

}  // namespace lcr::cli
