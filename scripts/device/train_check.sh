#!/usr/bin/env bash
# One device call for the GPU training path (train.device = "cuda"). Pack first (here):
#   scripts/device/bundle.sh gtrain <lcr> <lcr_cuda_model_tests> <lcr_cuda_attention_tests>
#   strip .devbundle/gtrain/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle gtrain | xz -T8 > .devbundle/gpack/gtrain.tar.xz
#   run(command="tar xJf .devbundle/gpack/gtrain.tar.xz -C .devbundle &&
#                bash scripts/device/train_check.sh", carry=[".devbundle/gpack"],
#       kind="nvidia-h200-x2")
# In parallel: GPU 0 the model tests, GPU 1 the GOAT lane tests (3 fresh seeds and a replay),
# the CPU the default config with cp = 2 (2 MPI ranks). Then on both GPUs: the default
# config with cp = 2 (the GPU ring inside the model; losses compared with the CPU run from
# run.h5), with dp = 2 (cp = 1, NCCL all-reduce), and a 125M GOAT model at 128K tokens
# with cp = 2 (tokens/s and MFU of ring training). Logs and a summary in $OUT.
set -u
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/train_check}
mkdir -p "$OUT"
B=${BUNDLE:-.devbundle/gtrain}/bin
mpi=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE)
source "$(dirname "$0")/common.sh"
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee -a "$OUT/summary.txt"
quick=(train.steps=60 train.log_every=5 eval.every=0 eval.at_end=false run.overwrite=true)

CUDA_VISIBLE_DEVICES=0 timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1 &
g0=$!
(
  for i in 1 2 3; do
    CUDA_VISIBLE_DEVICES=1 timeout 100 "$B/lcr_cuda_attention_tests" --gtest_filter='*goat*' \
      --gtest_color=no >"$OUT/lanes_goat.$i" 2>&1
  done
  CUDA_VISIBLE_DEVICES=1 LCR_TEST_SEED=2217899177049446753 timeout 60 "$B/lcr_cuda_attention_tests" \
    --gtest_filter='*goat2d_value_dim_differs*' --gtest_color=no >"$OUT/lanes_seed.log" 2>&1
  cat "$OUT"/lanes_goat.? >"$OUT/lanes_goat.log"; rm -f "$OUT"/lanes_goat.?
) &
g1=$!
CUDA_VISIBLE_DEVICES= timeout 200 "${mpi[@]}" -np 2 "$B/lcr" train \
  --config experiments/configs/default.toml "${quick[@]}" run.dir='"runs/cpu_cp2"' \
  >"$OUT/train_cpu_cp2.log" 2>&1 &
c0=$!
wait $g0 $g1
timeout 150 "${mpi[@]}" -np 2 "$B/lcr" train --config experiments/configs/default.toml \
  "${quick[@]}" train.device=cuda run.dir='"runs/gpu_cp2"' >"$OUT/train_gpu_cp2.log" 2>&1
timeout 150 "${mpi[@]}" -np 2 "$B/lcr" train --config experiments/configs/default.toml \
  "${quick[@]}" train.device=cuda parallel.cp=1 run.dir='"runs/gpu_dp2"' >"$OUT/train_gpu_dp2.log" 2>&1
timeout 200 "${mpi[@]}" -np 2 "$B/lcr" train --config experiments/configs/gpu_125m_64k_goat.toml \
  train.seq_len=131072 attention.goat.train_len=131072 parallel.cp=2 train.steps=10 \
  train.log_every=5 run.overwrite=true run.dir='"runs/gpu128k_cp2"' >"$OUT/train128k_cp2.log" 2>&1
wait $c0
echo "done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"

suite_summary model lanes_goat lanes_seed
grep -h '^\[ [a-z_0-9]* \]' "$OUT/model.log" | head -12 | tee -a "$OUT/summary.txt"
train_tail train_cpu_cp2 train_gpu_cp2 train_gpu_dp2 train128k_cp2
compare_runs gpu_cp2 cpu_cp2 "GPU ring (cp 2) vs CPU ring (cp 2), default config"
python3 - <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import h5py, numpy as np
try:
    with h5py.File("runs/gpu128k_cp2/run.h5", "r") as f:
        print("128K cp2: tokens/s", np.round(f["metrics/tokens_per_s"][:], 0).tolist(),
              "model TFLOP/s per GPU", np.round(f["metrics/model_tflops"][:], 1).tolist(),
              "mfu", np.round(f["metrics/mfu"][:], 3).tolist(), "mfu_palm",
              np.round(f["metrics/mfu_palm"][:], 3).tolist(), "loss", np.round(f["metrics/loss"][:], 3).tolist())
except Exception as e:
    print("128K run file:", e)
PY
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
