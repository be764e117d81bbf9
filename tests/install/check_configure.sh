#!/usr/bin/env bash
# The configure step as a cluster user meets it (docs/install.md): a missing dependency
# stops it with a message naming the dependency and the fix; without GoogleTest and Google
# Benchmark it succeeds with the tests and benchmarks left out, and the summary says so.
# A dependency is made missing with CMAKE_DISABLE_FIND_PACKAGE_<Pkg>.
#   check_configure.sh SOURCE_DIR WORK_DIR
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 SOURCE_DIR WORK_DIR" >&2
  exit 2
fi
src=$1
rm -rf "$2"
mkdir -p "$2"
work=$(realpath "$2")
fail() {
  echo "FAIL: $*"
  exit 1
}

# configure NAME ARGS...: configures into WORK/NAME; output in WORK/NAME.log (one line per
# message: CMake wraps long ones); the exit status is cmake's.
configure() {
  local name=$1
  shift
  local rc=0
  cmake -S "$src" -B "$work/$name" "$@" >"$work/$name.raw" 2>&1 || rc=$?
  tr '\n' ' ' <"$work/$name.raw" | tr -s ' ' >"$work/$name.log"
  return $rc
}

for dep in Kokkos:"-DKokkos_ROOT=<prefix>" MPI:"mpicxx" HDF5:"HDF5_ROOT" tomlplusplus:"CMAKE_PREFIX_PATH"; do
  pkg=${dep%%:*}
  fix=${dep#*:}
  if configure "no-$pkg" -DCMAKE_DISABLE_FIND_PACKAGE_"$pkg"=ON; then
    fail "configure without $pkg succeeded"
  fi
  grep -qF "lcr: $pkg" "$work/no-$pkg.log" || fail "no 'lcr: $pkg' error: $(tail -c 600 "$work/no-$pkg.log")"
  grep -qF -e "$fix" "$work/no-$pkg.log" || fail "the $pkg error does not name the fix ($fix)"
  echo "ok: without $pkg, configure stops: $(grep -o "lcr: ${pkg}.\{0,60\}" "$work/no-$pkg.log" | head -1)..."
done

configure no-tests -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON ||
  fail "configure without GoogleTest and Google Benchmark failed: $(tail -c 600 "$work/no-tests.log")"
sed -n '/configuration:/,/install to/p' "$work/no-tests.raw"
grep -q "tests off: GoogleTest not found" "$work/no-tests.log" || fail "the summary does not say the tests are off"
grep -q "benchmarks off: Google Benchmark not found" "$work/no-tests.log" || fail "the summary does not say the benchmarks are off"
[ ! -e "$work/no-tests/CTestTestfile.cmake" ] || fail "tests were configured without GoogleTest"
echo "ok: without GoogleTest and Google Benchmark, configure succeeds with both left out"
