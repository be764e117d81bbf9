#!/usr/bin/env bash
# A new user on this machine (docs/install.md, cluster route): creates the account
# lcr-newuser afresh (no root, no apt-get, a clean environment), gives it a copy of the
# checkout (and of a Kokkos, when LCR_NEW_USER_KOKKOS names an install prefix, e.g. a Kokkos
# 4.x with OpenMP), and runs new_user_steps.sh as that user. The SLURM step uses the local
# test cluster of BUILD_DIR (tests/slurm) when it runs. A failure leaves the account and
# its home (logs in ~lcr-newuser) for a look; the next run starts them afresh.
#   check_new_user.sh SOURCE_DIR BUILD_DIR
# Exit 77 (skipped) when not root: creating the user needs it.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2
  exit 2
fi
src=$(realpath "$1")
build=$(realpath "$2")
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: creating the test user needs root (CI runs as root)"
  exit 77
fi
user=lcr-newuser
if id "$user" >/dev/null 2>&1; then userdel -r "$user" 2>/dev/null || true; fi
useradd -m -s /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
as_user() { runuser -u "$user" -- "$@"; }

# The checkout as the user would have cloned it (tracked and new files, nothing ignored).
as_user mkdir "$home/lcr"
git -C "$src" ls-files -z --cached --others --exclude-standard |
  tar -C "$src" --null -T - -cf - | as_user tar -C "$home/lcr" -xf -
kokkos_arg=()
if [ -n "${LCR_NEW_USER_KOKKOS:-}" ]; then
  as_user mkdir "$home/kokkos"
  tar -C "$LCR_NEW_USER_KOKKOS" -cf - . | as_user tar -C "$home/kokkos" -xf -
  kokkos_arg=("$home/kokkos")
fi
cluster=$(/usr/bin/python3 -c "import sys; sys.path.insert(0, '$src/tests/slurm')
from slurm_common import cluster_dir; print(cluster_dir('$build'))")
env=(HOME="$home" USER="$user" LOGNAME="$user" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8
  LCR_NEW_USER_STEPS="${LCR_NEW_USER_STEPS:-}")
[ -f "$cluster/slurm.conf" ] && env+=(SLURM_CONF="$cluster/slurm.conf")
cd "$home"
as_user env -i "${env[@]}" bash "$home/lcr/tests/install/new_user_steps.sh" "$home/lcr" "${kokkos_arg[@]}"
# Passed: the account and its ~1 GB home go (LCR_KEEP_TEST_DIRS=1 keeps them to look at).
cd /
if [ "${LCR_KEEP_TEST_DIRS:-0}" != 1 ]; then userdel -r "$user" 2>/dev/null || true; fi
