#!/usr/bin/env bash
# Device check of PaTH / PaTH-FoX training on the GPU (one call, nvidia-h200-x2): the model
# suite on GPU 0; a PaTH model on the default task on GPU 1 next to the same run on the CPU
# (losses compared from run.h5); then a 125M PaTH model at 64K for tokens/s and MFU.
#   scripts/device/bundle.sh gpath <lcr> <lcr_cuda_model_tests>  (strip, tar | xz into
#   .devbundle/gpack/gpath.tar.xz); run(command="tar xJf .devbundle/gpack/gpath.tar.xz -C
#   .devbundle && bash scripts/device/path_train_check.sh", carry=[".devbundle/gpack"])
set -u
source "$(dirname "$0")/common.sh"
export NCCL_NVLS_ENABLE=0
G=.devbundle/gpath/bin
q=(train.steps=40 train.log_every=5 eval.every=0 eval.at_end=false parallel.cp=1 run.overwrite=true
   attention.scheme=path attention.heads=2 attention.kv_heads=2 attention.head_dim=64)
CUDA_VISIBLE_DEVICES=0 timeout 120 $G/lcr_cuda_model_tests --gtest_color=no > $OUT/model.log 2>&1 &
CUDA_VISIBLE_DEVICES= timeout 150 $G/lcr train --config experiments/configs/default.toml "${q[@]}" run.dir='"runs/cpu_path"' > $OUT/cpu_path.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 100 $G/lcr train --config experiments/configs/default.toml "${q[@]}" train.device=cuda run.dir='"runs/gpu_path"' > $OUT/gpu_path.log 2>&1
CUDA_VISIBLE_DEVICES=1 timeout 150 $G/lcr train --config experiments/configs/gpu_125m_64k_goat.toml attention.scheme=path train.steps=6 train.log_every=3 run.overwrite=true run.dir='"runs/gpu64k_path"' > $OUT/path64k.log 2>&1
wait
suite_summary model
grep -h "^\[ [a-z_0-9]* \]" $OUT/model.log | head -14
train_tail gpu_path cpu_path path64k
compare_runs gpu_path cpu_path "PaTH, default task: GPU vs CPU"
