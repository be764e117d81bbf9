#pragma once
// The verbs of the `lcr` command. Each verb registers a CLI11 subcommand with its options
// and, when the command line selects it, stores in `run` the function main() calls once
// Kokkos (and MPI, under a launcher) are up. A new verb is one add_*_verb function here
// and one line in main.cpp.
#include <CLI/CLI.hpp>
#include <functional>

namespace lcr::cli {

using Runner = std::function<int()>;  // returns the process exit status

void add_attention_verb(CLI::App& app, Runner& run);       // attention_cmd.cpp
void add_ring_attention_verb(CLI::App& app, Runner& run);  // ring_attention_cmd.cpp
void add_demo_verb(CLI::App& app, Runner& run);            // demo_cmd.cpp
void add_config_verb(CLI::App& app, Runner& run);          // config_cmd.cpp
void add_train_verb(CLI::App& app, Runner& run);           // train_cmd.cpp
void add_eval_verb(CLI::App& app, Runner& run);            // eval_cmd.cpp
void add_inspect_verb(CLI::App& app, Runner& run);         // inspect_cmd.cpp
void add_scaling_point_verb(CLI::App& app, Runner& run);   // scaling_cmd.cpp
void add_shards_verb(CLI::App& app, Runner& run);          // shards_cmd.cpp

}  // namespace lcr::cli
