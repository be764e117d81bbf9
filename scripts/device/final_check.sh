#!/usr/bin/env bash
# One device call that checks everything GPU-side at the committed state and, on the
# machine's spare CPU cores, runs the PoPE-vs-RoPE indirect-indexing comparison at a
# budget the 2-core development machine cannot afford. Pack first (here):
#   scripts/device/bundle.sh final <lcr> <the CUDA test and bench binaries>
#   run(command="bash scripts/device/final_check.sh", carry=[".devbundle/final", ".whl"],
#       kind="nvidia-h200-x2", timeout_s=...)
# GPU 0: SDPA tests, PaTH tests (8 shards), PaTH benchmark (autotuned); GPU 1: lanes tests
# (8 shards), then fla's Triton PaTH; then the NCCL/ring tests on both GPUs.
# CPU: two `lcr train` runs (8 DP ranks each). Logs under $OUT; a summary is printed last.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/final_check}
mkdir -p "$OUT"
bin=.devbundle/final/bin
mpi=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE)
TRAIN_S=${TRAIN_S:-300}
source "$(dirname "$0")/common.sh"
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee "$OUT/summary.txt"

# CPU: PoPE vs RoPE on indirect indexing, same model, data, budget (global batch 64).
for s in pope rope; do
  CUDA_VISIBLE_DEVICES= timeout "$TRAIN_S" "${mpi[@]}" -np 8 --bind-to none "$bin/lcr" train \
    --config "experiments/configs/indirect_indexing_$s.toml" train.batch=8 train.steps=3000 \
    train.warmup=150 eval.every=500 train.ckpt_every=500 run.overwrite=true \
    >"$OUT/train_$s.log" 2>&1 &
done

# GPU 0: SDPA tests, PaTH tests, PaTH benchmark. GPU 1: lanes tests, then fla's PaTH.
(
  CUDA_VISIBLE_DEVICES=0 timeout 100 "$bin/lcr_cuda_sdpa_tests" --gtest_color=no >"$OUT/sdpa.log" 2>&1
  shard 0 "$bin/lcr_cuda_path_tests" path
  CUDA_VISIBLE_DEVICES=0 timeout 80 "$bin/bench_cuda_path" >"$OUT/path_bench.log" 2>&1
) &
g0=$!
shard 1 "$bin/lcr_cuda_attention_tests" lanes
if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .whl/*.whl >/dev/null 2>&1; then
  CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 timeout 120 \
    python3 kernels/attention/cuda/path/fla_peer.py >"$OUT/fla.log" 2>&1
fi
wait $g0
timeout 70 "${mpi[@]}" -np 2 "$bin/lcr_nccl_tests" --gtest_color=no >"$OUT/nccl2.log" 2>&1
timeout 30 "${mpi[@]}" -np 1 "$bin/lcr_nccl_tests" --gtest_color=no >"$OUT/nccl1.log" 2>&1
echo "GPU work done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
wait  # the training runs (bounded by TRAIN_S)

suite_summary sdpa path lanes nccl2 nccl1
echo "=== PaTH bench" | tee -a "$OUT/summary.txt"
grep -E "lcr-path|error" "$OUT/path_bench.log" | tee -a "$OUT/summary.txt"
grep -E "fla-path|rror" "$OUT/fla.log" | tail -6 | tee -a "$OUT/summary.txt"
echo "=== train" | tee -a "$OUT/summary.txt"
for s in pope rope; do
  grep -E "eval at|stopping|rror" "$OUT/train_$s.log" | cut -c1-220 | tee -a "$OUT/summary.txt"
  [[ -f runs/indirect_indexing_$s/run.h5 ]] && cp "runs/indirect_indexing_$s/run.h5" "$OUT/run_$s.h5"
done
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
# At most 8 files come back from $OUT: pack the logs.
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
