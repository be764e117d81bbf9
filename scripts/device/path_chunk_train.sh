#!/usr/bin/env bash
# Device check of PaTH training through the chunked single-GPU form (cuda::path::Chunked,
# train.path_chunk), nvidia-h200-x2, after recheck.sh in the same call (its bundle):
#   GPU 1: a PaTH model on the default task (L = 128) in chunks of 32, against the same run on
#          the CPU (losses compared from run.h5);
#   GPU 0: the 125M model at 64K with PaTH, automatic chunks (4096) and the whole-sequence
#          kernels (train.path_chunk = -1), tokens/s and MFU.
#   run(command="tar xJf .devbundle/gpack/recheck.tar.xz -C .devbundle &&
#                NCU=0 bash scripts/device/recheck.sh && bash scripts/device/path_chunk_train.sh",
#       carry=[".devbundle/gpack"], kind="nvidia-h200-x2")
set -u
source "$(dirname "$0")/common.sh"
OUT=${OUT:-/tmp/recheck}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
G=${BUNDLE:-.devbundle/recheck}/bin
q=(train.steps=40 train.log_every=5 eval.every=0 eval.at_end=false parallel.cp=1
  run.overwrite=true attention.scheme=path attention.heads=2 attention.kv_heads=2
  attention.head_dim=64)
CUDA_VISIBLE_DEVICES= timeout 150 $G/lcr train --config experiments/configs/default.toml \
  "${q[@]}" run.dir='"runs/cpu_path"' >$OUT/cpu_path.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 100 $G/lcr train --config experiments/configs/default.toml \
  "${q[@]}" train.device=cuda train.path_chunk=32 run.dir='"runs/gpu_path_chunked"' \
  >$OUT/gpu_path_chunked.log 2>&1 &
for c in 0 -1; do
  CUDA_VISIBLE_DEVICES=0 timeout 150 $G/lcr train --config experiments/configs/gpu_125m_64k_goat.toml \
    attention.scheme=path train.path_chunk=$c train.steps=8 train.log_every=4 run.overwrite=true \
    run.dir="\"runs/path64k_c$c\"" >$OUT/path64k_c$c.log 2>&1
done
wait
train_tail gpu_path_chunked cpu_path path64k_c0 path64k_c-1
compare_runs gpu_path_chunked cpu_path "PaTH, default task: GPU in chunks of 32 vs CPU"
