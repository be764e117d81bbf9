#!/usr/bin/env bash
# A short device call: the model and SDPA suites, then the 125M model at 64K with cuDNN
# attention and bf16 projections (RUNS as in train_64k.sh). Bundle "suites" (cudnn_suites.sh).
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init suites
timeout 200 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
timeout 120 "$B/lcr_cuda_sdpa_tests" --gtest_color=no >"$OUT/sdpa.log" 2>&1
RUNS=${RUNS:-nope:auto:true} bash scripts/device/train_64k.sh 2>&1 | tee "$OUT/train_64k.txt"
suite_summary model sdpa
