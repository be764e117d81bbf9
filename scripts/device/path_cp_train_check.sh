#!/usr/bin/env bash
# One device call (nvidia-h200-x2): PaTH and PaTH-FoX training with context parallelism on
# the GPUs (gpu_path_shards: the convolution's rows across chunks and the GPU PaTH ring).
# The default task with a d = 64 PaTH model, cp = 2 on the two GPUs, against the same run on
# the CPU ring (2 MPI ranks) and on one GPU (cp = 1); then the 125M model at 128K tokens
# (64K per GPU) with cp = 2 for tokens/s (SMALL=0 / BIG=0 leave either part out; EXTRA adds
# config overrides to the small runs, e.g. "attention.numerics.sink=true"). Pack here:
#   scripts/device/bundle.sh pcp build-nccl/core/cli/lcr; strip .devbundle/pcp/bin/.real/*
#   mkdir -p .devbundle/gpack; tar cf - -C .devbundle pcp | xz -T2 > .devbundle/gpack/pcp.tar.xz
#   run(command="tar xJf .devbundle/gpack/pcp.tar.xz -C .devbundle &&
#                bash scripts/device/path_cp_train_check.sh", carry=[".devbundle/gpack"],
#       kind="nvidia-h200-x2")
set -u
source "$(dirname "$0")/common.sh"
device_init pcp
mpi+=(-x CUDA_VISIBLE_DEVICES)  # every launch below sets it
for scheme in $( ((${SMALL:-1})) && echo path path_fox); do
  q=(train.steps=${STEPS:-40} train.log_every=5 eval.every=0 eval.at_end=false run.overwrite=true
     attention.scheme=$scheme attention.heads=2 attention.kv_heads=2 attention.head_dim=64
     ${EXTRA:-})
  CUDA_VISIBLE_DEVICES= timeout 240 "${mpi[@]}" -np 2 "$B/lcr" train --config \
    experiments/configs/default.toml "${q[@]}" parallel.cp=2 run.dir="\"runs/cpu_cp2_$scheme\"" \
    >"$OUT/cpu_cp2_$scheme.log" 2>&1 &
  cpu=$!
  CUDA_VISIBLE_DEVICES=0,1 timeout 120 "${mpi[@]}" -np 2 "$B/lcr" train --config \
    experiments/configs/default.toml "${q[@]}" train.device=cuda parallel.cp=2 \
    run.dir="\"runs/gpu_cp2_$scheme\"" >"$OUT/gpu_cp2_$scheme.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 timeout 100 "$B/lcr" train --config experiments/configs/default.toml \
    "${q[@]}" train.device=cuda parallel.cp=1 run.dir="\"runs/gpu_cp1_$scheme\"" \
    >"$OUT/gpu_cp1_$scheme.log" 2>&1
  wait $cpu
  train_tail gpu_cp2_$scheme cpu_cp2_$scheme gpu_cp1_$scheme
  compare_runs gpu_cp2_$scheme cpu_cp2_$scheme "$scheme, default task: GPU ring (cp 2) vs CPU ring (cp 2)"
  compare_runs gpu_cp2_$scheme gpu_cp1_$scheme "$scheme, default task: GPU ring (cp 2) vs one GPU"
done
echo "small runs done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
if ((${BIG:-1})); then
  CUDA_VISIBLE_DEVICES=0,1 timeout 240 "${mpi[@]}" -np 2 "$B/lcr" train --config \
    experiments/configs/gpu_125m_64k_goat.toml attention.scheme=path train.seq_len=131072 \
    parallel.cp=2 train.steps=6 train.log_every=2 run.overwrite=true \
    run.dir='"runs/gpu128k_path_cp2"' >"$OUT/path128k_cp2.log" 2>&1
  train_tail path128k_cp2
fi
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
