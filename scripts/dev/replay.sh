#!/usr/bin/env bash
# scripts/dev/replay.sh: gtest cases replayed on one or more bundles, to tell a failure that
# is a tail of the bf16 error from a regression. (Exploration, scripts/dev/README.md: nothing
# depends on it.) Two modes:
#   seeds  "SEED:FILTER ..." EXE BUNDLE...   each FILTER run with LCR_TEST_SEED=SEED (the run
#          seed a failing suite printed) on every bundle: the same draw on old and new builds
#   repeat N FILTER EXE BUNDLE...             FILTER N times with fresh seeds on every bundle
#          (gtest shards, like the harness), then the passed/failed counts and the largest
#          [ratio] lines (GPU error over the naive bf16 error) of each
# Pack here: LCR_GPU_BUNDLE=old experiments/bench/gpu.sh pack build-old lcr_cuda_attention_tests
# (and the new build as "gpu"), then on the GPU machine, e.g.:
#   run(command="bash scripts/dev/replay.sh repeat 4 '*goat*' lcr_cuda_attention_tests old gpu",
#       carry=[".devbundle/gpack"])
# Writes $OUT/replay.log; prints the counts and lines last. REPLAY_TIMEOUT (default 150 s).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../experiments/bench/gpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../experiments/bench/gpu_lib.sh"
cd "$LCR_ROOT" || exit 1
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
[[ $# -ge 4 ]] || usage
mode=$1
gpu_env
OUT=${OUT:-/tmp/lcr_replay}
mkdir -p "$OUT"
: >"$OUT/replay.log"
echo "replay: $(gpu_label); $*"
lim=${REPLAY_TIMEOUT:-150}
case $mode in
  seeds)
    cases=$2 exe=$3
    shift 3
    for name in "$@"; do
      if ! gpu_unpack "$name" || [[ ! -x $B/$exe ]]; then
        echo "replay: bundle $name has no $exe" >&2
        continue
      fi
      for c in $cases; do
        echo "== $name seed ${c%%:*} ${c#*:}" | tee -a "$OUT/replay.log"
        CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} LCR_TEST_SEED=${c%%:*} timeout -k 5 "$lim" \
          "$B/$exe" --gtest_filter="${c#*:}" --gtest_color=no 2>&1 | tee -a "$OUT/replay.log" |
          grep -E "error|\[ratio\]|OK \]|FAILED  \]" | cut -c1-200
      done
    done
    ;;
  repeat)
    n=$2 filter=$3 exe=$4
    shift 4
    shards=$(($(nproc) < 8 ? $(nproc) : 8))
    for name in "$@"; do
      if ! gpu_unpack "$name" || [[ ! -x $B/$exe ]]; then
        echo "replay: bundle $name has no $exe" >&2
        continue
      fi
      gtest_shards "$OUT/rep.log" "$lim" "$shards" "$filter" "$B/$exe" --gtest_repeat="$n"
      { echo "== $name: $filter x $n: $(gtest_count "$OUT/rep.log")"
        grep -h '^\[ratio\]' "$OUT/rep.log" | sort -k7 -g -r | head -6; } | tee -a "$OUT/replay.log"
      cat "$OUT/rep.log" >>"$OUT/replay.log" && rm -f "$OUT/rep.log"
    done
    ;;
  *) usage ;;
esac
