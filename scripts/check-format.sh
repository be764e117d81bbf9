#!/usr/bin/env bash
# Checks that every C++ / CUDA source follows .clang-format (the one formatting configuration);
# prints the files that do not and how to fix them. Run by ctest (format.clang_format).
# clang-format's output differs between major versions; .clang-format is kept for Debian 12's
# clang-format 14 (scripts/install-deps.sh installs it). Fix: scripts/check-format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format.sh: clang-format not found, check skipped; install it (scripts/install-deps.sh)" >&2
  exit 77  # ctest: skipped (SKIP_RETURN_CODE)
fi
mapfile -t files < <(find core kernels parallel experiments analysis slurm tests \
  -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) |
  sort)
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  echo "check-format.sh: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -ne 0 ]; then
  printf 'check-format.sh: not formatted by .clang-format: %s\n' "${bad[@]}" >&2
  echo "check-format.sh: fix with scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format.sh: ${#files[@]} files follow .clang-format"
