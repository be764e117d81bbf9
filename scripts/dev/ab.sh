#!/usr/bin/env bash
# scripts/dev/ab.sh: an A/B of two builds in one device call. One benchmark command runs
# alternately from bundle A and bundle B (A B A B ...), ROUNDS times each, so drift of the
# machine (clocks, heat, neighbours) hits both alike; compare the rounds, not one pair.
# (Exploration, scripts/dev/README.md: nothing depends on it.)
#
# Pack the two builds here under two names (only the executables the command needs):
#   LCR_GPU_BUNDLE=base experiments/bench/gpu.sh pack build-base bench_cuda_sdpa
#   LCR_GPU_BUNDLE=new  experiments/bench/gpu.sh pack build-cuda bench_cuda_sdpa
# then, on the GPU machine:
#   run(command="bash scripts/dev/ab.sh base new 3 bench_cuda_sdpa --B 1 --H 16 --L 16384 --D 64 --bwd-only --reps 10",
#       carry=[".devbundle/gpack"])
# Usage: scripts/dev/ab.sh A B ROUNDS EXE [ARGS...]
# AB_GREP (an extended regex that the start of an output line must match, e.g. 'lcr,bwd')
# keeps only those lines in the summary; AB_TIMEOUT
# (default 150 s) bounds each run. Writes $OUT/ab.log (every line, tagged "A1 |", "B1 |", ...);
# prints the kept lines last.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../experiments/bench/gpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../experiments/bench/gpu_lib.sh"
cd "$LCR_ROOT" || exit 1
[[ $# -ge 4 ]] || { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
a=$1 b=$2 rounds=$3 exe=$4
shift 4
gpu_env
OUT=${OUT:-/tmp/lcr_ab}
mkdir -p "$OUT"
declare -A bin
for name in "$a" "$b"; do
  if ! gpu_unpack "$name" || [[ ! -x $B/$exe ]]; then
    echo "ab: bundle $name has no $exe (.devbundle/gpack/$name.tar.xz)" >&2
    exit 2
  fi
  bin[$name]=$B/$exe
done
echo "ab: $(gpu_label); $exe $*; A = $a, B = $b, $rounds rounds" >"$OUT/ab.log"
for ((r = 1; r <= rounds; r++)); do
  for tag in A B; do
    name=$a
    [[ $tag == B ]] && name=$b
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} timeout -k 5 "${AB_TIMEOUT:-150}" "${bin[$name]}" "$@" 2>&1 |
      sed "s/^/$tag$r | /" >>"$OUT/ab.log"
  done
done
grep -E "^ab:|^[AB][0-9]+ \| (${AB_GREP:-.*})" "$OUT/ab.log"
