#!/usr/bin/env bash
# The main job on its small built-in default: installs the Debian packages (as root),
# builds lcr, and runs it. Extra arguments go to the job.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then scripts/install-deps.sh; else
  echo "setup-and-run.sh: not root, skipping package installation (run scripts/install-deps.sh as root)"
fi
scripts/build.sh
build=${LCR_BUILD_DIR:-build}
# Every dot-product scheme, Kokkos forward+backward vs the float64 reference.
exec "$build/core/cli/lcr" demo "$@"
