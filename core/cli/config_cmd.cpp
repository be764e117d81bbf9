// `lcr config`: prints the fully resolved configuration (every default filled in, every
// section: model, attention, train, data, task, eval, parallel, run) as TOML, after a config
// file and overrides: a way to see every key, and to check a config. The text is the one a
// run writes as runs/<name>/config.toml (config::train_config_toml).
#include <iostream>

#include "core/cli/verbs.hpp"
#include "core/config/train_config.hpp"

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
      // A TOML comment, so the output still reads back as a config.
      if (o->config.empty())
        std::cout << "# lcr's built-in defaults (no -c): experiments/configs/default.toml, the\n"
                     "# default job, differs from them; `lcr config -c FILE` resolves a file.\n";
      else
        std::cout << "# " << o->config << ", resolved: every default filled in\n";
      std::cout << config::train_config_toml(config::load_train_config(o->config, o->overrides));
      return 0;
    };
  });
}

}  // namespace lcr::cli
