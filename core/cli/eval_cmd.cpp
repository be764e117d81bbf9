// `lcr eval --run runs/<name> [--step N] [eval.key=value ...]`: evaluates a checkpoint of a
// run with its own config (core/train/eval_run.hpp); prints perplexity per length, task
// accuracy, the passkey grid and the long-context tables. Runs under mpirun like training.
#include <iostream>

#include "core/cli/verbs.hpp"
#include "core/train/eval_run.hpp"

namespace lcr::cli {

void add_eval_verb(CLI::App& app, Runner& run) {
  auto o = std::make_shared<train::EvalCommand>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "Evaluate a run's checkpoint: perplexity vs length, task accuracy, passkey grid, "
      "long-context tasks (eval.longctx)");
  sub->add_option("-r,--run", o->run_dir, "run directory, e.g. runs/default")
      ->required()
      ->check(CLI::ExistingDirectory);
  sub->add_option("-s,--step", o->step, "checkpoint step (default: the newest complete one)");
  sub->add_option("-o,--output", o->output,
                  "also write the results to this JSON file (replaced atomically)");
  sub->add_option(
      "overrides", o->overrides,
      "overrides of the run's config, e.g. eval.max_length_factor=16 eval.passkey=true");
  sub->callback([o, &run] {
    run = [o] {
      train::eval_checkpoint(*o, std::cout);
      return 0;
    };
  });
}

}  // namespace lcr::cli
