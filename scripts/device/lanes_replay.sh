#!/usr/bin/env bash
# Short device call: replays lanes-test failures by seed on a new and an old build (is a
# failure a tail of the bf16 error or a regression?), runs the SDPA and model suites and a
# fresh lanes run of the new build, then times NoPE and PoPE through the full API alone.
#   NEW=.devbundle/fin2 OLD=.devbundle/old REPLAY="SEED:FILTER ..." bash scripts/device/lanes_replay.sh
set -u
source "$(dirname "$0")/common.sh"
OUT=${OUT:-/tmp/lanes_replay}
mkdir -p "$OUT"
CUDA_VISIBLE_DEVICES=0 timeout 100 $NEW/bin/lcr_cuda_sdpa_tests --gtest_color=no >"$OUT/sdpa.log" 2>&1 &&
  CUDA_VISIBLE_DEVICES=0 timeout 150 $NEW/bin/lcr_cuda_model_tests --gtest_color=no >"$OUT/model.log" 2>&1 &
g0=$!
for r in $REPLAY; do
  for v in "$NEW" "$OLD"; do
    echo "== ${r%%:*} ${r#*:} $v"
    CUDA_VISIBLE_DEVICES=1 LCR_TEST_SEED=${r%%:*} timeout 60 $v/bin/lcr_cuda_attention_tests \
      --gtest_filter="*${r#*:}" --gtest_color=no 2>&1 | grep -E "^\[  (PASSED|FAILED) |error [0-9]" | head -4
  done
done
shard 1 $NEW/bin/lcr_cuda_attention_tests lanes
wait $g0
suite_summary sdpa model lanes
grep -h '^\[ [a-z_0-9]* \]' "$OUT/model.log" | head -14
CUDA_VISIBLE_DEVICES=0 timeout 100 $NEW/bin/bench_cuda_attention --schemes nope,goat,pope \
  --shapes 1x16x16384x64,1x16x16384x128,1x8x65536x64 2>&1 | tee "$OUT/lanes_bench.txt"
