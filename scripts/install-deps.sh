#!/usr/bin/env bash
# Installs every Debian package lcr's build, tests and analysis need. Run as root;
# idempotent (apt-get skips what is installed). Debian 12 (bookworm) or newer.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang-format                    # the one formatting configuration (.clang-format)
  libtrilinos-kokkos-dev          # Kokkos 3.4 (Serial backend)
  libopenmpi-dev openmpi-bin      # MPI
  libhdf5-dev hdf5-tools          # run files, checkpoints, attention files (h5clear, h5dump)
  libtomlplusplus-dev libcli11-dev libspdlog-dev libfmt-dev   # configs, command line, logging
  libgtest-dev libgmock-dev libbenchmark-dev                  # tests and benchmarks
  python3 python3-h5py python3-numpy python3-matplotlib      # analysis tools
  python3-venv                    # the pip route of docs/install.md (tests/install)
  slurm-wlm munge                 # SLURM templates, tested on a local cluster (tests/slurm)
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (apt-get install needs it): sudo $0" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps.sh: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
