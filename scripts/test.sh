#!/usr/bin/env bash
# The test command (README; .ci/run calls exactly this): installs missing Debian packages
# (when root), builds, and runs the whole suite with ctest: unit, numerical, multi-rank
# (mpirun) and end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then scripts/install-deps.sh; fi
scripts/build.sh
# mpirun as root (CI runs as root) needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
cd "${LCR_BUILD_DIR:-build}"
ctest --output-on-failure --parallel "$(nproc)" --timeout 1800 "$@"
