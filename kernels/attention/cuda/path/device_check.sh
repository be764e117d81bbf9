#!/usr/bin/env bash
# One device-tool call for the CUDA PaTH kernels, run on the GPU machine from the repository
# root with the bundle built here (scripts/device/bundle.sh cudapath <test> <bench>):
#   - fla's Triton PaTH peer (fla_peer.py) on GPU 1, in the background;
#   - bench_cuda_path on GPU 0 (autotuned variants, per-kernel profile; PaTH-FoX);
#   - then the CUDA PaTH tests on GPU 0, 8 gtest shards in parallel (the float64 references
#     are CPU work).
# Logs go to $OUT (test.log, bench.log, fla.log); a short summary is printed last.
#   run(command="bash kernels/attention/cuda/path/device_check.sh",
#       carry=[".devbundle/cudapath", ".whl"], kind="nvidia-h200-x2", timeout_s=300)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/cudapath-out}
mkdir -p "$OUT"
bin=.devbundle/cudapath/bin
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
peer_gpu=$((ngpu > 1 ? 1 : 0))
nvidia-smi -L >"$OUT/test.log" 2>&1

(
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target /tmp/site .whl/*.whl >/dev/null 2>&1; then
    CUDA_VISIBLE_DEVICES=$peer_gpu PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 \
      timeout 150 python3 kernels/attention/cuda/path/fla_peer.py
    CUDA_VISIBLE_DEVICES=$peer_gpu PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 \
      timeout 45 python3 kernels/attention/cuda/path/fla_peer.py --fox --rep-ms 200
  else
    echo "fla-path: wheels did not install"
  fi
) >"$OUT/fla.log" 2>&1 &
fla=$!

# The benchmark first (GPU 0 to itself), then the tests on GPU 0.
CUDA_VISIBLE_DEVICES=0 timeout 90 "$bin/bench_cuda_path" --profile >"$OUT/bench.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 30 "$bin/bench_cuda_path" --fox --reps 5 >>"$OUT/bench.log" 2>&1

shards=8
pids=""
for i in $(seq 0 $((shards - 1))); do
  CUDA_VISIBLE_DEVICES=0 GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout 120 \
    "$bin/lcr_cuda_path_tests" --gtest_filter='Cases/CudaPath.*:CudaPathArgs.*' >"$OUT/shard$i.log" 2>&1 &
  pids="$pids $!"
done
wait $pids
for i in $(seq 0 $((shards - 1))); do cat "$OUT/shard$i.log" >>"$OUT/test.log"; done
rm -f "$OUT"/shard*.log
wait $fla

echo "=== tests"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|error" "$OUT/test.log" | sort | uniq -c | head -40
grep -E "^(PaTH|PaTHFoX)_" "$OUT/test.log" | cut -c1-230
echo "=== bench"
grep -E "lcr-path|variant|kernel |bench_cuda_path|error" "$OUT/bench.log"
echo "=== fla"
grep -E "fla-path|Error|error" "$OUT/fla.log" | tail -12
