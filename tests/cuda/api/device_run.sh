#!/usr/bin/env bash
# One device call for the CUDA attention API (kernels/attention/cuda/api): the test
# binary in 8 parallel gtest shards (the float64 reference and the Kokkos CPU paths it
# compares with are single-threaded), then the benchmark. Build and pack here first:
#   ninja -C build-cudalanes lcr_cuda_attention_tests bench_cuda_attention
#   scripts/device/bundle.sh cudalanes build-cudalanes/tests/cuda/api/lcr_cuda_attention_tests \
#       build-cudalanes/kernels/attention/cuda/api/bench_cuda_attention
#   run(command="tests/cuda/api/device_run.sh", carry=[".devbundle/cudalanes"])
# Writes $OUT/tests.log and $OUT/bench.txt; prints a short summary last.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/cudalanes}
mkdir -p "$OUT"
bin=.devbundle/cudalanes/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
shards=8
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout ${TEST_TIMEOUT:-120} "$bin/lcr_cuda_attention_tests" \
    >"$OUT/shard_$i.log" 2>&1 &
done
wait
cat "$OUT"/shard_*.log >"$OUT/tests.log" && rm -f "$OUT"/shard_*.log
t1=$(date +%s)
timeout ${BENCH_TIMEOUT:-150} "$bin/bench_cuda_attention" ${BENCH_ARGS:-} >"$OUT/bench.txt" 2>&1
echo "bench exit $?" >>"$OUT/bench.txt"
t2=$(date +%s)
echo "=== worst GPU/naive error ratios (fwd, grad) ==="
grep -h '^\[ratio\]' "$OUT/tests.log" | sort -k4 -n -r | head -8
echo "=== tests ($((t1 - t0)) s): passed $(grep -c '^\[       OK \]' "$OUT/tests.log")," \
  "skipped $(grep -c '^\[  SKIPPED \]' "$OUT/tests.log")," \
  "failed $(grep -c '^\[  FAILED  \].*ms)' "$OUT/tests.log")"
grep -h -B3 'Failure' "$OUT/tests.log" | grep -v '^--' | head -40
grep -h '^\[  FAILED  \].*ms)' "$OUT/tests.log" | head -30
echo "=== bench ($((t2 - t1)) s) ==="
cat "$OUT/bench.txt"
