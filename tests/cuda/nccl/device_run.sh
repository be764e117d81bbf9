#!/usr/bin/env bash
# One call on the 2-GPU machine (device tool, kind nvidia-h200-x2) for the NCCL work:
# the NCCL/ring tests under 2 and 1 ranks, then the ring benchmark (a short one first, so
# a slow kernel still leaves a figure, then the 128K-token one). Logs go to $OUT; a short
# summary is printed last. Pack the binaries first (here):
#   scripts/device/bundle.sh nccl build-nccl/tests/cuda/nccl/lcr_nccl_tests \
#                                 build-nccl/parallel/ring/cuda/bench_cuda_ring
#   run(command="tests/cuda/nccl/device_run.sh", carry=[".devbundle/nccl"], kind="nvidia-h200-x2")
set -u
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on the shared hosts (see nccl_communicator.cpp)
bin=.devbundle/nccl/bin
OUT=${OUT:-/tmp/nccl_out}
mkdir -p "$OUT"
mpi=(mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE)
date -u +%Y-%m-%dT%H:%MZ | tee "$OUT/machine.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/machine.txt"
nvidia-smi topo -m >>"$OUT/machine.txt" 2>&1
ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* >>"$OUT/machine.txt" 2>&1

run() {  # name timeout command...
  local name=$1 t=$2
  shift 2
  local t0=$SECONDS
  timeout "$t" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: rc=$rc ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
}
run tests_np2 120 "${mpi[@]}" -np 2 "$bin/lcr_nccl_tests" --gtest_color=no
run tests_np1 60 "${mpi[@]}" -np 1 "$bin/lcr_nccl_tests" --gtest_color=no
run bench_short 60 "${mpi[@]}" -x NCCL_DEBUG=VERSION -np 2 "$bin/bench_cuda_ring" --L 32768 --iters 2
run bench 200 "${mpi[@]}" -np 2 "$bin/bench_cuda_ring"
run bench_contiguous 60 "${mpi[@]}" -np 2 "$bin/bench_cuda_ring" --layout contiguous --D 128 --iters 2

echo "=== tests (2 ranks): failures and max errors"
grep -E "FAILED|Failure|failure|fatal|max err|PASSED|SKIPPED \]|RUN      \]" "$OUT/tests_np2.log" | head -150
echo "=== tests (1 rank)"
grep -E "FAILED|fatal|PASSED" "$OUT/tests_np1.log" | head -20
echo "=== bench (32K)"
grep -vE "^RESULT" "$OUT/bench_short.log" | tail -12
echo "=== bench (128K)"
grep -vE "^RESULT" "$OUT/bench.log" | tail -12
echo "=== bench (128K, contiguous)"
grep -vE "^RESULT" "$OUT/bench_contiguous.log" | tail -4
echo "=== summary"
cat "$OUT/summary.txt"
