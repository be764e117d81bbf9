#!/usr/bin/env bash
# The main job on its small built-in default: installs the Debian packages (as root),
# builds lcr, trains the default model (experiments/configs/default.toml: a tiny GOAT model
# on the copy-mixture task, context parallel over 2 MPI ranks; about two minutes on 2
# cores), evaluates it, and prints the run file's summary (`lcr inspect`: loss curve and
# per-head GOAT prior table). Extra arguments are config overrides for the training run,
# e.g. scripts/setup-and-run.sh train.steps=600 run.name=longer
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then scripts/install-deps.sh; else
  echo "setup-and-run.sh: not root, skipping package installation (run scripts/install-deps.sh as root)"
fi
scripts/build.sh
build=${LCR_BUILD_DIR:-build}
# The run directory the overrides select (run.name / run.dir), for lcr inspect.
run_dir=runs/default
for a in "$@"; do
  case "$a" in
    run.name=*) run_dir="runs/$(echo "${a#run.name=}" | tr -d '"')" ;;
    run.dir=*) run_dir="$(echo "${a#run.dir=}" | tr -d '"')" ;;
  esac
done
mpi_flags=(--oversubscribe)
if [ "$(id -u)" -eq 0 ]; then mpi_flags+=(--allow-run-as-root); fi
# run.overwrite=true: each invocation is a fresh run (pass run.overwrite=false to resume).
mpirun -np 2 "${mpi_flags[@]}" "$build/core/cli/lcr" train \
  --config experiments/configs/default.toml run.overwrite=true "$@"
exec "$build/core/cli/lcr" inspect "$run_dir"
