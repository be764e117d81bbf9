#!/usr/bin/env bash
# One device call (nvidia-h200-x2) that re-runs every CUDA suite at the committed state and
# checks the GPU training paths not yet run on hardware, plus a hardware-counter profile of
# the SDPA backward next to FlashAttention-2's. Pack first (here):
#   scripts/device/bundle.sh recheck <lcr> <the five CUDA test binaries> <bench_cuda_sdpa>
#   strip .devbundle/recheck/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle recheck | xz -T2 > .devbundle/gpack/recheck.tar.xz
#   run(command="tar xJf .devbundle/gpack/recheck.tar.xz -C .devbundle &&
#                bash scripts/device/recheck.sh", carry=[".devbundle/gpack"], kind="nvidia-h200-x2")
# GPU 0: SDPA, model and PaTH suites, then ncu on lcr's and FA2's backward (D = 64, 128;
# NCU=0 leaves the profile out). BUNDLE=.devbundle/NAME picks another bundle.
# GPU 1: the whole lanes suite (8 shards), then resume-from-checkpoint on the GPU (a run
# stopped at step 20 and resumed to 40 against the uninterrupted 40 steps).
# CPU meanwhile: the FoX default config with cp = 2 on two MPI ranks. Then both GPUs: the
# NCCL suite on 2 ranks and the same FoX config with cp = 2 on the GPU ring.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/recheck}
mkdir -p "$OUT"
B=${BUNDLE:-.devbundle/recheck}/bin
mpi=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE)
quick=(train.log_every=5 eval.every=0 eval.at_end=false)
source "$(dirname "$0")/common.sh"
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee "$OUT/summary.txt"

CUDA_VISIBLE_DEVICES= timeout 240 "${mpi[@]}" -np 2 "$B/lcr" train --config \
  experiments/configs/default.toml "${quick[@]}" train.steps=60 attention.scheme=fox \
  run.overwrite=true run.dir='"runs/cpu_fox"' >"$OUT/train_cpu_fox.log" 2>&1 &
c0=$!
(
  CUDA_VISIBLE_DEVICES=0 timeout 100 "$B/lcr_cuda_sdpa_tests" --gtest_color=no >"$OUT/sdpa.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
  shard 0 "$B/lcr_cuda_path_tests" path
  ncu_opts=(--clock-control none -k regex:sdpa_bwd --launch-skip 2 --launch-count 1
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats
    --section InstructionStats)
  for d in $( ((${NCU:-1})) && echo 64 128); do
    CUDA_VISIBLE_DEVICES=0 timeout 120 ncu "${ncu_opts[@]}" "$B/.real/bench_cuda_sdpa" --B 1 \
      --H 16 --L 16384 --D $d --bwd-only --reps 3 --warmup 1 --sets 1 >"$OUT/ncu_lcr_d$d.log" 2>&1
  done
  for d in $( ((${NCU:-1})) && echo 64 128); do
    CUDA_VISIBLE_DEVICES=0 timeout 120 ncu "${ncu_opts[@]/regex:sdpa_bwd/regex:flash_bwd_dq}" \
      python3 - $d >"$OUT/ncu_fa2_d$d.log" 2>&1 <<'PY'
import sys, torch
from torch.nn.attention import sdpa_kernel, SDPBackend
d = int(sys.argv[1])
q, k, v = (torch.randn(1, 16, 16384, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    for _ in range(4):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(torch.ones_like(o))
torch.cuda.synchronize()
PY
  done
) &
g0=$!
(
  shard 1 "$B/lcr_cuda_attention_tests" lanes
  res=(--config experiments/configs/default.toml "${quick[@]}" train.device=cuda parallel.cp=1
    train.steps=40 train.ckpt_every=20)
  CUDA_VISIBLE_DEVICES=1 timeout 150 "$B/lcr" train "${res[@]}" run.overwrite=true \
    run.dir='"runs/gpu_straight"' >"$OUT/train_straight.log" 2>&1
  CUDA_VISIBLE_DEVICES=1 timeout 150 "$B/lcr" train "${res[@]}" run.overwrite=true \
    train.stop_after=20 run.dir='"runs/gpu_resumed"' >"$OUT/train_part1.log" 2>&1
  CUDA_VISIBLE_DEVICES=1 timeout 150 "$B/lcr" train "${res[@]}" run.dir='"runs/gpu_resumed"' \
    >"$OUT/train_part2.log" 2>&1
) &
g1=$!
wait $g0 $g1
timeout 90 "${mpi[@]}" -np 2 "$B/lcr_nccl_tests" --gtest_color=no >"$OUT/nccl2.log" 2>&1
wait $c0
timeout 200 "${mpi[@]}" -np 2 "$B/lcr" train --config experiments/configs/default.toml \
  "${quick[@]}" train.steps=60 attention.scheme=fox train.device=cuda run.overwrite=true \
  run.dir='"runs/gpu_fox"' >"$OUT/train_gpu_fox.log" 2>&1
echo "done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"

suite_summary sdpa model path lanes nccl2
train_tail train_cpu_fox train_gpu_fox train_straight train_part1 train_part2
compare_runs gpu_fox cpu_fox "FoX cp=2: GPU ring vs CPU ring"
compare_runs gpu_resumed gpu_straight "GPU resume (20 + 20) vs 40 straight"
if ((${NCU:-1})); then
  echo "=== ncu (SOL, pipes, stalls)" | tee -a "$OUT/summary.txt"
  for f in ncu_lcr_d64 ncu_fa2_d64 ncu_lcr_d128 ncu_fa2_d128; do
    echo "-- $f" | tee -a "$OUT/summary.txt"
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc A|No Eligible|Shared Memory Configuration Size|Warp Cycles Per Issued|Bank" \
      "$OUT/$f.log" | head -16 | tee -a "$OUT/summary.txt"
  done
fi
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
