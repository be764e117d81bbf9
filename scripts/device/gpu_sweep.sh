#!/usr/bin/env bash
# One device call (nvidia-h200-x2): training-step points of a weak-scaling sweep on GPUs,
# 64K tokens per GPU (1 GPU: L = 65536; 2 GPUs: L = 131072, cp = 2), for NoPE, GOAT and
# PoPE, through `lcr scaling-point --kind train_step` with train.device=cuda: the same
# results file and format as a SLURM sweep (docs/scaling-results.md). The file comes back
# as $OUT/results.h5 for `analysis/lcr-analyze scaling`. Pack "gsweep" with lcr.
set -u
source "$(dirname "$0")/common.sh"
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/gpu_sweep}
mkdir -p "$OUT" runs/sweeps/gpu
B=${BUNDLE:-.devbundle/gsweep}/bin
R=runs/sweeps/gpu/results.h5
pt=(scaling-point -r "$R" --sweep gpu-weak-64k --kind train_step --scaling weak --warmup 2
  --reps 3 --config experiments/configs/gpu_125m_64k_goat.toml)
for s in nope goat pope; do
  timeout 150 "$B/lcr" "${pt[@]}" --scheme $s -L 65536 train.device=cuda \
    >"$OUT/$s.1gpu.log" 2>&1
  timeout 200 mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -np 2 "$B/lcr" \
    "${pt[@]}" --scheme $s -L 131072 --cp 2 train.device=cuda attention.goat.train_len=131072 \
    >"$OUT/$s.2gpu.log" 2>&1
  grep -hE "appended|rror" "$OUT/$s.1gpu.log" "$OUT/$s.2gpu.log" | cut -c1-200
done
cp "$R" "$OUT/results.h5"
