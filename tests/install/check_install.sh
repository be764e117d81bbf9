#!/usr/bin/env bash
# `cmake --install` as a user gets it (docs/install.md): installs BUILD_DIR into a prefix,
# moves the prefix elsewhere (the install must be relocatable), then checks that no
# installed file names the source, build or original install tree, that the installed
# lcr, lcr-submit and lcr-analyze work from the moved prefix (lcr-submit picking the
# templates there and the lcr beside it), and that a project of its own finds lcr with
# find_package(lcr) and runs one attention call (tests/install/consumer).
#   check_install.sh SOURCE_DIR BUILD_DIR WORK_DIR [CXX_COMPILER]
# Leaves the moved prefix in WORK_DIR/prefix for check_pip.sh.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR WORK_DIR [CXX_COMPILER]" >&2
  exit 2
fi
src=$(realpath "$1")
build=$(realpath "$2")
rm -rf "$3"
mkdir -p "$3"
work=$(realpath "$3")
cxx=${4:-c++}
fail() {
  echo "FAIL: $*"
  exit 1
}
ok() { echo "ok: $*"; }

cmake --install "$build" --prefix "$work/staged" >"$work/install.log"
mv "$work/staged" "$work/prefix"
p=$work/prefix
ok "installed and moved to $p"

for f in bin/lcr bin/lcr-submit bin/lcr-analyze share/lcr/slurm/templates/single-node-cpu.sbatch \
  share/lcr/slurm/presets/64k.conf share/lcr/slurm/lib/job.sh \
  share/lcr/experiments/configs/default.toml share/lcr/analysis/pyproject.toml \
  share/doc/lcr/install.md lib/cmake/lcr/lcrConfig.cmake lib/cmake/lcr/lcrTargets.cmake \
  include/lcr/kernels/attention/attention.hpp; do
  [ -e "$p/$f" ] || fail "$f is not installed"
done
ok "every expected file is installed"

# -a: binaries and static libraries too (a CUDA build's device code names its .cu files
# only with -DLCR_CUDA_LINEINFO=ON, which a build for installing leaves off).
leaks=0
while IFS= read -r f; do
  names=$(strings -a "$f" | grep -F -e "$src" -e "$build" -e "$work/staged" | sort -u)
  if [ -n "$names" ]; then
    echo "$f names: $names"
    leaks=1
  fi
done < <(grep -rlaF -e "$src" -e "$build" -e "$work/staged" "$p" || true)
[ "$leaks" = 0 ] || fail "the files above name the source tree, build tree or original prefix"
ok "no installed file names $src, $build or the original prefix"

"$p/bin/lcr" config --config "$p/share/lcr/experiments/configs/default.toml" \
  attention.scheme=rope >"$work/config.toml"
grep -q 'scheme = "rope"' "$work/config.toml" || fail "lcr config did not resolve the override"
ok "installed lcr resolves the installed default config"

(cd "$work" && "$p/bin/lcr-submit" train --cpu --cp 2 --dry-run --name t -- \
  --config "$p/share/lcr/experiments/configs/default.toml") >"$work/submit.txt"
grep -qF "LCR_EXE=$p/bin/lcr," "$work/submit.txt" || fail "lcr-submit did not pick $p/bin/lcr: $(cat "$work/submit.txt")"
grep -qF " $p/share/lcr/slurm/templates/single-node-cpu.sbatch " "$work/submit.txt" ||
  fail "lcr-submit did not pick the installed template: $(cat "$work/submit.txt")"
ok "installed lcr-submit uses the lcr beside it and the templates in the prefix"

"$p/bin/lcr-analyze" scaling-model --nodes 1,2 >"$work/model.txt" ||
  fail "installed lcr-analyze (Debian's python3) failed"
ok "installed lcr-analyze runs"

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src/tests/install/consumer" -B "$work/consumer" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$p" >"$work/consumer.log" ||
  fail "find_package(lcr) failed: $(tail -20 "$work/consumer.log")"
cmake --build "$work/consumer" >>"$work/consumer.log" || fail "consumer build: $(tail -20 "$work/consumer.log")"
"$work/consumer/consumer" | tee "$work/consumer.txt"
grep -q ", ok$" "$work/consumer.txt" || fail "the consumer's attention call was wrong"
ok "a project of its own finds lcr and runs one attention call"
