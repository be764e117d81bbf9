// `lcr inspect runs/<name>` (or a run.h5): the run file's summary — config, loss curve and
// last metrics, newest evaluation, per-head prior table (core/train/inspect.hpp). Reads a
// file that is still being written (SWMR) or whose writer died.
#include <iostream>

#include "core/cli/verbs.hpp"
#include "core/train/inspect.hpp"

namespace lcr::cli {

void add_inspect_verb(CLI::App& app, Runner& run) {
  auto path = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "Summarise a run file: config, loss curve, evaluation, per-head priors");
  sub->add_option("run", *path, "run directory (runs/<name>) or run.h5 file")
      ->required()
      ->check(CLI::ExistingPath);
  sub->callback([path, &run] {
    run = [path] {
      train::inspect_run(*path, std::cout);
      return 0;
    };
  });
}

}  // namespace lcr::cli
