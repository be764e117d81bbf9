// The `lcr` command: `lcr <verb> [options] [section.key=value ...]`, --help on each verb.
// The command line is parsed first; Kokkos (and MPI, when a launcher started us) come up
// only for the verb that runs, so --help and usage errors never touch them.
#include <mpi.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <cstdlib>
#include <cstring>

#include "core/cli/verbs.hpp"
#include "core/train/setup.hpp"
#include "kernels/base/error.hpp"

namespace {

// mpirun / srun set these; a plain `lcr demo` runs without MPI.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

// srun without an MPI bootstrap (no --mpi=pmix, MpiDefault=none) starts SLURM_STEP_NUM_TASKS
// copies that each see no MPI peers and would silently run as independent one-rank jobs.
int srun_tasks_without_mpi() {
  const char* n = std::getenv("SLURM_STEP_NUM_TASKS");
  const int tasks = n ? std::atoi(n) : 0;
  return tasks > 1 && !launched_by_mpi() ? tasks : 0;
}

// Log colours only where a person reads them. NO_COLOR (no-color.org) or LCR_COLOR=never turn
// them off, LCR_COLOR=always on; otherwise colour needs a terminal on stdout and no MPI
// launcher: mpirun gives each rank a pseudo-terminal even when the job's output goes to a
// file (a SLURM log), so a rank cannot tell, and escape codes there would break grep.
spdlog::color_mode log_colour() {
  const char* forced = std::getenv("LCR_COLOR");
  if (forced && std::strcmp(forced, "always") == 0) return spdlog::color_mode::always;
  if (forced && std::strcmp(forced, "never") == 0) return spdlog::color_mode::never;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return spdlog::color_mode::never;
  return isatty(STDOUT_FILENO) && !launched_by_mpi() ? spdlog::color_mode::always
                                                     : spdlog::color_mode::never;
}

struct MpiGuard {
  bool active = false;
  int rank = 0, size = 1;
  MpiGuard(int* argc, char*** argv) {
    if (!launched_by_mpi()) return;
    MPI_Init(argc, argv);
    active = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  ~MpiGuard() {
    if (active) MPI_Finalize();
  }
};

}  // namespace

int main(int argc, char** argv) {
  // --kokkos-* options go to Kokkos, everything else to CLI11.
  std::vector<char*> kokkos_args{argv[0]}, cli_args{argv[0]};
  for (int i = 1; i < argc; ++i)
    (std::strncmp(argv[i], "--kokkos-", 9) == 0 ? kokkos_args : cli_args).push_back(argv[i]);

  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stdout_color_sink_mt>(log_colour())));
  CLI::App app{"lcr: long-context attention research platform (Kokkos, MPI, HDF5)", "lcr"};
  app.require_subcommand(1);
  app.set_version_flag(
      "--version", "lcr " + lcr::train::lcr_version() + " (" + lcr::train::git_revision() + ")");
  app.footer(
      "Kokkos options (--kokkos-num-threads=N, ...) are passed to Kokkos. Log colours: on a "
      "terminal only; NO_COLOR or LCR_COLOR=never|always decide otherwise.");
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "debug log lines");
  app.add_flag("-q,--quiet", quiet, "warnings and errors only");
  lcr::cli::Runner run;
  lcr::cli::add_attention_verb(app, run);
  lcr::cli::add_ring_attention_verb(app, run);
  lcr::cli::add_demo_verb(app, run);
  lcr::cli::add_config_verb(app, run);
  lcr::cli::add_train_verb(app, run);
  lcr::cli::add_eval_verb(app, run);
  lcr::cli::add_inspect_verb(app, run);
  lcr::cli::add_scaling_point_verb(app, run);
  lcr::cli::add_shards_verb(app, run);
  try {
    app.parse(int(cli_args.size()), cli_args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  spdlog::set_level(verbose ? spdlog::level::debug
                    : quiet ? spdlog::level::warn
                            : spdlog::level::info);

  if (const int n = srun_tasks_without_mpi()) {
    spdlog::error(
        "srun started {} tasks without an MPI bootstrap, so each would run alone: "
        "launch with `srun --mpi=pmix` (docs/slurm.md) or mpirun",
        n);
    return 1;
  }
  int kargc = int(kokkos_args.size());
  char** kargv = kokkos_args.data();
  MpiGuard mpi(&kargc, &kargv);
  if (mpi.size > 1)
    spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [rank {}] [%^%l%$] %v", mpi.rank));
  Kokkos::ScopeGuard kokkos(kargc, kargv);
  try {
    return run();
  } catch (const lcr::Error& e) {
    spdlog::error("{}", e.what());
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("unexpected failure: {}", e.what());
    return 2;
  }
}
