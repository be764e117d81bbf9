#!/usr/bin/env bash
# Configures and builds lcr (Release) into build/ (or $LCR_BUILD_DIR). Extra arguments go
# to cmake, e.g. scripts/build.sh -DLCR_ENABLE_CUDA=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${LCR_BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" --parallel "$(nproc)"
