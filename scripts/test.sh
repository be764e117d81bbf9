#!/usr/bin/env bash
# The test command (README; .ci/run calls exactly this): installs missing Debian packages
# (when root), builds, and runs the whole suite with ctest: unit, numerical, multi-rank
# (mpirun) and end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then scripts/install-deps.sh; fi
# Where the CUDA toolkit is installed (nvcc on PATH) the CUDA build too, even without a GPU:
# the kernels must compile, for sm_90a and in their form without wgmma (compute_80 PTX), their
# SIMT-emulator tests run on the CPU (CudaSdpaWgmmaEmu, CudaSdpaWgmmaBwdEmu, PaTH's *Emu*),
# and the GPU tests skip with a message. LCR_TEST_CUDA=0 builds without it.
cuda=()
if [ "${LCR_TEST_CUDA:-1}" != 0 ] && command -v nvcc >/dev/null; then
  cuda=(-DLCR_ENABLE_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=80-virtual;90a-real")
  echo "test.sh: nvcc found, building with CUDA (LCR_TEST_CUDA=0 to skip)"
fi
scripts/build.sh "${cuda[@]}"
# mpirun as root (CI runs as root) needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
cd "${LCR_BUILD_DIR:-build}"
ctest --output-on-failure --parallel "$(nproc)" --timeout 1800 "$@"
