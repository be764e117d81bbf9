#!/usr/bin/env bash
# The SDPA suite and the lanes suite's cuDNN cases only (a short recheck of the cuDNN unit).
# Bundle "suites" (cudnn_suites.sh).
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init suites
timeout 120 "$B/lcr_cuda_sdpa_tests" --gtest_color=no >"$OUT/sdpa.log" 2>&1
shard 0 "$B/lcr_cuda_attention_tests" lanes '*Cudnn*'
suite_summary sdpa lanes
