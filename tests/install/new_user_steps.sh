#!/usr/bin/env bash
# The cluster route of docs/install.md, step by step, as a user without root would take it:
# configure and build against the Kokkos, MPI and HDF5 found (a Kokkos in the user's home
# when KOKKOS_ROOT is given), install to ~/opt/lcr, run the default job from the installed
# lcr, submit it through the installed lcr-submit (when SLURM_CONF names a cluster), open
# its report with a pip-installed lcr-analyze, and build a project of one's own against
# the installed package. check_new_user.sh runs it as a fresh user; by hand:
#   tests/install/new_user_steps.sh SOURCE_DIR [KOKKOS_ROOT]
# LCR_NEW_USER_STEPS=N shortens the training runs to N steps (the tests use it).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 SOURCE_DIR [KOKKOS_ROOT]" >&2
  exit 2
fi
src=$(realpath "$1")
kokkos=${2:-}
prefix=$HOME/opt/lcr
build=$HOME/lcr-build
fail() {
  echo "FAIL: $*"
  exit 1
}
ok() { echo "ok: $*"; }
steps=()
[ -n "${LCR_NEW_USER_STEPS:-}" ] && steps=("train.steps=$LCR_NEW_USER_STEPS" train.ckpt_every=0 eval.at_end=false)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} # two ranks on a two-core machine

# 1. Build and install (lcr itself; the test suite and benchmarks are the developers').
config=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DLCR_BUILD_TESTS=OFF
  -DLCR_BUILD_BENCHMARKS=OFF)
[ -n "$kokkos" ] && config+=(-DKokkos_ROOT="$kokkos")
command -v ninja >/dev/null && config+=(-G Ninja)
cmake -S "$src" -B "$build" "${config[@]}" >"$HOME/configure.log" || fail "configure: $(tail -20 "$HOME/configure.log")"
sed -n '/lcr .* configuration:/,/install to/p' "$HOME/configure.log"
if [ -n "$kokkos" ]; then
  grep -q "Kokkos .*($kokkos" "$HOME/configure.log" || fail "configure did not use the Kokkos in $kokkos"
fi
cmake --build "$build" --parallel 2 >"$HOME/build.log" || fail "build: $(tail -20 "$HOME/build.log")"
cmake --install "$build" >"$HOME/install.log"
ok "built and installed to $prefix as $(id -un) (uid $(id -u))"

# 2. The default job from the installed lcr, two ranks.
cd "$HOME"
cfg=$prefix/share/lcr/experiments/configs/default.toml
mpirun -np 2 --oversubscribe "$prefix/bin/lcr" train --config "$cfg" run.dir='"runs/default"' \
  run.overwrite=true "${steps[@]}" >"$HOME/train.log" 2>&1 || fail "lcr train: $(tail -20 "$HOME/train.log")"
"$prefix/bin/lcr" inspect runs/default | tail -5
ok "the default job ran from the installed lcr"
run=runs/default

# 3. The same job through the installed lcr-submit, on the SLURM cluster of SLURM_CONF.
if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
  # --restart: a second run of these steps moves the first one's run aside.
  job=$("$prefix/bin/lcr-submit" train --cpu --cp 2 --time 10 --threads-per-rank 1 --restart \
    --name slurm-default -- --config "$cfg" "${steps[@]}")
  echo "submitted job $job"
  state=""
  for _ in $(seq 600); do
    state=$(scontrol -o show job "$job" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
    sleep 1
  done
  log=$(ls runs/slurm-logs/slurm-default-"$job".out 2>/dev/null || true)
  [ "$state" = COMPLETED ] || fail "job $job ended $state: $([ -n "$log" ] && tail -20 "$log")"
  [ -f runs/slurm-default/run.h5 ] || fail "job $job left no runs/slurm-default/run.h5"
  ok "job $job from the installed lcr-submit completed (log $log)"
  run=runs/slurm-default
else
  echo "note: no SLURM cluster (SLURM_CONF unset), the lcr-submit step is left out"
fi

# 4. The analysis tools from pip, in a virtual environment of the user's own.
# Without PyPI, the prefix's own lcr-analyze on Debian's python3 stands in, and says so.
python3 -m venv "$HOME/venv"
analyze=$HOME/venv/bin/lcr-analyze
if ! "$HOME/venv/bin/pip" install --quiet --disable-pip-version-check "$prefix/share/lcr/analysis" \
  >"$HOME/pip.log" 2>&1; then
  "$HOME/venv/bin/pip" download --quiet --no-deps -d "$HOME/probe" hatchling >/dev/null 2>&1 &&
    fail "pip install $prefix/share/lcr/analysis: $(tail -20 "$HOME/pip.log")"
  echo "note: PyPI cannot be reached: $prefix/bin/lcr-analyze (Debian's python3) stands in for pip's"
  analyze=$prefix/bin/lcr-analyze
fi
MPLBACKEND=Agg "$analyze" report "$run" -o "$HOME/report" >"$HOME/report.log" 2>&1 ||
  fail "lcr-analyze report: $(tail -5 "$HOME/report.log")"
[ -s "$HOME/report/report.html" ] || fail "no report.html"
ok "$analyze wrote $HOME/report/report.html from $run"

# 5. A project of one's own against the installed package.
cp -r "$src/tests/install/consumer" "$HOME/consumer"
cmake -S "$HOME/consumer" -B "$HOME/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$HOME/consumer.log" || fail "find_package(lcr): $(tail -20 "$HOME/consumer.log")"
cmake --build "$HOME/consumer-build" >>"$HOME/consumer.log" || fail "consumer: $(tail -20 "$HOME/consumer.log")"
"$HOME/consumer-build/consumer" | tee "$HOME/consumer.txt"
grep -q ", ok$" "$HOME/consumer.txt" || fail "the consumer's attention call was wrong"
ok "a project of its own found lcr in $prefix and ran one attention call"
