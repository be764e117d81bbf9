// `lcr train [--config file.toml] [section.key=value ...]`: trains (or resumes) the run the
// config describes, in runs/<name>/ (docs/training.md). Under mpirun the ranks form the
// dp x cp grid of [parallel]; a plain `lcr train` is one rank. Exit status 0 when the run
// completes or stops on SIGTERM / SIGUSR1 with a checkpoint (requeue it with the same
// command), 1 for a bad config or a failed run (non-finite loss, I/O).
#include <spdlog/spdlog.h>

#include <iostream>

#include "core/cli/verbs.hpp"
#include "core/train/setup.hpp"
#include "core/train/trainer.hpp"

namespace lcr::cli {

void add_train_verb(CLI::App& app, Runner& run) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    bool check = false;
    int ranks = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train a model: config file plus section.key=value overrides (docs/training.md)");
  sub->add_option("-c,--config", o->config, "TOML config, e.g. experiments/configs/default.toml")
      ->check(CLI::ExistingFile);
  sub->add_option("overrides", o->overrides,
                  "overrides, e.g. train.steps=100 attention.scheme=pope run.name=try1");
  sub->add_flag("--check", o->check,
                "check the config and the data, print the resolved config, do not train");
  sub->add_option("--ranks", o->ranks,
                  "with --check: check for a job of N ranks instead of this one (lcr-submit "
                  "does before sbatch)")
      ->check(CLI::PositiveNumber);
  sub->footer(
      "Runs under mpirun as dp x cp ranks ([parallel]); writes runs/<name>/{config.toml, run.h5, "
      "ckpt/}. A run directory with a checkpoint is resumed. SIGTERM / SIGUSR1: checkpoint and "
      "exit 0.");
  sub->callback([o, &run] {
    run = [o] {
      const TrainConfig cfg = config::load_train_config(o->config, o->overrides);
      if (o->check) {
        const train::Setup s = train::prepare(cfg, o->ranks);
        if (s.writer()) std::cout << s.config_toml;
        return 0;
      }
      require(o->ranks == 0,
              "--ranks goes with --check; a training job has the ranks mpirun "
              "gives it");
      std::string cmd = "lcr train";
      if (!o->config.empty()) cmd += " --config " + o->config;
      for (const auto& x : o->overrides) cmd += " " + x;
      const train::TrainOutcome out = train::train(cfg, cmd);
      (void)out;
      return 0;
    };
  });
}

}  // namespace lcr::cli
