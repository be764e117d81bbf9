#!/usr/bin/env bash
# One device call (nvidia-h200): the SDPA, lanes and model suites on the GPU, then
# goat_profile.sh (the schemes against NoPE and GOAT's kernels one by one). Bundle NAME
# holds lcr_cuda_sdpa_tests, lcr_cuda_attention_tests, lcr_cuda_model_tests,
# bench_cuda_attention:
#   run(command="tar xJf .devbundle/gpack/NAME.tar.xz -C .devbundle &&
#                BUNDLE=.devbundle/NAME bash scripts/device/lanes_check.sh",
#       carry=[".devbundle/gpack"])
set -u
source "$(dirname "$0")/common.sh"
device_init lanes_check
CUDA_VISIBLE_DEVICES=0 timeout 100 "$B/lcr_cuda_sdpa_tests" --gtest_color=no >"$OUT/sdpa.log" 2>&1 &
shard 0 "$B/lcr_cuda_attention_tests" lanes
wait
CUDA_VISIBLE_DEVICES=0 timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
suite_summary sdpa lanes model
echo "suites done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
main_out=$OUT
OUT=$OUT/profile SCHEMES=${SCHEMES:-nope,goat,rope,alibi,fox,pope} \
  bash "$(dirname "$0")/goat_profile.sh"
cat "$main_out/profile/summary.txt" >>"$main_out/summary.txt"
(cd "$main_out" && tar czf logs.tgz ./*.log && rm -f ./*.log)
