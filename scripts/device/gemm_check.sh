#!/usr/bin/env bash
# After the padded LM head and the bf16 projections (core/model/cuda): the model suite, the
# default config (NoPE) with train.gemm_bf16 on the GPU against the CPU, and the 125M model
# at 64K tokens with TF32 and with bf16 projections (scripts/device/train_64k.sh). Bundle
# "suites" (scripts/device/cudnn_suites.sh) with lcr and lcr_cuda_model_tests.
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init suites
quick=(train.log_every=5 eval.every=0 eval.at_end=false train.steps=60 run.overwrite=true
  parallel.cp=1 attention.scheme=nope)
CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=12 timeout 200 "$B/lcr" train --config \
  experiments/configs/default.toml "${quick[@]}" run.dir='"runs/cpu_nope"' >"$OUT/train_cpu.log" 2>&1 &
timeout 200 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
timeout 150 "$B/lcr" train --config experiments/configs/default.toml "${quick[@]}" \
  train.device=cuda train.gemm_bf16=true run.dir='"runs/gpu_bf16"' >"$OUT/train_gpu.log" 2>&1
RUNS="nope:auto:false nope:auto:true" bash scripts/device/train_64k.sh 2>&1 | tee "$OUT/train_64k.txt"
wait
suite_summary model
train_tail train_cpu train_gpu
compare_runs gpu_bf16 cpu_nope "NoPE default config: GPU (cuDNN attention, bf16 projections) vs CPU"
